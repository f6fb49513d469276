"""PostgreSQL keeps each row's tsvector in the row (issue 29, seventh round).

The keyword stage reads ``tsv`` for every row it ranks. A row with its vectors is
past TOAST's 2 kB target, and TOAST moved the tsvector, often the largest
column left, out of line: one more index lookup and page for each ranked row.
Schema 4 sets ``STORAGE MAIN`` on it, so the other columns go first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import migrations as pg_migrations
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres

#: Words drawn at random, so neither the content nor the tsvector compresses much.
_WORDS = [
    "".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9))
    for i in range(3000)
]


@pytest.fixture
def dsn(pg_scratch_dsn: str) -> str:
    return pg_scratch_dsn


def _write_stream(store: PostgresStore, rows: int, prefix: str = "turn", seed: int = 0) -> None:
    """``rows`` turns of one session (keys ``<prefix>-<i>``), each of 60 random words: with
    the two previous turns as context and a 512-dimension vector, all but the first few
    rows are past 2 kB."""
    rng = random.Random(seed or rows)
    for i in range(rows):
        text = " ".join(rng.choice(_WORDS) for _ in range(60))
        store.store(f"{prefix}-{i}", text, session_id="s")


def _rows(dsn: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params or None).fetchall()


def _out_of_line(dsn: str, table: str, column: str) -> tuple[int, int]:
    """``(rows whose column is stored out of line, rows)``."""
    [(out, total)] = _rows(
        dsn,
        f"SELECT count(*) FILTER (WHERE pg_column_toast_chunk_id({column}) IS NOT NULL), "
        f"count(*) FROM {table}",
    )
    return int(out), int(total)


class TestTsvInTheRow:
    def test_a_new_table_keeps_tsv_in_the_row_and_moves_the_vectors_out(self, dsn: str) -> None:
        """Rows past TOAST's target: their vectors are stored out of line, their tsvector is not."""
        with PostgresStore(dsn, embedder=HashingEmbedder(512)) as store:
            _write_stream(store, 40)
            assert 40 == store.count()
        moved, rows = _out_of_line(dsn, "memories", "embedding")
        assert 40 == rows
        assert moved >= 30  # TOAST worked on these rows (the first ones have less context)
        assert (0, 40) == _out_of_line(dsn, "memories", "tsv")
        [(storage,)] = _rows(
            dsn,
            "SELECT attstorage FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = 'tsv'",
        )
        assert "m" == storage

    def test_recall_reads_the_inline_tsvector(self, dsn: str) -> None:
        """The rows rank as before: a word of one turn finds that turn first."""
        with PostgresStore(dsn, embedder=HashingEmbedder(512)) as store:
            _write_stream(store, 30)
            target = store.get("turn-17")
            assert target is not None
            word = target.content.split()[5]
            hits = store.recall_where(word, 3, mode="lexical")
            assert "turn-17" == hits[0].key

    def test_a_table_of_schema_3_is_migrated(
        self, dsn: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A table made by the previous schema gets STORAGE MAIN on open; its old rows keep
        their stored form until rewritten, the rows written after keep tsv in the row."""
        with monkeypatch.context() as m:
            pgb.old_schema(m, 3)
            with PostgresStore(dsn, embedder=HashingEmbedder(512)) as old:
                _write_stream(old, 20)
        before = _out_of_line(dsn, "memories", "tsv")
        assert before[0] > 0  # what schema 3 did: TOAST moved the tsvector out
        with PostgresStore(dsn, embedder=HashingEmbedder(512)) as store:
            versions = _rows(dsn, "SELECT version FROM memories_schema_version")
            assert [v for v, _, _ in pg_migrations.MIGRATIONS] == sorted(v for (v,) in versions)
            _write_stream(store, 20, prefix="new", seed=7)
            assert 40 == store.count()
        [(new_out,)] = _rows(
            dsn,
            "SELECT count(*) FROM memories WHERE key LIKE 'new-%' "
            "AND pg_column_toast_chunk_id(tsv) IS NOT NULL",
        )
        assert 0 == new_out
        assert (before[0], 40) == _out_of_line(dsn, "memories", "tsv")  # the old rows as they were
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM FULL memories")  # what docs/storage.md says rewrites them
        assert (0, 40) == _out_of_line(dsn, "memories", "tsv")
