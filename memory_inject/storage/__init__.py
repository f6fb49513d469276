"""Where memories live. Depends only on ``memory_inject.models`` and ``exceptions``.

``SQLiteStore`` is the embedded default; ``PostgresStore`` (extra ``postgres``)
serves many processes and hosts; ``InMemoryStore`` is for tests and small agents;
``MarkdownStore`` keeps human-readable files (zeroclaw's ``markdown``) and
``NoneStore`` keeps nothing (``none``).
``memory_inject.open_store(agent)`` (``memory_inject/stores.py``, above this package: it
reads an agent config) opens the one an agent file's ``memory.backend`` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_inject.storage.fusion import MODEL_FUSION, WEAK_FUSION, Fusion, RecallInfo
from memory_inject.storage.markdown import MarkdownStore
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.none import NoneStore
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from memory_inject.storage.postgres import PostgresStore

__all__ = [
    "MODEL_FUSION",
    "WEAK_FUSION",
    "Fusion",
    "InMemoryStore",
    "MarkdownStore",
    "MemoryRecord",
    "NoneStore",
    "PostgresStore",
    "RecallInfo",
    "SQLiteStore",
]


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (extra "postgres"): import it only when asked for.
    if name == "PostgresStore":
        from memory_inject.storage.postgres import PostgresStore

        return PostgresStore
    if name == "open_store":
        # Its old path, kept for code written against it; it lives in memory_inject.stores,
        # which imports this package, so the alias resolves on first use, not at import.
        from memory_inject.stores import open_store

        return open_store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
