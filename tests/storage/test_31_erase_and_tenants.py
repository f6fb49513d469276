"""Two holes a helper found attacking this round's erase and per-namespace statistics.

* An erase turned ``secure_delete`` on for its own transaction and off after it: an
  update before it (whose old copy went to free pages unzeroed on a stock SQLite build)
  or any write after an earlier erase left the secret in the file's bytes.
* A keyword recall ranked only the newest 20,000 matches of the file before applying the
  namespace: a big tenant's newer rows pushed every row of a small tenant out, and its
  best row (0.864) came back from the substring fallback at 0.3, under the floor.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.sqlite import SQLiteStore, keyword_rank

SECRET = "sunflowerzq22"  # noqa: S105 - a test value, not a secret


def _copies(folder: Path) -> int:
    return sum(p.read_bytes().count(SECRET.encode()) for p in folder.iterdir() if p.is_file())


@pytest.fixture
def stock_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection starts with secure_delete off, as SQLite's own default build does
    (this machine's build turns it on)."""
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)


@pytest.mark.usefixtures("stock_sqlite")
@pytest.mark.parametrize("earlier_erase", [False, True])
def test_an_edited_row_erased_leaves_no_copy(tmp_path: Path, earlier_erase: bool) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    for i in range(20):
        store.store(f"k{i}", f"ordinary note {i} about the servers", "core")
    if earlier_erase:
        store.store("other", "an unrelated note", "core")
        assert store.erase("other")
    store.store("victim", f"my vault code is {SECRET} " + "padding words here " * 40, "core")
    store.store("victim", f"my vault code is {SECRET} " + "padding words here " * 80, "core")
    assert store.erase("victim") and store.get("victim") is None
    store.close()
    assert 0 == _copies(tmp_path)


def test_a_small_tenant_under_a_big_ones_newer_matches_keeps_its_best_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window of newest matches is scaled down (40 for 20,000) so the test stays small;
    the rule is the same: a window the scope left short is not all there is."""
    monkeypatch.setattr(keyword_rank, "DRAW_ROWS", 40)
    path = tmp_path / "m.db"
    a = SQLiteStore(path, namespace="a")
    for i in range(10):
        a.store(f"a{i}", f"note {i} about the team lunch menu", "core")
    a.store("a3k", "our kubernetes deploy runs on the blue cluster", "core")
    alone = [(e.key, e.score) for e in a.recall("kubernetes deploy", 5)]
    b = SQLiteStore(path, namespace="b")
    for i in range(120):
        b.store(f"b{i}", f"kubernetes node {i} was drained", "core")
    after = [(e.key, e.score) for e in a.recall("kubernetes deploy", 5)]
    assert "a3k" == alone[0][0] and alone == after
    a.close()
    b.close()
