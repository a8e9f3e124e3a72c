"""Keep every Serve replica's listener on loopback in the local service.

Ray Serve 2.60 starts an inter-deployment gRPC server in every replica bound to ``[::]:0``,
all interfaces, with no setting to change it (ray/serve/_private/replica.py,
``_on_initialized``). Found by the exposure test: each of the five replicas of ``memlane
serve`` listened on ``*:PORT``. The local service binds everything else to 127.0.0.1, so its
workers run :func:`bind_replicas_to_loopback` at start (a Ray ``worker_process_setup_hook``),
which makes that server bind 127.0.0.1 instead. The node's address is 127.0.0.1 in that
service, so whatever reaches a replica through it still does.
"""

from __future__ import annotations

ALL_INTERFACES = "[::]:"
LOOPBACK = "127.0.0.1:"


def bind_replicas_to_loopback() -> None:
    """Wrap the replica module's port binding so an all-interfaces address becomes loopback."""
    from ray.serve._private import replica

    bind = replica.add_port_to_grpc_server
    if getattr(bind, "_memlane_loopback", False):
        return

    def loopback_bind(server, address: str):
        if address.startswith(ALL_INTERFACES):
            address = LOOPBACK + address[len(ALL_INTERFACES) :]
        return bind(server, address)

    loopback_bind._memlane_loopback = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = loopback_bind
