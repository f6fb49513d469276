"""Upgrading to schema 12 rebuilds the context that rows forgotten before it left behind.

A helper's upgrade (round 30): a file written by the previous release held 722 live rows
whose context columns still carried a forgotten row's text, and after the upgrade a
forgotten password still lifted the row written after it ("office sunflower22" scored
0.75 against 0.4). The old release forgot a row without touching its neighbours; this
test leaves the same residue by hand and runs schema 12's step again.
"""

from __future__ import annotations

from pathlib import Path

from memory_inject.storage import SQLiteStore
from memory_inject.storage.sqlite import migrations
from tests.storage._sqlite_backend import writable


def _score(store: SQLiteStore, prompt: str) -> float:
    hits = store.recall(prompt, 5)
    return next(e.score or 0.0 for e in hits if e.key == "pw-2")


def test_the_upgrade_leaves_no_forgotten_text_in_any_row(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteStore(db)
    store.store("pw-1", "office password sunflower22", "conversation", session_id="s")
    store.store("pw-2", "office password sunflower21", "conversation", session_id="s")
    store.close()
    conn = writable(db, isolation_level=None)
    try:
        # A forget as the previous release made it: the row marked, its neighbour untouched.
        conn.execute("UPDATE memories SET deleted_at = '2026-01-01T00:00:00Z' WHERE key = 'pw-1'")
        held = conn.execute("SELECT ctx_prev FROM memories WHERE key = 'pw-2'").fetchone()
        assert held == ("office password sunflower22",)
        conn.execute("PRAGMA user_version = 11")
        migrations.migrate(conn)
        after = conn.execute("SELECT ctx_prev FROM memories WHERE key = 'pw-2'").fetchone()
        assert after == (None,)
        # FTS5's own check of the index against the live rows: raises when they differ.
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
    store = SQLiteStore(db)
    try:
        assert _score(store, "office sunflower22") == _score(store, "office sunflower20")
    finally:
        store.close()
