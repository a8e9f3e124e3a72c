"""Ray Serve: the FastAPI ingress and the embed / recall / rerank / reflect / memory
deployments (see docs/service.md)."""
