"""Curated memory (Hindsight's mental models and directives): see :mod:`memlane.curated.service`."""

from memlane.curated.service import CuratedService

__all__ = ["CuratedService"]
