"""A PostgreSQL table dropped by hand, its version table left: a clear error at open.

A helper's cleanup (round 30) ran ``DROP TABLE`` on a store's table and left
``<table>_schema_version``; the next ``PostgresStore`` opened without a word and every
call then failed with ``relation "..." does not exist``.
"""

from __future__ import annotations

import psycopg
import pytest

from memory_inject.exceptions import SchemaMismatchError
from memory_inject.storage import PostgresStore


@pytest.mark.postgres
def test_a_dropped_table_is_named_at_open(pg_scratch_dsn: str) -> None:
    with PostgresStore(pg_scratch_dsn, table="dropped") as store:
        store.store("k", "Deploys go to prod-3.")
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE dropped")
    with pytest.raises(SchemaMismatchError, match="'dropped' is missing but dropped_schema_ver"):
        PostgresStore(pg_scratch_dsn, table="dropped")
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE dropped_schema_version")
    with PostgresStore(pg_scratch_dsn, table="dropped") as store:  # as the message says
        store.store("k", "Deploys go to prod-4.")
        got = store.get("k")
        assert got is not None and got.content == "Deploys go to prod-4."
