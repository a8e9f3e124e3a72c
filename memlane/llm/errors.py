"""Errors of the LLM layer. Both are MemlaneErrors, so the CLI prints them as one line."""

from memlane.errors import MemlaneError


class LLMError(MemlaneError):
    """The model server could not be reached or refused the request (after the retries)."""


class LLMOutputError(LLMError):
    """The model answered, but not with output that passes validation (after one repair)."""
