"""LangGraph's long-term memory store on Memlane: :class:`MemlaneStore`, a LangGraph
``BaseStore`` (sync ``batch``, async ``abatch``) over the engine (:class:`memlane.Memory`) or
the HTTP service (a :class:`memlane_client.MemlaneClient`). Install the extra:
``pip install -e '.[langgraph]'``.

    from typing import TypedDict
    from langgraph.graph import START, StateGraph
    from langgraph.store.base import BaseStore
    from memlane import Memory
    from memlane.integrations.langgraph import MemlaneStore

    class State(TypedDict, total=False):
        question: str
        answer: str

    def remember(state: State, *, store: BaseStore) -> dict:
        store.put(("alice", "facts"), "dog", {"text": "Alice's dog is called Biscuit"})
        return {}

    def answer(state: State, *, store: BaseStore) -> dict:
        hits = store.search(("alice",), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"]}

    with Memory() as memory:  # the service: MemlaneStore(MemlaneClient(url, api_key=KEY))
        graph = StateGraph(State).add_node(remember).add_node(answer)
        graph = graph.add_edge(START, "remember").add_edge("remember", "answer")
        print(graph.compile(store=MemlaneStore(memory)).invoke({"question": "What is the dog called?"}))

How LangGraph's store maps onto Memlane:

- **Namespaces are banks and tags.** A namespace's first label is the bank id (``alice``: 1-128
  letters, digits, ``_`` or ``-``; anything else is an ``InvalidNamespaceError`` naming the
  rule); every prefix of the namespace is a tag on the item (``lg:ns=alice``,
  ``lg:ns=alice.facts``), so a search under a prefix recalls only what lies under it, and other
  memories of the bank never answer a store search. ``MemlaneStore(memory, bank="agent")``
  keeps every namespace in one bank instead (the whole namespace as tags).
- **A key is a document.** ``put`` retains the item as one document (its id derived from the
  namespace and key, the key kept as the tag ``lg:key=KEY``); a ``put`` of the same key replaces
  it, as a document retained again does; ``put(..., None)`` and ``delete`` delete it. A ``put``
  creates a missing bank.
- **Values are JSON.** The retained text is the value's JSON (so every field is searchable), and
  ``get`` and ``search`` give the value back as that JSON reads (dicts, lists, strings,
  numbers, booleans, None; a tuple comes back as a list). ``created_at`` and ``updated_at`` are
  both the time of the last ``put``, to the second.
- **Search.** With ``query``: Memlane's recall over the prefix's tag, best first, ``score`` its
  final score. Without: the items under the prefix, newest first. ``filter`` matches value
  fields (``{"kind": "pet"}``, nested dicts, lists; operators ``$eq $ne $gt $gte $lt $lte``),
  applied to what the recall found. Refused with an error rather than ignored: other
  operators, ``index=`` (field lists or False: Memlane indexes the whole value) and TTLs.

The exact round trip reads the memory retain writes for the item's one turn, which is the
turn's own text with the rules extractor (``retain.extractor``, the default); with the LLM
extractor, whose facts rewrite the text, ``get`` raises an error saying so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memlane.integrations.backends import Backend, EngineBackend, ServiceBackend, Stored, backend_for

__all__ = ["MemlaneStore", "EngineBackend", "ServiceBackend", "Backend", "Stored"]

NS_TAG = "lg:ns="  # + the labels of one prefix of the namespace, joined by "." (no label holds one)
KEY_TAG = "lg:key="  # + the item's key
STORE_TAG = "lg:store"  # on every item the store writes: what a search of the whole store reads
SPEAKER = "langgraph"  # who "says" each item's turn: its memory's text is "langgraph: <json>"
MAX_TAG_BYTES = 512  # a tag is a list element of the store (memlane/stores/milvus/codec.py)
MAX_CONTENT_CHARS = 60_000  # a retain item's content (memlane.records.RetainItem)
MAX_TEXT_BYTES = 65_535  # a memory's text (Milvus VARCHAR)
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _bank_error(namespace: tuple[str, ...], label: str) -> str | None:
    from memlane.records import check_bank_id

    try:
        check_bank_id(label)
    except ValueError as exc:
        return f"namespace {namespace!r}: its first label is the Memlane bank id, and {exc}"
    return None


def _filter_error(flt: dict[str, Any], where: str = "filter") -> str | None:
    for field, want in flt.items():
        if not isinstance(field, str):
            return f"{where}: field names are strings, not {field!r}"
        if field.startswith("$"):
            return f"{where}: {field!r} is not supported: operators go under a field ({OPERATORS})"
        if isinstance(want, dict) and any(isinstance(k, str) and k.startswith("$") for k in want):
            for op, arg in want.items():
                if op not in OPERATORS:
                    return f"{where}.{field}: operator {op!r} is not supported (supported: {', '.join(OPERATORS)})"
                if op in ("$gt", "$gte", "$lt", "$lte") and (
                    isinstance(arg, bool) or not isinstance(arg, (int, float, str))
                ):
                    return f"{where}.{field}: {op} compares numbers or strings, not {arg!r}"
        elif isinstance(want, dict):
            if (err := _filter_error(want, f"{where}.{field}")) is not None:
                return err
    return None


def _order(a: Any, op: str, b: Any) -> bool:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if not numbers and not (isinstance(a, str) and isinstance(b, str)):
        return False  # a missing field or another type never matches a comparison
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _matches(value: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(
                value == arg if op == "$eq" else value != arg if op == "$ne" else _order(value, op, arg)
                for op, arg in want.items()
            )
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(value, list)
            and len(value) == len(want)
            and all(_matches(v, w) for v, w in zip(value, want))
        )
    return value == want


def _namespace_matches(namespace: tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if cond.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for n, p in zip(part, path))


class MemlaneStore(BaseStore):
    """A LangGraph ``BaseStore`` over Memlane (see the module's docstring for the mapping).

    ``target``: a :class:`memlane.Memory`, a :class:`memlane_client.MemlaneClient`, or a
    :class:`Backend`. ``bank``: one bank for every namespace (default: the namespace's first
    label). ``recall_max_tokens``: the recall budget of a query search (default: 512 tokens per
    item asked for, at least 4096)."""

    supports_ttl = False

    def __init__(self, target: Any, *, bank: str | None = None, recall_max_tokens: int | None = None) -> None:
        self.backend: Backend = backend_for(target)
        if bank is not None and (err := _bank_error((bank,), bank)) is not None:
            raise ValueError(err.replace("its first label is", "bank="))
        self.bank = bank
        self.recall_max_tokens = recall_max_tokens

    # the mapping ---------------------------------------------------------------------------
    def _check(self, namespace: tuple[str, ...], *, prefix: bool = False, suffix: bool = False) -> None:
        """LangGraph's label rules ("*" allowed in a listing's path), and a first label that
        can be a bank id."""
        if not prefix and not namespace:
            raise InvalidNamespaceError("namespace cannot be empty")
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label or "\x00" in label:
                raise InvalidNamespaceError(
                    f"namespace {namespace!r}: labels are non-empty strings without '.' or NUL, not {label!r}"
                )
        if self.bank is None and not suffix and namespace and namespace[0] != "*":
            if (err := _bank_error(namespace, namespace[0])) is not None:
                raise InvalidNamespaceError(err)
        for i in range(1, len(namespace) + 1):
            if len((NS_TAG + ".".join(namespace[:i])).encode()) > MAX_TAG_BYTES:
                raise InvalidNamespaceError(
                    f"namespace {namespace!r}: at most {MAX_TAG_BYTES - len(NS_TAG)} bytes with the dots"
                )

    def _banks(self, first: str | None) -> list[str]:
        """The banks a namespace prefix starting with ``first`` (None or "*": any) may be in."""
        if self.bank is not None:
            return [self.bank]
        return self.backend.banks() if first in (None, "*") else [first]

    @staticmethod
    def _tags(namespace: tuple[str, ...], key: str) -> list[str]:
        ns = [NS_TAG + ".".join(namespace[:i]) for i in range(1, len(namespace) + 1)]
        return [STORE_TAG, *ns, KEY_TAG + key]

    @staticmethod
    def _prefix_tags(prefix: tuple[str, ...]) -> list[str]:
        return [NS_TAG + ".".join(prefix)] if prefix else [STORE_TAG]

    @staticmethod
    def _document_id(namespace: tuple[str, ...], key: str) -> str:
        # derived, not the key itself: one key may be in two namespaces of a bank, and a key may
        # hold characters a document's URL path cannot (the service's DELETE .../documents/{id})
        digest = hashlib.sha256(json.dumps([*namespace, key]).encode()).hexdigest()
        return f"lg-{digest[:40]}"

    def _item(self, stored: Stored, *, score: bool = False) -> SearchItem | None:
        """The item a memory holds; None for a memory the store did not write."""
        ns_tags = [t[len(NS_TAG) :] for t in stored.tags if t.startswith(NS_TAG)]
        keys = [t[len(KEY_TAG) :] for t in stored.tags if t.startswith(KEY_TAG)]
        if not ns_tags or len(keys) != 1:
            return None
        namespace = tuple(max(ns_tags, key=len).split("."))
        head = f"{SPEAKER}: "
        try:
            if not stored.text.startswith(head):
                raise ValueError("no item text")
            value = json.loads(stored.text[len(head) :])
            if not isinstance(value, dict):
                raise ValueError("not an object")
        except ValueError:
            raise ValueError(
                f"item {namespace!r}/{keys[0]!r}: its memory no longer holds the value's JSON "
                "(retain.extractor 'llm' rewrites memories; the store needs the 'rules' extractor)"
            ) from None
        return SearchItem(
            namespace=namespace,
            key=keys[0],
            value=value,
            created_at=stored.at,
            updated_at=stored.at,
            score=stored.score if score else None,
        )

    # the operations --------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; consecutive puts are written together (per bank, in one
        retain; the last put of a key in the run wins)."""
        ops = list(ops)
        for op in ops:  # all checked before anything runs
            self._validate(op)
        results: list[Result] = [None] * len(ops)
        run: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                run.pop((op.namespace, op.key), None)
                run[(op.namespace, op.key)] = op
                continue
            self._write(run)
            run = {}
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
        self._write(run)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the engine and the SDK's client are synchronous)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _validate(self, op: Op) -> None:
        if isinstance(op, PutOp):
            self._check(op.namespace)
            if op.index is not None:
                raise ValueError(
                    f"put {op.namespace!r}/{op.key!r}: index={op.index!r} is not supported: "
                    "Memlane indexes the whole value (leave index out)"
                )
            if op.ttl is not None:
                raise NotImplementedError("MemlaneStore does not support TTLs (ttl=None)")
            if len((KEY_TAG + op.key).encode()) > MAX_TAG_BYTES or not op.key:
                raise ValueError(f"key {op.key[:40]!r}: 1 to {MAX_TAG_BYTES - len(KEY_TAG)} bytes")
            if op.value is not None:
                self._content(op)
        elif isinstance(op, GetOp):
            self._check(op.namespace)
        elif isinstance(op, SearchOp):
            self._check(op.namespace_prefix, prefix=True)
            if op.filter and (err := _filter_error(op.filter)) is not None:
                raise ValueError(err)
            if op.limit < 0 or op.offset < 0:
                raise ValueError("search: limit and offset are not negative")
        elif isinstance(op, ListNamespacesOp):
            for cond in op.match_conditions or ():
                if cond.match_type not in ("prefix", "suffix"):
                    raise ValueError(
                        f"list_namespaces: match type {cond.match_type!r} is not prefix or suffix"
                    )
                if cond.match_type == "prefix":
                    self._check(tuple(cond.path), prefix=True)
                else:  # a suffix's first label is not the bank's
                    self._check(tuple(cond.path), prefix=True, suffix=True)
        else:
            raise TypeError(f"unknown store operation {op!r}")

    @staticmethod
    def _content(op: PutOp) -> str:
        if not isinstance(op.value, dict) or not all(isinstance(k, str) for k in op.value):
            raise ValueError(f"put {op.namespace!r}/{op.key!r}: the value is a dict with string keys")
        try:
            text = json.dumps(op.value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"put {op.namespace!r}/{op.key!r}: the value must be JSON: {exc}") from None
        if len(text) > MAX_CONTENT_CHARS or len(f"{SPEAKER}: {text}".encode()) > MAX_TEXT_BYTES:
            raise ValueError(
                f"put {op.namespace!r}/{op.key!r}: the value's JSON is {len(text)} characters "
                f"(at most {MAX_CONTENT_CHARS}, and {MAX_TEXT_BYTES} bytes)"
            )
        return text

    def _bank_of(self, namespace: tuple[str, ...]) -> str:
        return self.bank if self.bank is not None else namespace[0]

    def _write(self, puts: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        by_bank: dict[str, list[dict[str, Any]]] = {}
        for (namespace, key), op in puts.items():
            bank, doc = self._bank_of(namespace), self._document_id(namespace, key)
            if op.value is None:
                self.backend.delete(bank, doc)
                continue
            by_bank.setdefault(bank, []).append(
                {
                    "content": self._content(op),
                    "speaker": SPEAKER,
                    "document_id": doc,
                    "tags": self._tags(namespace, key),
                }
            )
        for bank, items in by_bank.items():
            self.backend.retain(bank, items)

    def _get(self, op: GetOp) -> Item | None:
        doc = self._document_id(op.namespace, op.key)
        tags = [KEY_TAG + op.key]
        for stored in self.backend.memories(self._bank_of(op.namespace), tags=tags, document_id=doc):
            found = self._item(stored)
            if found is not None and found.namespace == op.namespace and found.key == op.key:
                return Item(
                    value=found.value,
                    key=found.key,
                    namespace=found.namespace,
                    created_at=found.created_at,
                    updated_at=found.updated_at,
                )
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        tags = self._prefix_tags(prefix)
        want = op.offset + op.limit
        found: dict[tuple[tuple[str, ...], str], SearchItem] = {}
        for bank in self._banks(prefix[0] if prefix and self.bank is None else None):
            if op.query:
                budget = self.recall_max_tokens or min(1_000_000, max(4096, 512 * want))
                hits = self.backend.recall(bank, op.query, tags=tags, max_tokens=budget)
            else:
                hits = self.backend.memories(bank, tags=tags)
            for stored in hits:
                item = self._item(stored, score=bool(op.query))
                if item is None or item.namespace[: len(prefix)] != prefix:
                    continue
                if op.filter and not all(_matches(item.value.get(f), w) for f, w in op.filter.items()):
                    continue
                # a document's several memories (an LLM extractor) answer once, at the best
                found.setdefault((item.namespace, item.key), item)
        items = list(found.values())
        if op.query:
            items.sort(key=lambda it: -(it.score or 0.0))
        else:
            items.sort(key=lambda it: (-it.updated_at.timestamp(), it.namespace, it.key))
        return items[op.offset : want]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conds = op.match_conditions or ()
        firsts = {c.path[0] for c in conds if c.match_type == "prefix" and c.path}
        first = next(iter(firsts)) if len(firsts) == 1 else None
        namespaces: set[tuple[str, ...]] = set()
        for bank in self._banks(first):
            for stored in self.backend.memories(bank, tags=[STORE_TAG]):
                ns = [t[len(NS_TAG) :] for t in stored.tags if t.startswith(NS_TAG)]
                if ns:
                    namespaces.add(tuple(max(ns, key=len).split(".")))
        matched = [ns for ns in namespaces if all(_namespace_matches(ns, c) for c in conds)]
        if op.max_depth is not None:
            matched = list({ns[: op.max_depth] for ns in matched})
        return sorted(matched)[op.offset : op.offset + op.limit]
