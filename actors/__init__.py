"""Ray actors that give engine parts a home on a cluster (``actors.retain.RetainWorker``)."""
