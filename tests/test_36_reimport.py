"""Re-importing a JSON Lines file into SQLite is near-linear (issue 36).

Lines without a timestamp take the import's clock: all rows of a re-import move
into one 30-minute window, and the rows that took context from them
(``neighbours.refresh``) were found by statements that scanned that window per row
(2,000 lines: 0.8 s the first time, 42-55 s the second, each batch holding the write
lock). The context columns must come out as a fresh import (and a full recompute)
gives them, and the work of a refresh must grow with the rows, not their square.
"""

from __future__ import annotations

import io
import json
import random
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.sqlite import SQLiteStore, neighbours
from memory_inject.storage.sqlite.ddl_context import CTX_STANDALONE_ASSIGN
from memory_inject.storage.sqlite.writers import register

_CTX = "ctx_prev, ctx_prev2, ctx_near"


def _lines(n: int, *, changed: int = -1, seed: int = 7) -> str:
    """``n`` lines, most without a timestamp, in two categories, a few in a session,
    a few of one dated event; line ``changed`` (if any) with other words."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        rec: dict[str, Any] = {
            "key": f"fact{i}",
            "content": f"fact {i} about {rnd.choice(['alpha', 'beta', 'gamma'])} server"
            + (" changed" if i == changed else ""),
            "category": "core" if i % 5 else "notes",
        }
        if i % 11 == 3:
            rec["session_id"] = "chat-1"
        if i % 13 == 4:
            rec["timestamp"] = "2025-03-01T10:00:00.000000Z"
        out.append(json.dumps(rec))
    return "\n".join(out) + "\n"


def _state(db: Path) -> dict[str, tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            f"SELECT key, content, category, session_id, deleted_at IS NULL, {_CTX} FROM memories"
        ).fetchall()
    finally:
        conn.close()
    return {r[0]: tuple(r[1:]) for r in rows}


def _recomputed(db: Path) -> tuple[dict[int, tuple[Any, ...]], dict[int, tuple[Any, ...]]]:
    """Every live row's context columns as stored, and as computed afresh (rolled back);
    the keyword index must agree with the rows (FTS5 ``integrity-check``)."""
    conn = sqlite3.connect(db, isolation_level=None)
    register(conn)
    try:
        conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
        sql = f"SELECT rid, {_CTX} FROM memories WHERE deleted_at IS NULL"
        stored = {r[0]: tuple(r[1:]) for r in conn.execute(sql)}
        conn.execute("BEGIN")
        conn.execute(f"UPDATE memories SET {CTX_STANDALONE_ASSIGN.format(row='memories')}")
        fresh = {r[0]: tuple(r[1:]) for r in conn.execute(sql)}
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    return stored, fresh


def _import(db: Path, text: str, batch_size: int = 1000) -> None:
    store = SQLiteStore(db)
    try:
        store.import_jsonl(io.StringIO(text), batch_size=batch_size)
    finally:
        store.close()


class TestReimportKeepsContext:
    def test_reimport_gives_the_rows_a_fresh_import_gives(self, tmp_path: Path) -> None:
        """Imported twice, every row holds the content and context of one import of the file."""
        text = _lines(150)
        _import(tmp_path / "twice.db", text, batch_size=40)
        _import(tmp_path / "twice.db", text, batch_size=40)
        _import(tmp_path / "once.db", text, batch_size=40)
        twice = _state(tmp_path / "twice.db")
        assert twice == _state(tmp_path / "once.db")
        assert sum(1 for v in twice.values() if v[-1] == 1) > 50  # near context was at stake
        stored, fresh = _recomputed(tmp_path / "twice.db")
        assert stored == fresh

    def test_a_partial_reimport_leaves_every_row_as_computed_afresh(self, tmp_path: Path) -> None:
        """Some keys written again with other words, in another order: the rows around
        them, and the ones after them in time, hold what a full recompute gives."""
        db = tmp_path / "m.db"
        _import(db, _lines(120))
        part = _lines(120, changed=40).splitlines()[30:90]
        random.Random(3).shuffle(part)
        _import(db, "\n".join(part) + "\n", batch_size=25)
        store = SQLiteStore(db)
        try:
            store.forget("fact95")
            store.store("fact50", "fact 50 written once more", "core")
        finally:
            store.close()
        stored, fresh = _recomputed(db)
        assert stored == fresh
        assert "changed" in _state(db)["fact40"][0]


def _counting(steps: list[int]) -> Callable[..., int]:
    """``neighbours.refresh`` counting the SQLite VM's work (progress handler ticks)."""
    real = neighbours.refresh

    def refresh(conn: sqlite3.Connection, namespace: str, changed: Sequence[Any]) -> int:
        def tick() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(tick, 100)
        try:
            return real(conn, namespace, changed)
        finally:
            conn.set_progress_handler(None, 0)

    return refresh


class TestReimportWork:
    def _reimport_steps(self, tmp_path: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> int:
        db = tmp_path / f"m{n}.db"
        text = "".join(
            json.dumps(
                {"key": f"fact{i}", "content": f"fact number {i} about servers", "category": "core"}
            )
            + "\n"
            for i in range(n)
        )
        _import(db, text)
        steps = [0]
        with monkeypatch.context() as m:
            m.setattr(neighbours, "refresh", _counting(steps))
            _import(db, text, batch_size=n // 3)  # rows not yet written again lie between
        assert steps[0] > 0  # the refresh ran
        return steps[0]

    def test_a_refresh_does_work_in_proportion_to_the_rows(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Twice the rows re-imported (in three batches each), at most about twice the
        SQLite work in the refresh (the quadratic search for the rows that took their
        context did seven times as much), and a bounded amount of it per row."""
        small = self._reimport_steps(tmp_path, 300, monkeypatch)
        large = self._reimport_steps(tmp_path, 600, monkeypatch)
        assert large < 2.6 * small, (small, large)
        assert large < 600 * 20, large  # ticks of 100 VM steps: 2,000 steps a row
