"""The mirror keeps the rows recalls read: every column as the recall's snapshot holds it,
only through the store's scope, and bounded (``keyword_rows``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from memory_inject.models import MemoryEntry
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import keyword_rows as _rows
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from tests.storage._sqlite_backend import mirrored, plain, writable
from tests.storage._writes import host_write

_WORDS = "alpha beta gamma delta hiking boots river ledger invoice tulip".split()
_SESSIONS = (None, "s1", "s2")


_mirrored = mirrored
_plain = plain


def _whole(entries: list[MemoryEntry]) -> list[tuple[MemoryEntry, dict[str, Any]]]:
    """Every field of each entry (``extra`` is not part of an entry's equality)."""
    return [(e, e.extra) for e in entries]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(1, 7)))


def _kept(store: SQLiteStore) -> dict[int, tuple[Any, ...]]:
    index = store._engine._mirror._index  # type: ignore[union-attr]
    assert index is not None
    return index.read


class TestEveryColumnCurrent:
    def test_random_changes_to_any_column_are_seen(self, tmp_path: Path) -> None:
        """A mirrored store and one without a mirror on the same file return the same
        entries, every column and ``extra`` included, through writes by the store and by
        another connection to the columns recall returns (use counts, status, tags,
        content, importance) and forgets."""
        rng = random.Random(7)
        db = tmp_path / "m.db"
        mirrored, plain = _mirrored(db), _plain(db)
        other = writable(db, isolation_level=None)
        for i in range(25):
            mirrored.store(f"k{i}", _text(rng), session_id=rng.choice(_SESSIONS))
        served = 0
        for step in range(240):
            key = f"k{rng.randrange(30)}"
            op = rng.random()
            if op < 0.25:
                host_write(mirrored, key, _text(rng), session_id=rng.choice(_SESSIONS))
            elif op < 0.35:
                mirrored.mark_used([key])
            elif op < 0.45:
                other.execute(
                    "UPDATE memories SET status = ? WHERE key = ?",
                    (rng.choice(["active", "stale", "disputed"]), key),
                )
            elif op < 0.55:
                other.execute(
                    "UPDATE memories SET tags = ?, importance = ? WHERE key = ?",
                    (f'["t{step}"]', rng.random(), key),
                )
            elif op < 0.65:
                other.execute("UPDATE memories SET content = ? WHERE key = ?", (_text(rng), key))
            elif op < 0.72:
                mirrored.forget(key)
            if step % 2 == 0:
                query = " ".join(rng.sample(_WORDS, 2))
                session = rng.choice(_SESSIONS)
                before = len(_kept(mirrored)) if mirrored._engine._mirror._index else 0  # type: ignore[union-attr]
                got = mirrored.recall(query, 6, session_id=session)
                want = plain.recall(query, 6, session_id=session)
                assert _whole(got) == _whole(want), (step, query, session)
                served += bool(before and got)
        assert served > 50  # most recalls ran with rows already kept
        # The count of rows with near context (how much a ranking is asked for) kept up.
        index = mirrored._engine._mirror._index  # type: ignore[union-attr]
        assert index is not None
        assert index.near_rows == sum(index.near.values()) > 0
        assert mirrored._engine._mirror.builds == 1  # type: ignore[union-attr]
        other.close()
        mirrored.close()
        plain.close()

    def test_a_kept_row_is_read_again_only_when_it_changed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        fresh: list[int] = []
        real = _rows._kept

        def counted(read: dict[int, Any], rows: list[Any]) -> dict[int, Any]:
            fresh.append(len(rows))
            return real(read, rows)

        monkeypatch.setattr(_rows, "_kept", counted)
        store = _mirrored(tmp_path / "m.db")
        for i in range(6):
            store.store(f"k{i}", f"hiking river {i}")
        first = store.recall("hiking", 4)
        assert fresh == [6]  # read through the scope (twice the limit asked), all kept
        assert _whole(store.recall("hiking", 4)) == _whole(first)
        assert fresh == [6]  # the ids alone were asked for
        store.mark_used([first[0].id])
        again = store.recall("hiking", 4)
        assert fresh == [6, 1]  # the used row only
        assert again[0].extra["times_used"] == first[0].extra["times_used"] + 1
        store.close()


