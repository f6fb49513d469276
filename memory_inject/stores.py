"""Which store an agent gets: :func:`open_store` reads an agent file's ``memory.backend``.

It reads an :class:`~memory_inject.config.AgentConfig`, so it lives above the
store wing, beside the package root, the CLI and the demo (applications of the
library): ``memory_inject.storage`` never imports config, and this module is
the one place that knows both. :func:`sqlite_path` is the file it would open,
for the CLI's read-only commands.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from memory_inject.config import AgentConfig
from memory_inject.exceptions import EmbedderError, MemoryInjectError, StoreMissingError
from memory_inject.storage.fusion import Fusion, default_fusion
from memory_inject.storage.markdown import MarkdownStore
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.none import NoneStore
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.unavailable import UnavailableStore

if TYPE_CHECKING:
    from memory_inject.storage.postgres import PostgresStore

__all__ = ["EmbedderSettingError", "open_store", "sqlite_path"]

_SQLITE_DEFAULT = ".memory/memory.db"
#: How long opening a SQLite file waits for another process's lock when the agent may go
#: on without memory (``unavailable: degrade``, ``open_timeout_ms`` unset), in ms: a
#: command or a cron job that opens its store on each run stalled 60 s behind a lock.
_DEGRADE_OPEN_TIMEOUT_MS = 2000

_Opened = InMemoryStore | SQLiteStore | MarkdownStore | NoneStore


def open_store(
    agent: AgentConfig, base_dir: str | os.PathLike[str] | None = None
) -> _Opened | PostgresStore | UnavailableStore:
    """Open the store ``agent.memory.backend`` names; SQLite at ``.memory/memory.db`` by default.

    A relative SQLite ``path`` is resolved against ``base_dir``, by default the
    folder of the agent file it was loaded from (``agent.source``), so the
    store does not depend on the current directory; an agent built in code
    (source ``<memory>``) resolves against the current directory.
    ``kind: postgres`` without a ``dsn`` is a ``ValueError``. ``kind: markdown``
    reads ``path`` as a folder (left at the SQLite default, ``.memory``);
    ``kind: none`` gives a :class:`~memory_inject.storage.none.NoneStore`.

    ``missing`` (SQLite) and ``unavailable`` say what a file that does not exist,
    or a store that cannot be opened, gives: by default the file is created and
    an open that fails raises; with ``degrade`` the agent gets an
    :class:`~memory_inject.storage.unavailable.UnavailableStore` (no memory, its
    ``status`` on every turn's event), as founder-os goes on without memory.
    ``open_timeout_ms`` bounds how long a SQLite open waits for another process's
    lock on the file: by default 60 s (12 busy timeouts, for another process's
    schema upgrade) when the open raises, 2 s when it
    degrades; the error or the status names the lock.
    """
    base = base_dir if base_dir is not None else _source_dir(agent)
    backend = attrs.asdict(agent.memory.backend)
    missing = backend.pop("missing", "create")
    unavailable = backend.pop("unavailable", "raise")
    if unavailable == "degrade" and backend.get("open_timeout_ms") is None:
        backend["open_timeout_ms"] = _DEGRADE_OPEN_TIMEOUT_MS
    if backend.get("kind", "sqlite") == "sqlite" and missing != "create":
        path = sqlite_path(agent, base)
        # An empty file is missing too (storage.md: create=False refuses it): the open
        # wrote a schema into it (round 35). A directory is not missing: opening it fails
        # and says so, under ``unavailable``.
        empty = path.is_file() and path.stat().st_size == 0
        if empty or not (path.is_file() or path.is_dir()):
            what = "an empty memory file" if empty else "no memory file"
            why = f"{path}: {what} (memory.backend.missing: {missing})"
            if missing == "error":
                raise StoreMissingError(why)
            return UnavailableStore(why)
    try:
        # memory.retrieval_stages with "cache": the hot cache (storage/hot_cache.py).
        from memory_inject.storage.hot_cache import with_retrieval_stages

        return with_retrieval_stages(_open_backend(**backend, base_dir=base), agent)
    except (MemoryInjectError, OSError, ValueError) as exc:
        if unavailable != "degrade":
            if isinstance(exc, EmbedderSettingError) and base is not None:
                raise EmbedderSettingError(f"{getattr(agent, 'source', '')}: {exc}") from exc
            raise
        return UnavailableStore(f"{type(exc).__name__}: {exc}")


class EmbedderSettingError(EmbedderError):
    """``memory.backend.embedder`` / ``embedder_model`` name no model this embedder can load
    (named with the agent file when it came from one)."""


def _source_dir(agent: object) -> Path | None:
    source = getattr(agent, "source", None)
    if not isinstance(source, str) or not source or source.startswith("<"):
        return None
    return Path(source).parent


def sqlite_path(agent: AgentConfig, base_dir: str | os.PathLike[str] | None = None) -> Path:
    """The file :func:`open_store` opens for a SQLite backend (relative paths resolved the
    same way), for callers that must check it exists first (the CLI's read-only commands)."""
    p = Path(getattr(agent.memory.backend, "path", ".memory/memory.db")).expanduser()
    base = base_dir if base_dir is not None else _source_dir(agent)
    return p if base is None or p.is_absolute() else Path(base) / p


def _open_backend(
    kind: str = "sqlite",
    *,
    path: str | os.PathLike[str] = _SQLITE_DEFAULT,
    dsn: str | None = None,
    namespace: str = "default",
    search_mode: str = "hybrid",
    embedder: str = "none",
    embedder_model: str | None = None,
    fusion: str = "auto",
    vector_weight: float = 0.7,
    keyword_weight: float = 0.3,
    rrf_k: int = 60,
    readers: int | None = None,
    vector_index: str = "auto",
    recall_in_place: bool = False,
    open_timeout_ms: int | None = None,
    pool: Mapping[str, int] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    **_: Any,
) -> _Opened | PostgresStore:
    if kind == "none":
        return NoneStore()
    if kind == "markdown":
        folder = Path(path).parent if str(path) == _SQLITE_DEFAULT else Path(path).expanduser()
        if base_dir is not None and not folder.is_absolute():
            folder = Path(base_dir) / folder
        return MarkdownStore(folder, namespace=namespace)
    from memory_inject.embedders import make_embedder

    try:
        emb = make_embedder(embedder, embedder_model)
    except (ValueError, EmbedderError) as exc:  # "'path' must be ...": backend.path? (round 36)
        raise EmbedderSettingError(
            f"memory.backend.embedder_model {embedder_model!r} (embedder: {embedder}): {exc}"
        ) from exc
    if fusion == "auto":
        # What a store picks for its embedder when given none (default_fusion): the
        # weights named below are for the modes named outright.
        fus = attrs.evolve(default_fusion(emb), search_mode=search_mode)
    else:
        fus = Fusion(
            mode=fusion,
            vector_weight=vector_weight,
            keyword_weight=keyword_weight,
            rrf_k=rrf_k,
            search_mode=search_mode,
        )
    if kind == "memory":
        return InMemoryStore()
    if kind == "postgres":
        from memory_inject.storage.postgres import PostgresStore

        if not dsn:
            raise ValueError("'dsn' must be set for the postgres backend (got None)")
        sizes = dict(pool or {})
        return PostgresStore(
            dsn,
            namespace=namespace,
            embedder=emb,
            fusion=fus,
            min_size=int(sizes.get("min_size", 1)),
            max_size=int(sizes.get("max_size", 8)),
        )
    p = Path(path).expanduser()  # "~/memory.db": the home folder, not a folder named "~"
    if base_dir is not None and not p.is_absolute():
        p = Path(base_dir) / p
    return SQLiteStore(
        p,
        namespace=namespace,
        embedder=emb,
        fusion=fus,
        readers=readers,
        vector_index=vector_index,
        recall_in_place=recall_in_place,
        open_timeout_ms=open_timeout_ms,
    )
