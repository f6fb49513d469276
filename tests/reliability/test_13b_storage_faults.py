"""Embedders that raise on attribute access, non-finite vectors, damaged rows (issue 13, item 13).

An embedder is third-party code: a ``name`` or ``dim`` property that raises
must give writes a clear ``EmbedderError`` naming the embedder and give a
recall less memory (lexical only) plus an event, never a bare exception.
Both stores refuse NaN, inf and float32 overflows in a given vector. A row
whose JSON column was damaged on disk is skipped, so the other rows are
still recalled and the render succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.exceptions import EmbedderError
from memory_inject.signals import MemoryRecall
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _sqlite_schema
from tests.storage._sqlite_backend import writable


class _Base:
    """A working 4-dimensional embedder; subclasses break one attribute."""

    calibration = (0.0, 1.0)

    @property
    def name(self) -> str:
        return "four-dims"

    @property
    def dim(self) -> int:
        return 4

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, float(len(t) % 7), 0.5, 0.25] for t in texts]


class NameRaises(_Base):
    @property
    def name(self) -> str:
        raise RuntimeError("name is broken")


class DimRaises(_Base):
    @property
    def dim(self) -> int:
        raise RuntimeError("dim is broken")


class DimIsNotANumber(_Base):
    @property
    def dim(self) -> Any:
        return "four"


class CalibrationRaises(_Base):
    @property
    def calibration(self) -> Any:  # type: ignore[override]
        raise RuntimeError("calibration is broken")


def _seeded(path: Path) -> None:
    with SQLiteStore(path) as store:
        store.store("deploy", "Production deploys go to prod-3.")
        store.store("coffee", "The team drinks oat milk flat whites.")


class TestEmbedderAttributes:
    def test_a_name_that_raises_only_loses_the_name(self, tmp_path: Path) -> None:
        """Writes and recall work; messages fall back to the class name."""
        with SQLiteStore(tmp_path / "m.db", embedder=NameRaises()) as store:
            store.store("deploy", "Production deploys go to prod-3.")
            assert ["deploy"] == [e.key for e in store.recall("production deploys", 3)]

    @pytest.mark.parametrize("embedder", [DimRaises(), DimIsNotANumber()])
    def test_a_bad_dim_fails_writes_with_an_error_naming_the_embedder(
        self, tmp_path: Path, embedder: Any
    ) -> None:
        """``store`` raises EmbedderError naming the embedder and 'dim', not a RuntimeError."""
        with (
            SQLiteStore(tmp_path / "m.db", embedder=embedder) as store,
            pytest.raises(EmbedderError, match=r"embedder 'four-dims'.*'dim'"),
        ):
            store.store("k", "some content")

    @pytest.mark.parametrize("embedder", [DimRaises(), DimIsNotANumber()])
    def test_a_bad_dim_degrades_recall_to_lexical(self, tmp_path: Path, embedder: Any) -> None:
        """The render keeps the keyword hits and the event says the embedder failed."""
        _seeded(tmp_path / "m.db")
        with SQLiteStore(tmp_path / "m.db", embedder=embedder) as store:
            out = render_memory_context(store, "where do production deploys go?")
        assert isinstance(out.event, MemoryRecall)
        assert out.event.success
        assert ["deploy"] == [e.key for e in out.entries]
        assert any(d.startswith("embedder_failed") and "dim" in d for d in out.event.degraded)

    def test_both_name_and_dim_raising_still_names_the_embedder(self, tmp_path: Path) -> None:
        """With neither attribute readable the message names the embedder's class."""

        class Broken(DimRaises, NameRaises):
            pass

        with (
            SQLiteStore(tmp_path / "m.db", embedder=Broken()) as store,
            pytest.raises(EmbedderError, match=r"embedder 'TestEmbedderAttributes\..*Broken'"),
        ):
            store.store("k", "v")

    def test_a_calibration_that_raises_is_ignored(self, tmp_path: Path) -> None:
        """The store opens (raw cosine) instead of failing in its constructor."""
        with SQLiteStore(tmp_path / "m.db", embedder=CalibrationRaises()) as store:
            store.store("deploy", "Production deploys go to prod-3.")
            assert 1 == store.count()


_NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e39, -3.5e38])


class TestNonFiniteVectors:
    @settings(
        max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        vector=st.lists(st.floats(-1, 1), min_size=1, max_size=6),
        bad=_NON_FINITE,
        where=st.integers(0, 5),
        how=st.sampled_from(["store", "upsert"]),
    )
    def test_sqlite_refuses_them(
        self, tmp_path: Path, vector: list[float], bad: float, where: int, how: str
    ) -> None:
        """A given vector with NaN, inf or a float32 overflow anywhere is a ValueError."""
        vector.insert(min(where, len(vector)), bad)
        with SQLiteStore(tmp_path / "m.db") as store:
            write: Callable[[], MemoryRecord] = {
                "store": lambda: store.store("k", "v", embedding=vector),
                "upsert": lambda: store.upsert(
                    MemoryRecord(key="k", content="v", embedding=vector)
                ),
            }[how]
            with pytest.raises(ValueError, match="'embedding' must hold finite float32 numbers"):
                write()
            assert store.get("k") is None

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), 1e39])
    def test_postgres_refuses_them_like_sqlite(self, pg_dsn: str, bad: float) -> None:
        """PostgresStore raises the same ValueError and stores nothing."""
        from tests.storage._pg_backend import make_postgres_store

        store = make_postgres_store(pg_dsn)
        try:
            with pytest.raises(ValueError, match="'embedding' must hold finite float32 numbers"):
                store.store("k", "v", embedding=[0.1, bad, 0.3])
            with pytest.raises(ValueError, match="'embedding' must hold finite float32 numbers"):
                store.upsert(MemoryRecord(key="k", content="v", embedding=[bad]))
            assert store.get("k") is None
        finally:
            store.close()

    def test_postgres_names_an_embedder_whose_dim_raises(self, pg_dsn: str) -> None:
        """Opening PostgresStore with such an embedder is an EmbedderError naming it."""
        from tests.storage._pg_backend import make_postgres_store

        with pytest.raises(EmbedderError, match=r"embedder 'four-dims'.*'dim'"):
            make_postgres_store(pg_dsn, embedder=DimRaises())


_DAMAGE = st.sampled_from(
    [
        ("tags", "[oops"),
        ("tags", "{not json"),
        ("scope", '{"project": '),
        ("entity_ids", "\x00\x01"),
        ("supersedes", "[" * 5000 + "]" * 5000),
        ("embedding", b"\x00\x01\x02"),
        ("timestamp", "not a time"),
    ]
)


class TestDamagedRows:
    @settings(
        max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(damage=_DAMAGE)
    def test_a_damaged_row_is_skipped_and_the_rest_recalled(
        self, tmp_path: Path, damage: tuple[str, Any]
    ) -> None:
        """Recall and render succeed; a damaged column reads as empty in recall, list() skips
        the row, and both note it (``take_damaged``)."""
        path = tmp_path / f"{abs(hash(damage))}.db"
        with SQLiteStore(path) as store:
            store.store("deploy", "Production deploys go to prod-3.")
            store.store("broken", "Production deploys are also noted here.")
        column, value = damage
        conn = writable(path)  # a repair by hand, or a bug, leaves the row damaged
        conn.execute(f"UPDATE memories SET {column} = ? WHERE key = 'broken'", (value,))
        conn.commit()
        conn.close()
        _sqlite_schema.take_damaged()
        with SQLiteStore(path) as store:
            out = render_memory_context(
                store,
                "production deploys",
                config=MemoryInjectConfig(min_relevance_score=0.0, deadline_ms=None),
            )
            listed = sorted(r.key for r in store.list())
        assert isinstance(out.event, MemoryRecall)
        assert out.event.success, out.event.error
        assert "deploy" in [e.key for e in out.entries]
        if column != "embedding":  # recall reads no vector of a row it shows
            assert ["deploy"] == listed
            # The recall event names the row it could not decode.
            assert any(
                d.startswith("damaged_rows: ") and "'broken'" in d for d in out.event.degraded
            )
        skipped = _sqlite_schema.take_damaged()
        if column != "embedding":
            assert skipped
        assert all("'broken'" in s for s in skipped)