class TestScope:
    def test_a_row_kept_for_one_session_never_reaches_another(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        store = _mirrored(db)
        store.store("alice-only", "ledger invoice ledger", session_id="alice")
        store.store("bob-row", "ledger", session_id="bob")
        assert [e.key for e in store.recall("ledger invoice", 5, session_id="alice")] == [
            "alice-only"
        ]
        assert _kept(store)  # alice's row is kept now
        assert [e.key for e in store.recall("ledger invoice", 5, session_id="bob")] == ["bob-row"]
        assert [e.key for e in store.recall("ledger invoice", 5, session_id="alice\x00")] == []
        store.close()

    def test_a_kept_row_forgotten_by_another_process_is_not_returned(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        store = _mirrored(db)
        store.store("a", "tulip river")
        store.store("b", "tulip")
        assert {e.key for e in store.recall("tulip", 5)} == {"a", "b"}
        other = SQLiteStore(db)
        other.forget("a")
        other.close()
        assert [e.key for e in store.recall("tulip", 5)] == ["b"]
        store.close()

    def test_another_namespace_reading_the_same_row_ids_sees_its_own(self, tmp_path: Path) -> None:
        db = tmp_path / "m.db"
        mine, theirs = _mirrored(db), _mirrored(db)
        theirs_ns = SQLiteStore(db, namespace="other", fusion=Fusion())
        theirs_ns._engine._mirror = KeywordMirror(after=1)
        mine.store("m", "alpha beta")
        theirs_ns.store("t", "alpha beta alpha")
        assert [e.key for e in mine.recall("alpha", 5)] == ["m"]
        assert [e.key for e in theirs_ns.recall("alpha", 5)] == ["t"]
        assert [e.namespace for e in theirs_ns.recall("alpha", 5)] == ["other"]
        for s in (mine, theirs, theirs_ns):
            s.close()


class TestBounds:
    def test_long_rows_are_read_every_time(self, tmp_path: Path) -> None:
        store = _mirrored(tmp_path / "m.db")
        long = "river " * (_rows.MAX_KEPT_CHARS // 6 + 10)
        store.store("long", long)
        store.store("short", "river delta")
        got = store.recall("river", 5)
        assert {e.key for e in got} == {"long", "short"}
        assert [e.content for e in got if e.key == "long"] == [long]
        kept = _kept(store)
        assert len(kept) == 1
        assert all(len(row[_rows._CONTENT]) <= _rows.MAX_KEPT_CHARS for row in kept.values())
        store.close()

    def test_at_most_max_kept_rows(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(_rows, "MAX_KEPT", 3)
        store = _mirrored(tmp_path / "m.db")
        for i in range(12):
            store.store(f"k{i}", f"gamma {'delta ' * i}")
        plain = _plain(tmp_path / "m.db")
        for query in ("gamma", "delta", "gamma delta"):
            assert _whole(store.recall(query, 8)) == _whole(plain.recall(query, 8))
            assert len(_kept(store)) <= 3
        store.close()
        plain.close()


class TestConcurrentTurns:
    def test_readers_never_see_a_row_older_than_one_they_saw(self, tmp_path: Path) -> None:
        """Eight threads recall while a writer rewrites rows (content and use counts) and
        forgets one: each thread's reads of a key only move forward, no thread sees
        another session's rows, and the last reads show every row as it ends."""
        import threading

        db = tmp_path / "m.db"
        store = _mirrored(db)
        for i in range(8):
            store.store(f"k{i}", f"river v0 {i}", session_id="mine")
            store.store(f"theirs{i}", "river river v0", session_id="theirs")
        stop = threading.Event()
        errors: list[str] = []

        def write() -> None:
            for n in range(1, 60):
                key = f"k{n % 8}"
                store.store(key, f"river v{n} {n % 8}", session_id="mine")
                store.mark_used([key])
            store.forget("k0")
            stop.set()

        def read() -> None:
            seen: dict[str, int] = {}
            while True:
                done = stop.is_set()
                for e in store.recall("river", 10, session_id="mine"):
                    if e.session_id != "mine":
                        errors.append(f"another session's row {e.key}")
                    version = int(e.content.split()[1][1:])
                    if version < seen.get(e.key, 0):
                        errors.append(f"{e.key} went back from v{seen[e.key]} to v{version}")
                    seen[e.key] = version
                if done:
                    return

        threads = [threading.Thread(target=read) for _ in range(8)]
        threads.append(threading.Thread(target=write))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        plain = _plain(db)
        final = store.recall("river", 10, session_id="mine")
        assert _whole(final) == _whole(plain.recall("river", 10, session_id="mine"))
        assert "k0" not in {e.key for e in final}
        plain.close()
        store.close()
