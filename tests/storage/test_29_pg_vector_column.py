"""PostgreSQL's vector column arrives without rewriting the table (issue 29).

``embedding_vec`` used to be a generated column: adding it to a table with rows
(the first open with an embedder) rewrote the whole table under ACCESS
EXCLUSIVE, holding every reader and writer. It is a plain column kept by a
trigger now; tables that have the generated one keep it and work alike.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memory_inject.contract import RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.postgres import PostgresStore
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn(pg_dsn: str) -> Iterator[str]:
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


def _one(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    return None if row is None else row[0]


_FILE_NODE = "SELECT relfilenode FROM pg_class WHERE oid = 'memories'::regclass"
_WITH_VECTOR = "SELECT count(*) FROM memories WHERE embedding_vec IS NOT NULL"


def _semantic(store: PostgresStore, prompt: str) -> tuple[list[str], str | None]:
    answer = store.answer(RecallQuery(prompt, 3))
    return [e.key for e in answer.entries], answer.strategy


class TestAddingTheColumn:
    def test_the_first_open_with_an_embedder_does_not_rewrite_the_table(self, dsn: str) -> None:
        """Same file node before and after; the rows written from then on get vectors."""
        with PostgresStore(dsn) as plain:
            for i in range(300):
                plain.store(f"k{i}", f"note number {i} about the garden")
        node = _one(dsn, _FILE_NODE)
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as store:
            assert store.vectors_enabled
            assert node == _one(dsn, _FILE_NODE)
            assert 0 == _one(dsn, _WITH_VECTOR)
            store.store("db", "Production runs PostgreSQL on a big box")
            store.store("k1", "note number 1 about the greenhouse")
            assert 2 == _one(dsn, _WITH_VECTOR)
            found, strategy = _semantic(store, "postgress")
            assert ("db", "vector") == (found[0], strategy)
            # An update that keeps the embedding keeps the vector; a new text gets a new one.
            before = _one(dsn, "SELECT embedding_vec::text FROM memories WHERE key = 'db'")
            row = store.get("db")
            assert row is not None and 1 == store.mark_used([row.id])
            assert before == _one(dsn, "SELECT embedding_vec::text FROM memories WHERE key = 'db'")
            store.store("db", "The cluster runs on three small nodes")
            assert before != _one(dsn, "SELECT embedding_vec::text FROM memories WHERE key = 'db'")

    def test_rows_that_hold_embeddings_get_their_vectors_at_the_open(self, dsn: str) -> None:
        """Written with ``vectors=False`` (or while pgvector was missing): found by meaning
        once the column exists, and an import fills vectors too."""
        with PostgresStore(dsn, embedder=HashingEmbedder(64), vectors=False) as lexical:
            lexical.store("db", "Production runs PostgreSQL on a big box")
            lexical.store("ed", "The user edits with neovim")
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as store:
            assert 2 == _one(dsn, _WITH_VECTOR)
            found, strategy = _semantic(store, "postgress")
            assert ("db", "vector") == (found[0], strategy)
            store.import_jsonl(io.StringIO('{"key": "tea", "content": "The user drinks tea"}\n'))
            assert 3 == _one(dsn, _WITH_VECTOR)

    def test_a_table_with_the_generated_column_keeps_working(self, dsn: str) -> None:
        """A table made before this change (generated ``embedding_vec``) is left as it is."""
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as made:
            made.store("ed", "The user edits with neovim")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TRIGGER memories_embedding_vec ON memories")
            conn.execute("ALTER TABLE memories DROP COLUMN embedding_vec")
            conn.execute(
                "ALTER TABLE memories ADD COLUMN embedding_vec vector(64) GENERATED ALWAYS AS "
                "(CASE WHEN array_length(embedding, 1) = 64 THEN embedding::vector(64) END) STORED"
            )
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as store:
            store.store("db", "Production runs PostgreSQL on a big box")
            assert 2 == _one(dsn, _WITH_VECTOR)
            found, strategy = _semantic(store, "postgress")
            assert ("db", "vector") == (found[0], strategy)
