"""PostgreSQL: the tsvector's GIN index keeps a short pending list; an import analyzes.

With PostgreSQL's default ``fastupdate``, new rows' entries wait in a pending list of up
to 4 MB that every search of the index reads from end to end: after 2,760 chat writes a
keyword recall took 12.6-14.2 ms p50 instead of 2.6-3.0 ms, and the tenant-isolation
test's 1,500 turns took 78 s instead of 7 (round 34). Schema 11 caps the list at 64 kB
(8 pages) and merges the one an older table holds. A bulk import also ends with
``ANALYZE``: before autovacuum's first one the planner read a keyword's rows through the
namespace's btree.
"""

from __future__ import annotations

import io
import json
from typing import Any

import psycopg
import pytest

from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import migrations as pg_migrations
from tests.storage._pg_backend import old_schema

pytestmark = pytest.mark.postgres


def _index_options(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT coalesce(reloptions, '{}') FROM pg_class "
            "WHERE oid = 'memories_tsv_idx'::regclass"
        ).fetchone()
    assert row is not None
    return list(row[0])


def _pending_pages(dsn: str) -> int:
    """The pending list's pages, merged into the index by the call (0: there was none)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT gin_clean_pending_list('memories_tsv_idx'::regclass)").fetchone()
    assert row is not None
    return int(row[0])


def _write(store: PostgresStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        store.store(f"k{i}", f"note {i} about the garden shed and the blue bicycle {i % 7}")


_SHORT = "gin_pending_list_limit=64"
#: 64 kB of 8 kB pages: the most a search of the index reads past its tree.
_MOST_PAGES = 8


def test_a_new_table_keeps_a_short_pending_list(pg_scratch_dsn: str) -> None:
    with PostgresStore(pg_scratch_dsn) as store:
        _write(store, 300)
        assert _SHORT in _index_options(pg_scratch_dsn)
        assert 0 < _pending_pages(pg_scratch_dsn) <= _MOST_PAGES
        assert [e.key for e in store.recall("blue bicycle 3", 3)][:1] == ["k3"]


def test_an_older_table_loses_its_pending_list_on_upgrade(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of schema 10 collects a long pending list; opening it with this library
    caps the list and merges it; every row is still found."""
    with monkeypatch.context() as m:
        old_schema(m, 10)
        with PostgresStore(pg_scratch_dsn) as store:
            _write(store, 300)
        assert _SHORT not in _index_options(pg_scratch_dsn)
    with PostgresStore(pg_scratch_dsn) as store:
        assert _SHORT in _index_options(pg_scratch_dsn)
        assert _pending_pages(pg_scratch_dsn) == 0  # merged by the upgrade
        _write(store, 300, start=300)
        assert 0 < _pending_pages(pg_scratch_dsn) <= _MOST_PAGES
        assert len(store.recall("garden shed", 700)) == 600
    with psycopg.connect(pg_scratch_dsn) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM memories_schema_version")]
    assert sorted(versions) == [v for v, _, _ in pg_migrations.MIGRATIONS]


def _lines(n: int) -> str:
    rows: list[dict[str, Any]] = [
        {"key": f"k{i}", "content": f"imported note {i}", "category": "core"} for i in range(n)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.mark.parametrize(("rows", "analyzed"), [(1200, True), (20, False)])
def test_a_bulk_import_analyzes_the_table(pg_scratch_dsn: str, rows: int, analyzed: bool) -> None:
    """An import of 1,000 rows or more leaves the table analyzed (``reltuples`` counts its
    rows); a small one leaves that to autovacuum, switched off here so it cannot."""
    with PostgresStore(pg_scratch_dsn) as store:
        with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE memories SET (autovacuum_enabled = false)")
        assert store.import_jsonl(io.StringIO(_lines(rows))) == rows
        with psycopg.connect(pg_scratch_dsn) as conn:
            row = conn.execute(
                "SELECT reltuples FROM pg_class WHERE relname = 'memories'"
            ).fetchone()
        assert row is not None
        assert (row[0] == rows) is analyzed, row


def test_a_role_that_does_not_own_the_table_still_opens_it(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An application role that may read and write the table but does not own it opened a
    table at schema 10; only the index's owner may change it, so schema 11's step is
    skipped for that role with a warning naming the statement (the first version of the
    step refused the open: "must be owner of index"). The owner's next open is not asked
    to do it again: the warning says what to run."""
    import uuid

    from psycopg.conninfo import make_conninfo

    role = f"mi_app_{uuid.uuid4().hex[:10]}"
    with monkeypatch.context() as m:
        # The library of schema 10 with this one's writer guard (no new guard since).
        m.setattr(pg_migrations, "MIGRATIONS", pg_migrations.MIGRATIONS[:10])
        with PostgresStore(pg_scratch_dsn, vectors=False) as store:  # made by the owner
            _write(store, 20)
    with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
        try:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test server's role may not create roles")
        for grant in (
            "GRANT USAGE, CREATE ON SCHEMA public TO {r}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {r}",
            "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {r}",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {r}",
        ):
            conn.execute(grant.format(r=f'"{role}"'))
    app = make_conninfo(pg_scratch_dsn, user=role, password="")
    try:
        with (
            caplog.at_level("WARNING", logger="memory_inject"),
            PostgresStore(app, vectors=False) as store,
        ):
            assert [e.key for e in store.recall("blue bicycle 3", 3)][:1] == ["k3"]
        assert _SHORT not in _index_options(pg_scratch_dsn)
        [warning] = [r.getMessage() for r in caplog.records if "does not own" in r.getMessage()]
        assert "gin_pending_list_limit = 64" in warning
    finally:
        with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
        with psycopg.connect(pg_scratch_dsn, autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')
