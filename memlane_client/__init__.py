"""Python SDK for the Memlane HTTP service (see :mod:`memlane_client.client`).

A package of its own, beside the engine: importing it pulls in httpx only, never the engine's
torch, models or matplotlib, so an application that talks to a running service stays light.
"""

from memlane_client.client import AsyncMemlaneClient, MemlaneAPIError, MemlaneClient

__all__ = ["AsyncMemlaneClient", "MemlaneAPIError", "MemlaneClient"]
