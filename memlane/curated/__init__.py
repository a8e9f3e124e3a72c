"""Curated memory (Hindsight's mental models and directives): see :mod:`memlane.curated.facade`."""

from memlane.curated.facade import CuratedService

__all__ = ["CuratedService"]
