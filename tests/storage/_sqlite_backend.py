"""The SQLite side of the storage contract suite."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

from memory_inject.storage.fusion import Fusion
from memory_inject.storage.sqlite import SQLiteStore, writers
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror

_counter = itertools.count()


def make_sqlite_store(
    tmp_path: Path, *, same_database_as: SQLiteStore | None = None, **kwargs: Any
) -> SQLiteStore:
    """A store on a fresh file (nested, so parent creation is exercised every time).

    ``same_database_as`` opens a second store on another store's file instead,
    which is how the contract suite checks namespace isolation.
    """
    if same_database_as is not None:
        return SQLiteStore(same_database_as.path, **kwargs)
    path = tmp_path / f"db{next(_counter)}" / ".memory" / "memory.db"
    return SQLiteStore(path, **kwargs)


def mirrored(path: Path | str, **kwargs: Any) -> SQLiteStore:
    """A keyword-only store on ``path`` that answers from the mirrored index at once."""
    store = SQLiteStore(path, fusion=Fusion(), **kwargs)
    store._engine._mirror = KeywordMirror(after=1)
    return store


def plain(path: Path | str) -> SQLiteStore:
    """A keyword-only store on ``path`` that always asks FTS5 (no mirror)."""
    store = SQLiteStore(path, fusion=Fusion())
    store._engine._mirror = None
    return store


def mirror_and_fts5(db: Path) -> tuple[SQLiteStore, SQLiteStore]:
    """Two keyword-only stores on ``db``: one always answering from the mirrored index,
    one always from FTS5 (the paths the bit-for-bit comparisons set side by side)."""
    return mirrored(db), plain(db)


def writable(db: Path | str, **kwargs: Any) -> sqlite3.Connection:
    """A plain connection to ``db`` that may write (``writers.register``): another process of
    this library, as the caches see it (another program's writes fail at the writer guard)."""
    conn: sqlite3.Connection = sqlite3.connect(db, **kwargs)
    writers.register(conn)
    return conn


def on_file(db: Path, *statements: str) -> None:
    """Run ``statements`` on ``db`` through a connection of its own (autocommit):
    what another process of this library, or a repair by hand, does to the file."""
    conn = writable(db, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()
