"""Ray Data jobs over the engine: the bulk backfill (``pipelines.backfill``) and its corpus
readers (``pipelines.corpus``)."""
