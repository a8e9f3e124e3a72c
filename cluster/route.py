"""Where a command runs for a data directory: through ``memlane serve`` when it runs there,
else in this process. Decided from :func:`cluster.datadir.store_access`, the one place the
store's access is decided, and said in one line on stderr whenever it is not this process
over the directory.

* **A service runs on the data directory** (its supervisor's ``serve.json``). The commands its
  HTTP API answers as the engine does (recall, reflect, banks, delete, tree, consolidate of a
  few banks, mental models and directives, ``memlane mcp``'s tools) go through the API
  (:func:`service`), as ``--url`` does. The key: ``--api-key`` or MEMLANE_API_KEY; none when
  the service runs with auth off; else one of this environment's MEMLANE_SERVE__API_KEYS that
  may use the bank (the keys the service was started with, when started from this shell).
  Without one the command stops with exit code 2 saying so. The others open the engine here
  on the service's Milvus Lite server (:func:`open_memory`): what the API does not offer
  (doctor, merge-background, reembed, the Ray jobs) or offers narrower (a file's retain, whose
  turn ids and images the API's items do not carry; import, whose body the API bounds;
  export, streamed here).
* **No service**: the engine in this process over the directory, or on the Milvus server the
  settings name; a directory another process holds stops with exit code 2 naming it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from cluster.common import errors, fail

T = TypeVar("T")


def note(line: str) -> None:
    """One line on stderr saying where the command runs."""
    typer.echo(f"memlane: {line}", err=True)


def data_dir_of(data_dir: Path | None) -> Path:
    """``data_dir``, or the settings' (MEMLANE_DATA_DIR, default ./.memlane)."""
    if data_dir is not None:
        return Path(data_dir)
    return _settings().data_dir


def _settings(**kwargs: Any):
    """Settings from the environment; a bad one is exit code 2 with one line naming it."""
    from memlane.settings import Settings

    with errors():
        return Settings(**kwargs)
    raise AssertionError("unreachable")  # errors() exits


def _access(data_dir: Path | None):
    from cluster.datadir import store_access

    root = data_dir_of(data_dir)
    with errors():
        return store_access(root)
    raise AssertionError("unreachable")  # errors() exits


def _may_use(value: Any, bank: str | None) -> bool:
    banks = getattr(value, "banks", value)
    return banks == "*" or (bank is not None and bank in banks)


def service_key(state: dict[str, Any], api_key: str | None, bank: str | None) -> str | None:
    """The key to send the service: ``api_key`` (``--api-key`` or MEMLANE_API_KEY); None when
    the service runs with auth off; else this environment's first MEMLANE_SERVE__API_KEYS key
    that may use ``bank`` (any bank when None: a key for every bank first). Exit code 2 when
    none fits."""
    if api_key:
        return api_key
    if state.get("auth") == "off":
        return None
    keys = _settings().serve.api_keys
    for key, value in keys.items():
        if _may_use(value, bank):
            return key
    if bank is None and keys:
        return next(iter(keys))
    for_bank = f" for bank {bank!r}" if bank else ""
    fail(
        f"memlane serve runs on {state.get('data_dir')} with auth on and no API key{for_bank} is "
        "set here: set MEMLANE_API_KEY to one of its keys (MEMLANE_SERVE__API_KEYS), or stop it "
        "(memlane serve --stop) to work on the directory directly"
    )


class Service:
    """The running service's HTTP API, as the SDK reaches it; :meth:`call` turns the API's
    error answers and connection failures into exit code 2 with one line."""

    def __init__(self, url: str, api_key: str | None) -> None:
        from memlane_client import MemlaneClient

        self.url = url
        # a consolidation or a reflect with a model can take minutes
        self.client = MemlaneClient(url, api_key or "", timeout=600.0)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        import httpx

        from memlane_client import MemlaneAPIError

        try:
            return fn(*args, **kwargs)
        except MemlaneAPIError as exc:
            fail(f"{exc.message} (HTTP {exc.status} from {self.url})")
        except httpx.HTTPError as exc:
            fail(f"cannot reach the service at {self.url}: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remote(url: str, api_key: str | None) -> Service:
    """``--url``: the service named on the command line."""
    return Service(url, api_key)


def service_target(
    data_dir: Path | None, *, bank: str | None = None, api_key: str | None = None
) -> tuple[str, str | None] | None:
    """``(url, key)`` of the service running on ``data_dir`` (said in one line), or None when
    none runs there. ``api_key`` default: MEMLANE_API_KEY."""
    state = _access(data_dir).service
    if state is None:
        return None
    key = service_key(state, api_key or os.environ.get("MEMLANE_API_KEY"), bank)
    note(f"through the service at {state['url']} (memlane serve on {state.get('data_dir')})")
    return state["url"], key


def service(data_dir: Path | None, *, bank: str | None = None, api_key: str | None = None) -> Service | None:
    """The service running on ``data_dir`` (:func:`service_target`), or None."""
    target = service_target(data_dir, bank=bank, api_key=api_key)
    return None if target is None else Service(*target)


def store_settings(data_dir: Path | None, *, create: bool = True):
    """The settings that open the store of ``data_dir`` as :func:`store_access` decides: the
    service's Milvus Lite server (said in one line), a configured Milvus server, or the
    directory. ``create``: a directory with no store yet is opened (and created); else None is
    returned for it. Exit code 2 when another process holds the directory."""
    access = _access(data_dir)
    with errors():
        settings = access.settings()
    if settings is None:
        if access.mode == "held":
            fail(access.why_not())
        if not create:
            return None
        settings = _settings(data_dir=access.path.parent)
    if access.service is not None:
        note(f"through the Milvus Lite server of memlane serve on {access.path.parent} ({access.uri})")
    return settings


def bank_absent(data_dir: Path | None, bank: str) -> bool:
    """True when ``data_dir``'s store certainly holds no bank ``bank``, told without a Milvus
    client: nothing stored there yet, or a Milvus Lite directory no process holds whose banks
    collection's files have no row for it (:func:`memlane.stores.milvus.lite_banks.bank_stored`).
    False when only the store can tell: a Milvus server (the service's, or one the settings
    name), a directory another process holds, or files that cannot tell."""
    access = _access(data_dir)
    if access.mode == "absent":
        return True
    if access.mode != "file":
        return False
    with errors():
        settings = access.settings()
    from memlane.stores.milvus.lite_banks import bank_stored

    store = settings.store
    return bank_stored(access.path, store.collection_prefix, bank, db=store.milvus_db) is False


def open_memory(data_dir: Path | None, *, bank: str | None = None, update: dict[str, Any] | None = None):
    """The engine over ``data_dir``'s store (:func:`store_settings`); a context manager.
    ``bank``: a bank the command needs, so a directory with nothing stored yet is an unknown
    bank (exit code 2), not a new store. ``update``: settings changed for this command."""
    from memlane.engine import Memory

    settings = store_settings(data_dir, create=bank is None)
    if settings is None:
        fail(f"unknown bank {bank!r}: nothing is stored in {data_dir_of(data_dir)} yet")
    if update:
        with errors():
            settings = settings.model_copy(update=update)
    return Memory(settings)
