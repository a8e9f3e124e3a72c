"""The backfill's resume ledger: ``backfill-ledger.jsonl`` in the data directory, one line per
bank retained (appended as results stream in), and the rule a re-run skips a bank by.

A bank is skipped when its input is unchanged (the same fingerprint) and the bank still holds
what that retain left of it: the memories of the input's documents as then (a digest of their
ids and texts), whatever else the bank received since (another path's documents, an API
write). A bank whose input's memories went, changed in number or were rewritten by another
path (a deletion, a crash that cut it, a REST retain of one of its documents) is retained
again, which rewrites only what differs. A ledger line from before the digest is judged by the
bank's unit count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.retain import input_units
from pipelines.corpus import BankInput

LEDGER_FILE = "backfill-ledger.jsonl"
# What the ledger keeps of a retained bank's result row.
KEYS = ("bank_id", "fingerprint", "turns", "memories", "entities", "links", "bank_units", "input_units")


def read(path: Path) -> dict[str, dict[str, Any]]:
    """The ledger's last line per bank ({} when there is no ledger)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            done[rec["bank_id"]] = rec
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash
    return done


def line(rec: dict[str, Any]) -> str:
    """The ledger line of a retained bank's result row."""
    return json.dumps({k: rec[k] for k in KEYS}) + "\n"


def split_done(
    banks: list[tuple[BankInput, str, str]], ledger: dict[str, dict[str, Any]], store: Any
) -> tuple[list[tuple[BankInput, str, str]], list[dict[str, Any]]]:
    """``banks`` (bank, payload, fingerprint) split into those to retain and the ledger lines
    of those to skip (see the module)."""
    todo, skipped = [], []
    for bank, payload, fp in banks:
        prev = ledger.get(bank.bank_id)
        if prev and prev.get("fingerprint") == fp and holds_its_input(store, bank, prev):
            skipped.append(prev)
        else:
            todo.append((bank, payload, fp))
    return todo, skipped


def holds_its_input(store: Any, bank: BankInput, prev: dict[str, Any]) -> bool:
    """Whether the bank holds what the ledger line ``prev`` says its retain left. A line without
    the documents' digest is judged by the count alone (a line before that count: by its
    memories)."""
    held = prev.get("input_units")
    if held:
        return bool(held == input_units(store, bank.bank_id, [doc for doc, _ in bank.documents]))
    return bool(store.count_units(bank.bank_id) == prev.get("bank_units", prev.get("memories")))
