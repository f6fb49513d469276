"""Opening a PostgreSQL table of schema 9 rebuilds the context rows forgotten before it left.

Until issue 29's thirtieth round a forget marked the row and left its neighbours alone:
the live rows written after it kept its text in their context columns (and so in their
tsvector), and a forgotten password still lifted the row after it ("office sunflower22"
over a wrong guess). That round's forgets compute the neighbours' context again; SQLite's
schema 12 cleaned what older forgets left, PostgreSQL did not. Schema 10 does, once,
under the migration's advisory lock. These tests leave the old residue by hand: rows
written by a schema-9 library, a forget as the previous release made it.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import migrations as pg_migrations
from tests.storage import _pg_backend as pgb

#: (key, content, session, timestamp): a session's turns, sessionless rows minutes apart
#: (near context) and two of one moment (an event), each with a row to forget.
ROWS = [
    ("pw-1", "office password sunflower22", "s", "2026-03-01T09:00:00Z"),
    ("pw-2", "office password sunflower21", "s", "2026-03-01T09:01:00Z"),
    ("pw-3", "the office wifi is slow today", "s", "2026-03-01T09:02:00Z"),
    ("n-1", "my locker code is 4711 kestrel", None, "2026-03-01T10:00:00Z"),
    ("n-2", "the locker room opens at seven", None, "2026-03-01T10:05:00Z"),
    ("n-3", "the gym closes at nine tonight", None, "2026-03-01T10:06:00Z"),
    ("e-1", "the alarm pin is 9931 heron", None, "2026-03-01T12:00:00Z"),
    ("e-2", "the alarm is tested on mondays", None, "2026-03-01T12:00:00Z"),
]
FORGOTTEN = ("pw-1", "n-1", "e-1")
SECRETS = ("sunflower22", "4711", "9931")


def _write(store: PostgresStore) -> None:
    for key, content, session, at in ROWS:
        store.store(
            key, content, "conversation" if session else "core", session_id=session, timestamp=at
        )


def _context(dsn: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            'SELECT namespace, "key", ctx_prev, ctx_prev2, ctx_near FROM memories '
            "WHERE deleted_at IS NULL ORDER BY rid"
        ).fetchall()
    return {(str(r[0]), str(r[1])): tuple(r[2:]) for r in rows}


def _holding_secrets(dsn: str) -> list[str]:
    """The live rows whose context columns, or tsvector, hold a forgotten row's words."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            'SELECT "key" FROM memories WHERE deleted_at IS NULL AND ('
            "coalesce(ctx_prev, '') || ' ' || coalesce(ctx_prev2, '') ~ %s "
            "OR tsv::text ~ %s) ORDER BY rid",
            ("|".join(SECRETS), "|".join(SECRETS)),
        ).fetchall()
    return [str(r[0]) for r in rows]


def _old_table(dsn: str, monkeypatch: pytest.MonkeyPatch, spaces: int = 1) -> None:
    """A table as the previous release left it: schema 9, rows forgotten without their
    neighbours' context computed again (the same rows in each of ``spaces`` namespaces)."""
    with monkeypatch.context() as m:
        pgb.old_schema(m, 9)
        for n in range(spaces):
            with PostgresStore(dsn, namespace=f"ns{n}") as old:
                _write(old)
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE memories SET deleted_at = now() WHERE key = ANY(%s)", (list(FORGOTTEN),)
        )
        versions = conn.execute("SELECT max(version) FROM memories_schema_version").fetchone()
    assert versions == (9,)
    assert _holding_secrets(dsn) == ["pw-2", "pw-3", "n-2", "n-3", "e-2"] * spaces


def _score(store: PostgresStore, prompt: str, key: str) -> float:
    return next(e.score or 0.0 for e in store.recall(prompt, 8) if e.key == key)


@pytest.mark.postgres
@pytest.mark.parametrize("batch", [pg_migrations.FORGOTTEN_BATCH, 2])
def test_opening_a_schema_9_table_rebuilds_what_forgotten_rows_left(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Two namespaces; with ``batch`` 2 a statement's forgotten rows span both."""
    monkeypatch.setattr(pg_migrations, "FORGOTTEN_BATCH", batch)
    with pgb.scratch_database(pg_dsn) as old, pgb.scratch_database(pg_dsn) as fresh:
        _old_table(old, monkeypatch, spaces=2)
        # What this library's forget leaves: the same rows, forgotten now.
        for n in range(2):
            with PostgresStore(fresh, namespace=f"ns{n}") as store:
                _write(store)
                for key in FORGOTTEN:
                    assert store.forget(key)
        with PostgresStore(old, namespace="ns0") as store:
            assert _holding_secrets(old) == []
            assert _context(old) == _context(fresh)
            assert _score(store, "office sunflower22", "pw-2") == _score(
                store, "office sunflower20", "pw-2"
            )
        with psycopg.connect(old) as conn:
            versions = conn.execute("SELECT version FROM memories_schema_version").fetchall()
        assert [(v,) for v, _, _ in pg_migrations.MIGRATIONS] == sorted(versions)


@pytest.mark.postgres
def test_openers_at_once_clean_the_table_once(
    pg_scratch_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six processes' opens at once (threads, each its own connection): the migration's
    advisory lock lets one run the cleanup; the others wait for it, then find schema 10."""
    _old_table(pg_scratch_dsn, monkeypatch)
    ran: list[int] = []
    step = pg_migrations.forgotten_context

    def counted(conn: psycopg.Connection[Any], names: Any) -> None:
        ran.append(1)
        step(conn, names)

    steps = [(v, d, counted if f is step else f) for v, d, f in pg_migrations.MIGRATIONS]
    monkeypatch.setattr(pg_migrations, "MIGRATIONS", tuple(steps))
    results: list[Any] = []
    start = threading.Barrier(6)

    def opener() -> None:
        start.wait()
        try:
            with PostgresStore(pg_scratch_dsn, namespace="ns0") as store:
                results.append(store.count())
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [len(ROWS) - len(FORGOTTEN)] * 6
    assert ran == [1]
    assert _holding_secrets(pg_scratch_dsn) == []
