"""Where memories live. Depends only on ``memory_inject.models`` and ``exceptions``.

``SQLiteStore`` is the embedded default; ``PostgresStore`` (extra ``postgres``)
serves many processes and hosts; ``InMemoryStore`` is for tests and small agents.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_inject.storage.fusion import Fusion, RecallInfo
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from memory_inject.storage.postgres import PostgresStore

__all__ = [
    "Fusion",
    "InMemoryStore",
    "MemoryRecord",
    "PostgresStore",
    "RecallInfo",
    "SQLiteStore",
    "open_store",
]


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (extra "postgres"): import it only when asked for.
    if name == "PostgresStore":
        from memory_inject.storage.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    kind: str = "sqlite",
    *,
    path: str | os.PathLike[str] = ".memory/memory.db",
    dsn: str | None = None,
    namespace: str = "default",
    search_mode: str = "hybrid",
    embedder: str = "none",
    embedder_model: str | None = None,
    fusion: str = "weighted",
    vector_weight: float = 0.7,
    keyword_weight: float = 0.3,
    rrf_k: int = 60,
    base_dir: str | os.PathLike[str] | None = None,
    **_: Any,
) -> InMemoryStore | SQLiteStore | PostgresStore:
    """Open the store a ``memory.backend`` section describes (its keys are the arguments).

    A relative SQLite ``path`` is resolved against ``base_dir`` (default: the
    current directory).
    """
    from memory_inject.embedders import make_embedder

    emb = make_embedder(embedder, embedder_model)
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
        return PostgresStore(dsn, namespace=namespace, embedder=emb, fusion=fus)
    p = Path(path)
    if base_dir is not None and not p.is_absolute():
        p = Path(base_dir) / p
    return SQLiteStore(p, namespace=namespace, embedder=emb, fusion=fus)
