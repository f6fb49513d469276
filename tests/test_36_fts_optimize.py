"""The keyword index's compaction after an erase or a large import never corrupts it.

SQLite before 3.51 (3.40.1 here, Debian 12's) puts each FTS5 ``optimize`` that follows
a write one level above the index's top level; past about 2,000 levels the structure
record no longer parses and every write and keyword recall of the store fails
"database disk image is malformed" (about 1,000 erases of a retention job). The erase
and the import now compact with ``rebuild`` there (one level, whatever the index held
before), and with ``optimize`` where SQLite caps its levels (64). These tests count the
levels in the index's structure record instead of running the thousand erases.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

from memory_inject.records import MemoryRecord
from memory_inject.storage._jsonl import record_to_json
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.erase import LEVELS_GROW, keyword_levels
from memory_inject.storage.sqlite.erase import MAX_LEVELS as REBUILD_PAST

#: FTS5's cap on the levels of an index where SQLite has one (3.51 has; 3.40.1 has not).
MAX_LEVELS = 64


def _levels(db: Path) -> int:
    """How many levels ``memories_fts`` has; the index checked whole on the way."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        return keyword_levels(conn)
    finally:
        conn.close()


def test_a_retention_jobs_erases_add_no_level_to_the_index(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteStore(db)
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    for i in range(600):
        store.store(f"k{i}", f"fact {i} about word{i % 50} alpha", "core")
        if i % 2 == 0:
            assert store.erase(f"k{i}") is True
    assert [e.key for e in store.recall("production deploys", 5)][:1] == ["deploy_target"]
    store.close()
    # Before: one more level each round past about 250 erases (SQLite 3.40.1).
    assert _levels(db) <= (REBUILD_PAST + 1 if LEVELS_GROW else MAX_LEVELS)


def test_an_erase_brings_an_index_of_many_levels_back(tmp_path: Path) -> None:
    """A file an earlier release left deep (its erases optimized) is compacted by the next
    erase to at most FTS5's cap; on a SQLite without the cap, to one level."""
    db = tmp_path / "m.db"
    store = SQLiteStore(db)
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    store.close()
    conn = sqlite3.connect(db, isolation_level=None)
    for i in range(600):  # a write, then another erased as the old erase did
        for rid in (-2 * i - 1, -2 * i - 2):
            conn.execute(
                "INSERT INTO memories_fts(rowid, key, content) VALUES (?, ?, ?)",
                (rid, f"old{rid}", f"text {i}"),
            )
        conn.execute(
            "INSERT INTO memories_fts(memories_fts, rowid, key, content) "
            "VALUES ('delete', ?, ?, ?)",
            (-2 * i - 2, f"old{-2 * i - 2}", f"text {i}"),
        )
        conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
    deep = _levels(db)
    assert not LEVELS_GROW or deep > REBUILD_PAST  # 972 on SQLite 3.40.1
    conn.close()
    store = SQLiteStore(db)
    store.store("gone", "a row to erase", "core")
    assert store.erase("gone") is True
    assert [e.key for e in store.recall("production deploys", 5)] == ["deploy_target"]
    store.close()
    assert _levels(db) <= (1 if LEVELS_GROW else min(deep, MAX_LEVELS))


def _jsonl(n: int, round_: int) -> io.StringIO:
    lines = [
        json.dumps(record_to_json(MemoryRecord(key=f"k{i}", content=f"note {i} v{round_}")))
        for i in range(n)
    ]
    return io.StringIO("\n".join(lines) + "\n")


def test_repeated_imports_add_no_level_to_the_index(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteStore(db)
    for round_ in range(150):  # each import rewrites a quarter or more: compacted after
        store.store(f"s{round_}", f"single note {round_}", "core")
        assert store.import_jsonl(_jsonl(100, round_)) == 100
    assert store.get("k7") is not None and store.get("k7").content == "note 7 v149"  # type: ignore[union-attr]
    assert "k7" in {e.key for e in store.recall("note 7 v149", 5)}
    store.close()
    assert _levels(db) <= (REBUILD_PAST + 1 if LEVELS_GROW else MAX_LEVELS)
