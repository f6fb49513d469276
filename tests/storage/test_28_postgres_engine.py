"""Issue 28: ``PostgresStore`` holds a ``PostgresEngine`` instead of inheriting its layers.

The public behaviour is the contract suite's; these tests pin the shape (one
level of inheritance, plain engine and connection classes, bulk paths as
functions of the store) and the behaviours the move could have changed: the
closed state the engine now owns, ``aclose`` closing the async pool on its own
loop and then the store (a subclass's ``close`` included), the write count
behind ``data_version`` and the unchanged ``repr``.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject.exceptions import StorageError
from memory_inject.storage._base import PersistentStore
from memory_inject.storage.postgres import PostgresStore, bulk
from memory_inject.storage.postgres.connection import PostgresConnections
from memory_inject.storage.postgres.engine import PostgresEngine
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres


@pytest.fixture
def db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
def store(db: str) -> Iterator[PostgresStore]:
    """A store on the test's database, closed after."""
    opened = PostgresStore(db)
    yield opened
    opened.close()


class ClosingStore(PostgresStore):
    """A subclass that counts its ``close`` calls (how the test backend drops its database)."""

    closes = 0

    def close(self) -> None:
        self.closes += 1
        super().close()


class TestShape:
    def test_the_store_is_one_level_over_persistent_store(self) -> None:
        """``PostgresStore`` inherits ``PersistentStore`` directly: no connection or bulk layer."""
        assert (PersistentStore,) == PostgresStore.__bases__

    def test_the_engine_and_its_connections_are_plain_classes(self) -> None:
        """Neither the engine nor its connections is a store: composition, not a template."""
        assert ((PostgresEngine, object), (PostgresConnections, object)) == (
            PostgresEngine.__mro__,
            PostgresConnections.__mro__,
        )

    def test_the_bulk_paths_are_functions_of_the_store(self) -> None:
        """``export_jsonl`` and ``import_jsonl`` are module functions whose first argument is
        the store, and the module defines no class."""
        firsts = [
            next(iter(inspect.signature(f).parameters))
            for f in (bulk.export_jsonl, bulk.import_jsonl)
        ]
        classes = [
            n for n, v in vars(bulk).items() if inspect.isclass(v) and v.__module__ == bulk.__name__
        ]
        assert (["store", "store"], []) == (firsts, classes)

    def test_the_store_holds_its_engine(self, store: PostgresStore) -> None:
        """The constructor builds one engine, which holds the connections."""
        assert (True, True) == (
            isinstance(store._engine, PostgresEngine),
            isinstance(store._engine.connections, PostgresConnections),
        )

    def test_the_repr_is_unchanged(self, db: str) -> None:
        """``repr`` still names the table and the namespace."""
        with PostgresStore(db, table="notes", namespace="alice") as opened:
            assert "PostgresStore(table='notes', namespace='alice')" == repr(opened)


class TestClosed:
    @pytest.mark.parametrize(
        ("what", "call"),
        [
            ("count", lambda s: s.count()),
            ("get", lambda s: s.get("k")),
            ("store", lambda s: s.store("k", "text")),
            ("recall", lambda s: s.recall("text", 3)),
            ("standing_records", lambda s: s.standing_records(None, limit=3, min_confidence=0)),
        ],
    )
    def test_a_closed_store_names_the_call(self, db: str, what: str, call: Any) -> None:
        """After ``close`` every call raises ``StorageError('<what>: the store is closed')``."""
        opened = PostgresStore(db)
        opened.close()
        with pytest.raises(StorageError) as caught:
            call(opened)
        assert f"{what}: the store is closed" == str(caught.value)

    def test_a_closed_store_refuses_an_async_recall(self, db: str) -> None:
        """``arecall`` after ``close`` raises the same error, without opening an async pool."""
        opened = PostgresStore(db)
        opened.close()
        with pytest.raises(StorageError) as caught:
            asyncio.run(opened.arecall("text", 3))
        assert "recall: the store is closed" == str(caught.value)


