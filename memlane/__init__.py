"""Memlane: agent memory with retain, recall and reflect over four memory networks.

The engine is plain Python (no Ray). Start with :class:`memlane.engine.Memory`.
"""

__version__ = "0.1.0"

from memlane.settings import Settings  # noqa: E402

__all__ = ["Memory", "Settings", "__version__"]


def __getattr__(name: str):
    # Importing the engine pulls in model code paths lazily; keep `import memlane` cheap.
    if name == "Memory":
        from memlane.engine import Memory

        return Memory
    raise AttributeError(name)
