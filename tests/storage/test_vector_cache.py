"""The SQLite store's cached vector matrix: same answers as a scan, and never stale."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from memory_inject.storage.fusion import Fusion
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite import vectors as _vector_cache
from memory_inject.storage.sqlite.vectors import VectorCache
from tests.storage import _sqlite_schema as schema
from tests.storage._sqlite_backend import writable
from tests.storage._writes import host_write

_AXES = ("apple", "banana", "cherry", "dog")
SEMANTIC = Fusion(search_mode="embedding")


#: Words that land on an axis without sharing its letters, so no LIKE fallback finds them.
_ALIASES = {"pomme": "apple"}


class AxisEmbedder:
    """One axis per known word: the cosine says how many words two texts share."""

    name = "axes-4"
    dim = 4

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """A count per axis word (zeros for a text with none of them)."""
        out = []
        for text in texts:
            words = [_ALIASES.get(w, w) for w in text.lower().split()]
            out.append([float(words.count(w)) for w in _AXES])
        return out


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def semantic(path: Path | str) -> SQLiteStore:
    return SQLiteStore(path, embedder=AxisEmbedder(), fusion=SEMANTIC)


class TestVectorCache:
    def test_matches_the_uncached_scan(self, db: Path) -> None:
        """Cached and scanned vector stages return the same ids, order and scores."""
        store = semantic(db)
        for i, text in enumerate(["apple banana", "banana", "cherry dog", "apple apple dog"]):
            store.store(f"k{i}", text)
        cached = store.recall("apple dog", 10)
        store._engine._vectors = None
        scanned = store.recall("apple dog", 10)
        assert [e.key for e in scanned] == [e.key for e in cached]
        assert [pytest.approx(e.score, abs=1e-6) for e in scanned] == [e.score for e in cached]
        store.close()

    @pytest.mark.parametrize(
        ("session_id", "since", "until"),
        [
            (None, None, None),
            ("s1", None, None),
            ("s2", None, None),
            (None, "2024-01-03T00:00:00Z", None),
            (None, None, "2024-01-03T00:00:00Z"),
            ("s1", "2024-01-02T00:00:00Z", "2024-01-04T00:00:00Z"),
        ],
    )
    def test_scope_in_numpy_matches_the_sql_scope(
        self, db: Path, session_id: str | None, since: str | None, until: str | None
    ) -> None:
        """Sessions, shared categories, time bounds, expiry and supersession keep the same rows."""
        store = SQLiteStore(db, embedder=AxisEmbedder(), fusion=SEMANTIC)
        for i in range(24):
            store.store(
                f"k{i}",
                ["apple", "apple banana", "dog apple", "cherry"][i % 4],
                category=["core", "daily", "conversation"][i % 3],
                session_id=[None, "s1", "s2"][(i // 3) % 3],
                timestamp=f"2024-01-0{1 + i % 6}T12:00:00Z",
            )
        store.store("gone", "apple", expires_at="2000-01-01T00:00:00Z")
        conn = writable(db, isolation_level=None)
        conn.execute("UPDATE memories SET superseded_by = 'k1' WHERE key = 'k0'")
        conn.close()
        cached = store.recall("apple", 100, session_id=session_id, since=since, until=until)
        store._engine._vectors = None
        scanned = store.recall("apple", 100, session_id=session_id, since=since, until=until)
        assert sorted(e.key for e in scanned) == sorted(e.key for e in cached)
        store.close()

    def test_sees_a_write_from_another_store(self, db: Path) -> None:
        """A row written through another connection to the file is found on the next recall."""
        reader, writer = semantic(db), semantic(db)
        reader.store("a", "apple")
        assert ["a"] == [e.key for e in reader.recall("cherry apple", 10)]
        writer.store("c", "cherry")
        assert {"a", "c"} == {e.key for e in reader.recall("cherry apple", 10)}
        reader.close()
        writer.close()

    def test_sees_a_delete_from_a_plain_connection(self, db: Path) -> None:
        """A row deleted by another program's connection is not recalled from the cache."""
        store = semantic(db)
        store.store("a", "apple")
        store.store("b", "apple banana")
        assert {"a", "b"} == {e.key for e in store.recall("apple", 10)}
        conn = writable(db, isolation_level=None)
        conn.execute("DELETE FROM memories WHERE key = 'a'")
        conn.close()
        assert ["b"] == [e.key for e in store.recall("apple", 10)]
        store.close()

    def test_sees_a_changed_vector(self, db: Path) -> None:
        """A vector rewritten by another connection is scored with its new value."""
        store = semantic(db)
        store.store("a", "apple")
        store.store("b", "banana")
        assert ["a"] == [e.key for e in store.recall("apple", 10)]
        conn = writable(db, isolation_level=None)
        conn.execute(
            "UPDATE memories SET embedding = ? WHERE key = 'b'",
            (schema.encode_vector([1.0, 0.0, 0.0, 0.0]),),
        )
        conn.close()
        assert {"a", "b"} == {e.key for e in store.recall("apple", 10)}
        store.close()

    def test_own_writes_in_a_memory_database(self) -> None:
        """Where reads share the writer's connection, the store's own writes still invalidate."""
        store = semantic(":memory:")
        store.store("a", "apple")
        assert ["a"] == [e.key for e in store.recall("apple", 10)]
        store.store("b", "pomme")
        assert store.forget("a")
        assert ["b"] == [e.key for e in store.recall("apple", 10)]
        store.close()

    def test_the_scope_still_filters(self, db: Path) -> None:
        """Session scope applies to cached vectors: another session's rows stay out."""
        store = semantic(db)
        store.store("mine", "apple", category="conversation", session_id="s1")
        store.store("theirs", "apple", category="conversation", session_id="s2")
        assert ["mine"] == [e.key for e in store.recall("apple", 10, session_id="s1")]
        store.close()

    def test_matrix_is_reused_until_a_write_and_then_patched(self, db: Path) -> None:
        """Two recalls with no write between them read the vectors once; a write
        patches the same matrix instead of reading every vector again."""
        store = semantic(db)
        store.store("a", "apple")
        cache = VectorCache()
        store._engine._vectors = cache
        store.recall("apple", 10)
        first = next(iter(cache._matrices.values()))
        seq = first.seq
        store.recall("apple dog", 10)
        assert first is next(iter(cache._matrices.values()))
        store.store("b", "dog")
        assert {"a", "b"} == {e.key for e in store.recall("apple dog", 10)}
        assert first is next(iter(cache._matrices.values()))
        assert first.seq > seq
        store.close()


