"""The SQLite store's cached vector matrix: same answers as a scan, and never stale."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from memory_inject.storage import _sqlite_schema as schema
from memory_inject.storage._vector_cache import VectorCache
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.sqlite import SQLiteStore

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
        store._vectors = None
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
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("UPDATE memories SET superseded_by = 'k1' WHERE key = 'k0'")
        conn.close()
        cached = store.recall("apple", 100, session_id=session_id, since=since, until=until)
        store._vectors = None
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
        conn = sqlite3.connect(db, isolation_level=None)
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
        conn = sqlite3.connect(db, isolation_level=None)
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

    def test_matrix_is_reused_until_a_write(self, db: Path) -> None:
        """Two recalls with no write between them read the vectors once."""
        store = semantic(db)
        store.store("a", "apple")
        cache = VectorCache()
        store._vectors = cache
        store.recall("apple", 10)
        first = next(iter(cache._matrices.values()))[1]
        store.recall("apple dog", 10)
        assert first is next(iter(cache._matrices.values()))[1]
        store.store("b", "dog")
        store.recall("apple", 10)
        assert first is not next(iter(cache._matrices.values()))[1]
        store.close()