class TestAclose:
    def test_async_with_closes_the_async_pool_on_its_loop_and_then_the_store(self, db: str) -> None:
        """Leaving ``async with`` awaits the async pool's close on the loop that opened it,
        then calls the store's own ``close`` (a subclass's too)."""
        opened = ClosingStore(db)
        opened.store("k", "the deploy runbook")

        async def run() -> tuple[Any, list[str]]:
            async with opened:
                keys = [e.key for e in await opened.arecall("deploy runbook", 3)]
                pool = await opened._engine.connections.async_pool()
            return pool, keys

        pool, keys = asyncio.run(run())
        assert (["k"], True, True, 1) == (
            keys,
            pool.closed,
            opened._engine.connections.pool.closed,
            opened.closes,
        )

    def test_aclose_without_an_async_recall_closes_the_store(self, db: str) -> None:
        """With no async pool to close, ``aclose`` still closes the store through its ``close``."""
        opened = ClosingStore(db)
        asyncio.run(opened.aclose())
        with pytest.raises(StorageError):
            opened.count()
        assert (True, 1) == (opened._engine.connections.pool.closed, opened.closes)


class TestLoopShutdown:
    def test_the_loops_pool_is_closed_when_asyncio_run_ends(self, store: PostgresStore) -> None:
        """A render's ``asyncio.run`` that never called ``aclose`` still closes the async pool
        it opened: its shutdown cancels the pool's closer, which closes the pool (a worker that
        lost its cancellation then stops too, instead of holding the shutdown for ever)."""
        store.store("k", "the deploy runbook")

        async def run() -> tuple[Any, list[str]]:
            keys = [e.key for e in await store.arecall("deploy runbook", 3)]
            return await store._engine.connections.async_pool(), keys

        pool, keys = asyncio.run(run())
        assert (["k"], True) == (keys, pool.closed)
        assert ["k"] == [e.key for e in asyncio.run(store.arecall("deploy runbook", 3))]

    def test_renders_abandoned_at_their_deadline_never_hang_the_loops_shutdown(
        self, db: str, tmp_path: Path
    ) -> None:
        """Many ``asyncio.run`` renders whose recall is abandoned at a 3-10 ms deadline, in a
        child process with a time limit: before the closer, one of 100 hung at shutdown."""
        script = tmp_path / "renders.py"
        script.write_text(
            "import asyncio, sys\n"
            "from memory_inject import MemoryInjectConfig, arender_memory_context\n"
            "from memory_inject.storage.postgres import PostgresStore\n"
            "store = PostgresStore(sys.argv[1])\n"
            "store.store('deploy_target', 'Production deploys go to prod-3.', 'core')\n"
            "for i in range(60):\n"
            "    cfg = MemoryInjectConfig(deadline_ms=3 + i % 8)\n"
            "    asyncio.run(arender_memory_context(store, 'where do deploys go?', config=cfg))\n"
            "store.close()\n"
            "print('done')\n",
            encoding="utf-8",
        )
        done = subprocess.run(
            [sys.executable, str(script), db],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (0, "done") == (done.returncode, done.stdout.strip()), done.stderr[-2000:]


class TestWriteCount:
    def test_data_version_counts_the_writes_made_through_the_store(
        self, store: PostgresStore
    ) -> None:
        """``store``, ``forget`` and an import count one each; ``mark_used`` counts none."""
        versions = [store.data_version]
        written = store.store("a", "alpha")
        versions.append(store.data_version)
        store.mark_used([written.id])
        versions.append(store.data_version)
        store.forget("a")
        versions.append(store.data_version)
        store.import_jsonl(io.StringIO(json.dumps({"key": "b", "content": "beta"})))
        versions.append(store.data_version)
        assert [0, 1, 1, 2, 3] == versions

    def test_the_bulk_functions_are_the_store_methods(self, store: PostgresStore) -> None:
        """``bulk.import_jsonl(store, ...)`` and ``bulk.export_jsonl(store, ...)`` do what the
        store's methods do."""
        line = json.dumps({"key": "b", "content": "beta"})
        assert 1 == bulk.import_jsonl(store, io.StringIO(line), batch_size=1)
        out = io.StringIO()
        assert 1 == bulk.export_jsonl(store, out)
        assert ["b"] == [json.loads(x)["key"] for x in out.getvalue().splitlines()]