def _same_as_a_scan(store: SQLiteStore, query: str, **scope: str | None) -> list[str]:
    cache = store._engine._vectors
    cached = [(e.key, e.score) for e in store.recall(query, 100, **scope)]
    store._engine._vectors = None
    scanned = [(e.key, e.score) for e in store.recall(query, 100, **scope)]
    store._engine._vectors = cache
    # Ties may come in another order (the scan keeps row order, the matrix sorts by id).
    assert sorted(k for k, _ in scanned) == sorted(k for k, _ in cached), (query, scope)
    assert pytest.approx(dict(scanned), abs=1e-6) == dict(cached), (query, scope)
    return [k for k, _ in cached]


class TestPatchedMatrix:
    """After any sequence of writes the patched matrix answers as a full scan does."""

    def test_random_writes_by_the_store_and_by_another_connection(self, db: Path) -> None:
        rng = random.Random(5)
        store = semantic(db)
        other = writable(db, isolation_level=None)
        words = ["apple", "banana", "cherry", "dog", "pomme", "apple dog", "banana cherry"]
        sessions = [None, "s1", "s2", "s1\x00", "s1 "]
        for step in range(160):
            key = f"k{rng.randrange(30)}"
            op = rng.random()
            if op < 0.55:
                host_write(
                    store,
                    key,
                    rng.choice(words),
                    category=rng.choice(["core", "daily", "conversation"]),
                    session_id=rng.choice(sessions),
                    timestamp=f"2024-01-0{rng.randrange(1, 8)}T12:00:00Z",
                )
            elif op < 0.7:
                store.forget(key)
            elif op < 0.8:
                other.execute("DELETE FROM memories WHERE key = ?", (key,))
            elif op < 0.9:
                vec = [float(rng.randrange(3)) for _ in range(4)]
                other.execute(
                    "UPDATE memories SET embedding = ? WHERE key = ?",
                    (schema.encode_vector(vec), key),
                )
            else:
                other.execute(
                    "UPDATE memories SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE key = ?",
                    (key,),
                )
            if step % 4 == 0:
                query = rng.choice(words)
                _same_as_a_scan(store, query)
                _same_as_a_scan(store, query, session_id=rng.choice(["s1", "s2", "s1\x00"]))
        assert 1 == len(store._engine._vectors._matrices)  # type: ignore[union-attr]
        other.close()
        store.close()

    def test_a_session_ending_in_nul_is_another_session(self) -> None:
        """Numpy text drops trailing NULs: the cached scope must not (a leak across sessions)."""
        store = semantic(":memory:")
        store.store("secret", "apple", session_id="alice\x00")
        store.store("mine", "banana", session_id="alice")
        assert [] == [e.key for e in store.recall("apple", 10, session_id="alice")]
        assert ["secret"] == [e.key for e in store.recall("apple", 10, session_id="alice\x00")]
        store.close()

    def test_more_changes_than_the_log_keeps_reads_again(self, db: Path) -> None:
        """A reader further behind than ``LOG_KEEP`` entries rebuilds its matrix, and is right."""
        store = semantic(db)
        store.store("a", "apple")
        store.store("b", "banana")
        assert ["a"] == _same_as_a_scan(store, "apple")
        first = next(iter(store._engine._vectors._matrices.values()))  # type: ignore[union-attr]
        other = writable(db, isolation_level=None)
        other.execute("BEGIN")
        for i in range(schema.LOG_KEEP + 1):  # one log entry per update of b
            vec = [1.0, 0.0, 0.0, 0.0] if i % 2 == 0 else [0.0, 1.0, 0.0, 0.0]
            other.execute(
                "UPDATE memories SET embedding = ? WHERE key = 'b'", (schema.encode_vector(vec),)
            )
        other.execute("COMMIT")
        other.close()
        assert {"a", "b"} == set(_same_as_a_scan(store, "apple"))
        assert first is not next(iter(store._engine._vectors._matrices.values()))  # type: ignore[union-attr]
        store.close()

    def test_many_changed_rows_read_again(self, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Past ``PATCH_MAX`` changed rows reading every vector is cheaper: done, and right."""
        monkeypatch.setattr(_vector_cache, "PATCH_MAX", 3)
        store = semantic(db)
        store.store("a", "apple")
        _same_as_a_scan(store, "apple")
        first = next(iter(store._engine._vectors._matrices.values()))  # type: ignore[union-attr]
        lines = [json.dumps({"key": f"n{i}", "content": "apple dog"}) for i in range(5)]
        store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
        assert 6 == len(_same_as_a_scan(store, "apple"))
        assert first is not next(iter(store._engine._vectors._matrices.values()))  # type: ignore[union-attr]
        store.store("z", "apple")
        assert 7 == len(_same_as_a_scan(store, "apple"))
        store.close()

    def test_a_log_that_went_back_reads_again(self, db: Path) -> None:
        """A log behind the matrix (reset under the store) is not trusted: the matrix is read."""
        store = semantic(db)
        for i in range(3):
            store.store(f"k{i}", "apple")
        _same_as_a_scan(store, "apple")
        other = writable(db, isolation_level=None)
        other.execute("DELETE FROM memories_log")
        other.execute("UPDATE sqlite_sequence SET seq = 0 WHERE name = 'memories_log'")
        other.execute("DELETE FROM memories WHERE key = 'k0'")
        other.close()
        assert ["k1", "k2"] == sorted(_same_as_a_scan(store, "apple"))
        store.close()


@pytest.mark.parametrize("cached", [True, False], ids=["matrix", "scan"])
def test_a_non_finite_stored_vector_never_reaches_the_fusion(tmp_path: Path, cached: bool) -> None:
    """A NaN vector written around the checks (an older version, a tool on the file) is not
    scored: min-max fusion ranks the scope as if that row had no vector, and the answer
    names how many rows of *this* scope were skipped (not another session's; issue 25)."""
    import struct

    from memory_inject.contract import RecallQuery
    from memory_inject.embedders import HashingEmbedder
    from memory_inject.storage.fusion import Fusion

    def open_store(path: Path) -> SQLiteStore:
        store = SQLiteStore(path, embedder=HashingEmbedder(dim=16), fusion=Fusion(mode="minmax"))
        if not cached:
            store._engine._vectors = None
        return store

    texts = {
        "a": "kubernetes cluster upgrade runbook",
        "b": "kubernetes pod restarts",
        "c": "holiday schedule",
        "bad": "lunch on fridays",
        "theirs": "kubernetes lunch",
    }
    bad, clean = tmp_path / "bad.db", tmp_path / "clean.db"
    for path in (bad, clean):
        with open_store(path) as store, SQLiteStore(path) as plain:
            for key, text in texts.items():
                # The same rows in both files; "bad" and "theirs" with no vector at all.
                writer = plain if key in ("bad", "theirs") else store
                writer.store(key, text, session_id="s2" if key == "theirs" else None)
    nan = struct.pack("<16f", *([float("nan")] * 16))
    with writable(bad) as conn:
        conn.execute("UPDATE memories SET embedding = ? WHERE key IN ('bad', 'theirs')", (nan,))
    with open_store(bad) as store, open_store(clean) as fresh:
        asked = RecallQuery("kubernetes upgrade", 5, session_id="s1")
        got, want = store.answer(asked), fresh.answer(asked)
        assert [(e.key, e.score) for e in want.entries] == [(e.key, e.score) for e in got.entries]
        assert ["nonfinite_vectors: 1 stored vectors of this scope"] == [
            d[:49] for d in got.degraded
        ]
