"""Issue 29: PostgreSQL recall's fixed costs, cut without changing a hit or a score.

Two changes are pinned here: the keyword stage's term statistics travel as
array literals built once (escaped so any lexeme survives), and a store with
vectors asks pgvector's HNSW search for ``ef_search`` 100 unless its DSN says
otherwise.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres.connection import session_options
from memory_inject.storage.postgres.terms import TermStats, array_literal
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres

Factory = Callable[..., PostgresStore]

#: Lexemes no tsvector parser makes today, each a trap for a hand-made array literal.
HOSTILE = [
    'say "hi"',
    "back\\slash",
    "\\",
    '"',
    '\\"',
    "{braces}",
    "}",
    "a,b",
    "NULL",
    "",
    "  spaced  ",
    "it's",
    "naïve café",
    "日本語",
    "emoji 🦊",
]


@pytest.fixture
def db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
def open_store(db: str) -> Iterator[Factory]:
    """``open_store(dsn=None, **kwargs)`` opens a PostgresStore on the test's database."""
    made: list[PostgresStore] = []

    def factory(dsn: str | None = None, **kwargs: Any) -> PostgresStore:
        store = PostgresStore(dsn or db, **kwargs)
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


def _chatter(store: PostgresStore, db: str) -> None:
    """300 rows holding 'common', 3 of them 'zebra' too, then ANALYZE (as TestRankBudget)."""
    lines = [{"key": f"c{i}", "content": f"common chatter number {i}"} for i in range(300)]
    lines += [{"key": f"r{i}", "content": f"common but zebra {i}"} for i in range(3)]
    store.import_jsonl(io.StringIO("\n".join(map(json.dumps, lines))))
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("ANALYZE memories")


def _hits(store: PostgresStore, query: str, limit: int = 10) -> list[tuple[str, float]]:
    return [(e.key, round(e.score or 0.0, 6)) for e in store.recall(query, limit)]


class TestTermArrays:
    @pytest.mark.parametrize("prepare", [False, True])
    def test_the_server_reads_back_every_lexeme(self, db: str, prepare: bool) -> None:
        """A ``text[]`` literal of hostile lexemes parses back to the very same strings."""
        literal = array_literal(HOSTILE)
        with psycopg.connect(db, autocommit=True) as conn:
            row = conn.execute("SELECT %s::text[]", (literal,), prepare=prepare).fetchone()
        assert row is not None
        assert HOSTILE == row[0]

    def test_row_counts_read_back(self, db: str) -> None:
        """The row estimates' literal parses back to the same floats, in order."""
        stats = TermStats.build(["a", "b", "c"], [7.0, 1e20, 0.1 + 0.2], 1000.0, 2000)
        with psycopg.connect(db, autocommit=True) as conn:
            row = conn.execute(
                "SELECT %s::text[], %s::float8[]", (stats.lexemes_text, stats.rows_text)
            ).fetchone()
        assert row is not None
        assert (list(stats.lexemes), list(stats.rows)) == (row[0], row[1])

    def test_literals_follow_the_fields(self) -> None:
        """The literals are made from ``lexemes``/``rows`` however the stats are built."""
        stats = TermStats(50.0, ('a"b', "c"), (9.0, 10.5))
        assert ('{"a\\"b","c"}', "{9.0,10.5}") == (stats.lexemes_text, stats.rows_text)

    def test_hostile_common_lexemes_keep_hits_and_scores(
        self, open_store: Factory, db: str
    ) -> None:
        """Common lexemes with quotes, backslashes, braces and commas ahead of the real ones
        leave the budget, the hits and their scores as they were (a misparsed literal would
        shift every row count after it and let 'common' flood the candidates)."""
        store = open_store()
        _chatter(store, db)
        expected = _hits(store, "common zebra")
        real = store._engine._terms
        assert real is not None
        stats = real[1]
        assert "common" in stats.lexemes
        hostile = TermStats.build(
            [*HOSTILE, *stats.common],
            [7.0 + i for i in range(len(HOSTILE))] + list(stats.common.values()),
            stats.table_rows,
            store._engine.rank_budget,
        )
        assert set(HOSTILE) <= set(hostile.lexemes)
        store._engine._terms = (time.monotonic() + 600.0, hostile)
        assert (["r0", "r1", "r2"], expected) == (
            sorted(k for k, _ in expected),
            _hits(store, "common zebra"),
        )


class TestEfSearch:
    @staticmethod
    def _ef_search(store: PostgresStore) -> str:
        with store._engine.connections.connection() as conn:
            row = conn.execute("SHOW hnsw.ef_search").fetchone()
        assert row is not None
        return str(row[0])

    def test_a_store_with_vectors_searches_with_100(self, open_store: Factory) -> None:
        """The pooled connections of a store with pgvector run with ``hnsw.ef_search`` 100."""
        store = open_store(embedder=HashingEmbedder(32))
        assert store.vectors_enabled
        store.store("a", "alpha beta")
        assert "a" == store.recall_where("alpha", 1, mode="semantic")[0].key
        assert "100" == self._ef_search(store)

    def test_the_dsn_overrides_it(self, open_store: Factory, db: str) -> None:
        """A DSN's own ``-c hnsw.ef_search`` wins over the library's default."""
        store = open_store(
            make_conninfo(db, options="-c hnsw.ef_search=60"), embedder=HashingEmbedder(32)
        )
        assert "60" == self._ef_search(store)

    def test_only_with_vectors(self) -> None:
        """A lexical store leaves ef_search alone; the store's own settings follow the DSN's."""
        lexical = session_options("dbname=x options='-c work_mem=8MB'", 5.0, vectors=False)
        hybrid = session_options("dbname=x options='-c work_mem=8MB'", 5.0, vectors=True)
        assert ("ef_search" not in lexical, True) == (True, lexical.startswith("-c work_mem"))
        assert hybrid.index("ef_search") < hybrid.index("work_mem") < hybrid.index("lock_timeout")
