"""The Ray actors export the per-bank state they hold under the engine's budget as the service's
replicas do (``ray_memlane_recall_warm_banks`` / ``_bytes``, actors/gauges.py), tagged with the
actor's kind: a real actor on a local Ray holding a real derived state over Milvus Lite, read
back from the node's Prometheus endpoint."""

from __future__ import annotations

import time
import urllib.request

import pytest
from dashboard_metrics import ray_env

pytestmark = pytest.mark.slow


def test_an_actor_exports_the_banks_it_holds(tmp_path):
    import ray

    from cluster.local import start_local_ray

    with ray_env():  # the gauges reach the endpoint within one export interval
        ctx = start_local_ray(num_cpus=1, include_dashboard=False)
    try:

        @ray.remote
        class Holder:
            """Holds one bank of 3 memories, as a retain worker does while it retains it."""

            def __init__(self, data_dir: str) -> None:
                from actors.gauges import export_held_state
                from memlane.derived import DerivedState
                from memlane.settings import Settings
                from memlane.stores.milvus import MilvusStore
                from memlane.stores.sparse_graph import SparseGraphStore
                from tests.memlane.test_milvus_store import DIM, unit

                self.store = MilvusStore(Settings(data_dir=data_dir), dim=DIM)
                self.store.upsert_units("b1", [unit("b1", f"u{i}", seed=i) for i in range(3)])
                self.derived = DerivedState(self.store, SparseGraphStore(), DIM)
                self.derived.ensure("b1")
                export_held_state(self.derived, kind="RetainWorker")

            def ping(self) -> int:
                return self.derived.held_banks()

        holder = Holder.remote(str(tmp_path / "data"))
        assert ray.get(holder.ping.remote()) == 1
        url = f"http://127.0.0.1:{ctx.address_info['metrics_export_port']}/metrics"
        values: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while len(values) < 2 and time.monotonic() < deadline:
            for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
                for name in ("ray_memlane_recall_warm_banks", "ray_memlane_recall_warm_bytes"):
                    if line.startswith(name + "{") and 'deployment="RetainWorker"' in line:
                        values[name] = float(line.rsplit(" ", 1)[1])
            if len(values) < 2:
                time.sleep(1)
        from memlane.derived import BYTES_PER_MEMORY

        assert values == {
            "ray_memlane_recall_warm_banks": 1.0,
            "ray_memlane_recall_warm_bytes": 3.0 * BYTES_PER_MEMORY,
        }
    finally:
        ray.shutdown()
