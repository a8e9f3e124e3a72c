"""Where Memlane's metrics go, behind one small interface, so each metric is named once (its
class: serve/metrics.py, actors/store_metrics.py) whatever records it. :class:`RayExport`:
Ray's metric classes, which Ray's metrics agent exports on each node with a ``ray_`` prefix
(the Ray runtime, the backfill's workers). The one-process runtime records the same metrics
with prometheus_client instead (serve/metrics.py's ``PrometheusExport``): it has no Ray."""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence


class Export(Protocol):
    """Builds metrics with Ray's calls: a counter's ``inc(value, tags=...)``, a histogram's
    ``observe(value, tags=...)`` (``tags``: a dict with every one of ``tag_keys``)."""

    def counter(self, name: str, description: str, tag_keys: tuple[str, ...] = ()) -> Any: ...

    def histogram(
        self, name: str, description: str, boundaries: Sequence[float], tag_keys: tuple[str, ...] = ()
    ) -> Any: ...

    def gauge(self, name: str, description: str, read: Callable[[], float]) -> None:
        """A gauge that reads ``read()`` for as long as its process lives."""


class RayExport:
    """Ray's metric classes: Ray Serve's with ``serve`` (in a replica they add the deployment,
    replica and application tags), else ray.util.metrics'."""

    def __init__(self, serve: bool = False) -> None:
        self.serve = serve

    def _classes(self) -> Any:
        if self.serve:
            from ray.serve import metrics as serve_metrics

            return serve_metrics
        from ray.util import metrics as util_metrics

        return util_metrics

    def counter(self, name: str, description: str, tag_keys: tuple[str, ...] = ()) -> Any:
        return self._classes().Counter(name, description, tag_keys=tag_keys)

    def histogram(
        self, name: str, description: str, boundaries: Sequence[float], tag_keys: tuple[str, ...] = ()
    ) -> Any:
        return self._classes().Histogram(name, description, boundaries=list(boundaries), tag_keys=tag_keys)

    def gauge(self, name: str, description: str, read: Callable[[], float]) -> None:
        from actors.gauges import keep

        # Ray's agent drops a gauge that is not set again within two export intervals
        keep(name, self._classes().Gauge(name, description), read)
