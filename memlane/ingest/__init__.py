"""Ingest: read chat-history files (LoCoMo JSON, JSON Lines) into validated conversations."""

from memlane.ingest.loaders import (
    FORMATS,
    Conversation,
    InputError,
    detect_format,
    load_conversations,
)

__all__ = ["FORMATS", "Conversation", "InputError", "detect_format", "load_conversations"]
