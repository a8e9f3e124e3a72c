"""Ingest: one reader per input format (LoCoMo JSON, JSON Lines, LongMemEval JSON) into
validated conversations, and the one bank-id rule (:func:`bank_id_for`) for readers that make a
bank per conversation. See :mod:`memlane.ingest.common` for the strict and collecting modes."""

from memlane.ingest.common import Conversation, InputError, Reject, bank_id_for
from memlane.ingest.loaders import FORMATS, detect_format, load_conversations
from memlane.ingest.locomo import read_locomo
from memlane.ingest.longmemeval import LMEQuestion, load_longmemeval, read_longmemeval

__all__ = [
    "FORMATS",
    "Conversation",
    "InputError",
    "LMEQuestion",
    "Reject",
    "bank_id_for",
    "detect_format",
    "load_conversations",
    "load_longmemeval",
    "read_locomo",
    "read_longmemeval",
]
