"""Issue 29, thirty-first round: one ``PostgresStore`` used by many event loops.

A server's threads each run their own loop (an ``asyncio.run`` per request,
pydantic-ai's ``run_sync``). The store kept one async pool: a call from a second
loop closed the first loop's pool while that loop still used it (38 of 60 turns
said ``the store is closed``), and two alternating loops opened a new pool on every
switch. Each loop now has a pool of its own, closed when that loop shuts down.

A burst of turns on a new pool mislabelled its waits too: while the pool was still
opening connections nothing was lent, so a turn that never got one said
``deadline`` (a recall that ran out of time), not ``pool_wait``.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from memory_inject import MemoryInjectConfig, arender_memory_context, render_memory_context
from memory_inject.signals import MemoryRecall
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres.connection import PostgresConnections
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres

QUESTION = "where is the deploy target?"


@pytest.fixture
def db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


@pytest.fixture
def store(db: str) -> Iterator[PostgresStore]:
    """A store holding one fact, closed after."""
    opened = PostgresStore(db)
    opened.store("deploy_target", "The deploy target is prod-3.", "core")
    yield opened
    opened.close()


def _conns(store: PostgresStore) -> PostgresConnections:
    return store._engine.connections


def _backends(db: str) -> int:
    """Client backends on ``db``'s database, besides the one counting."""
    with psycopg.connect(db, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


class TestLoopsInThreads:
    def test_a_loop_in_another_thread_leaves_this_loops_pool_open(self, db: str) -> None:
        """Loop A (one connection, lent) has a recall waiting for it when loop B, in
        another thread, recalls: B's call closed A's pool, and A's recall failed with
        ``recall: the store is closed``. Now it gets the connection when it comes free."""
        store = PostgresStore(db, min_size=1, max_size=1)
        store.store("deploy_target", "The deploy target is prod-3.", "core")
        b_done = threading.Event()
        keys: dict[str, list[str]] = {}

        async def loop_a() -> None:
            async with _conns(store).aconnection():
                waiting = asyncio.ensure_future(store.arecall("deploy target", 3))
                await asyncio.sleep(0.1)  # the recall waits for the lent connection
                thread_b.start()
                assert await asyncio.to_thread(b_done.wait, 30)
            keys["a"] = [e.key for e in await waiting]

        def loop_b() -> None:
            entries = asyncio.run(store.arecall("deploy target", 3))
            keys["b"] = [e.key for e in entries]
            b_done.set()

        thread_b = threading.Thread(target=loop_b)
        try:
            asyncio.run(loop_a())
        finally:
            b_done.set()
            thread_b.join(30)
            store.close()
        assert {"a": ["deploy_target"], "b": ["deploy_target"]} == keys

    def test_two_threads_rendering_with_asyncio_run_all_get_their_memory(
        self, store: PostgresStore
    ) -> None:
        """The tester's server: two request threads, an ``asyncio.run`` per turn."""
        results: list[tuple[bool, str | None]] = []

        def worker() -> None:
            for _ in range(10):
                r = asyncio.run(arender_memory_context(store, QUESTION))
                assert isinstance(r.event, MemoryRecall)
                results.append(("prod-3" in r.text, r.event.error))

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert [(True, None)] * 20 == results

    def test_two_alternating_loops_keep_one_pool_each(self, store: PostgresStore) -> None:
        """Two loops taking turns in one thread: a new pool on every switch before."""
        loops = [asyncio.new_event_loop() for _ in range(2)]

        async def turn() -> tuple[Any, list[str]]:
            keys = [e.key for e in await store.arecall("deploy target", 3)]
            return await _conns(store).async_pool(), keys

        try:
            seen = [loops[i % 2].run_until_complete(turn()) for i in range(8)]
            pools = {id(pool): pool for pool, _ in seen}
            assert (2, [["deploy_target"]] * 8, [False, False]) == (
                len(pools),
                [keys for _, keys in seen],
                [p.closed for p in pools.values()],
            )
            store.close()  # closes each loop's pool on its own loop
            assert [True, True] == [p.closed for p in pools.values()]
        finally:
            for loop in loops:
                loop.close()

    def test_the_store_closes_a_pool_whose_loop_runs_in_another_thread(
        self, store: PostgresStore
    ) -> None:
        """``close`` from the main thread asks the other thread's loop to close its pool."""
        ready, stop = threading.Event(), threading.Event()
        pools: list[Any] = []

        async def serve() -> None:
            await store.arecall("deploy target", 3)
            pools.append(await _conns(store).async_pool())
            ready.set()
            while not stop.is_set() and not pools[0].closed:
                await asyncio.sleep(0.01)

        thread = threading.Thread(target=asyncio.run, args=(serve(),))
        thread.start()
        assert ready.wait(30)
        store.close()
        thread.join(10)
        stop.set()
        assert (False, True) == (thread.is_alive(), pools[0].closed)


class TestNoLeaks:
    def test_an_asyncio_run_per_request_leaves_no_pool_or_backend_behind(
        self, db: str, store: PostgresStore
    ) -> None:
        """Each ``asyncio.run``'s shutdown closes the pool it opened and its connections:
        the shutdown's cancelled workers made the pool's ``close`` stop before closing
        them, and each request left a backend until the garbage collector ran (here it
        does not: 30 requests, 30 backends). None is left for a loop that is gone, and
        none once the store closes."""
        before = _backends(db)
        got = 0
        gc.disable()
        try:
            for _ in range(30):
                r = asyncio.run(arender_memory_context(store, QUESTION))
                got += "prod-3" in r.text
            time.sleep(0.2)
            grown = _backends(db) - before
            live = len(_conns(store)._loops)
        finally:
            gc.enable()
        store.close()
        time.sleep(0.2)
        assert (30, 0) == (got, live)
        assert grown <= 1, grown  # the sync pool may open a second connection meanwhile
        assert 0 == _backends(db)

    def test_a_closed_loops_pool_is_forgotten(self, store: PostgresStore) -> None:
        """A loop closed without ``asyncio.run``'s shutdown (``run_until_complete``, then
        ``close``) cannot close its pool; the next call from any loop forgets it."""
        loop = asyncio.new_event_loop()
        loop.run_until_complete(store.arecall("deploy target", 3))
        assert 1 == len(_conns(store)._loops)
        loop.close()
        asyncio.run(store.arecall("deploy target", 3))
        assert 0 == len(_conns(store)._loops)

    def test_an_ended_threads_idle_loop_gives_up_its_pool(
        self, db: str, store: PostgresStore
    ) -> None:
        """pydantic-ai's ``run_sync`` drives a loop per thread with ``run_until_complete``
        and never closes it: a request thread that ended left its loop's pool and
        connection for good. The next async call from any loop closes them."""
        before = _backends(db)

        def request() -> None:
            loop = asyncio.new_event_loop()
            loop.run_until_complete(store.arecall("deploy target", 3))  # never closed

        for _ in range(3):
            thread = threading.Thread(target=request)
            thread.start()
            thread.join(30)
        held = len(_conns(store)._loops)
        asyncio.run(store.arecall("deploy target", 3))
        time.sleep(0.2)
        # Each thread's call gave up the loop of the thread before it; the last goes now.
        assert (1, 0) == (held, len(_conns(store)._loops))
        assert _backends(db) <= before


def _slow_connect(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[float]:
    """Every new async connection takes ``seconds`` longer (a loaded or distant server);
    the list returned gets an item per connection attempt."""
    real = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]
    attempts: list[float] = []

    async def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(time.perf_counter())
        await asyncio.sleep(seconds)
        return await real(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(connect))
    return attempts


class TestColdPool:
    @pytest.mark.parametrize("connect_s", [0.5, 0.08])
    def test_turns_waiting_for_a_new_pool_name_the_wait(
        self, db: str, monkeypatch: pytest.MonkeyPatch, connect_s: float
    ) -> None:
        """30 turns on a fresh pool whose connections take ``connect_s`` to open, with a
        300 ms deadline: a turn that never got a connection said ``deadline`` (nothing was
        lent yet, so its wait went unheard); it says ``pool_wait`` now. At 0.5 s none gets
        one; at 0.08 s some do, and the rest wait for a pool that is still growing: the
        pool is alive, so no turn opens a connection of its own past ``max_size`` (before,
        each turn past its deadline did, as if the server were down); while it lends none,
        at most ``max_size`` turns do at once (before: all 30)."""
        store = PostgresStore(db, min_size=1, max_size=8)
        for u in range(30):
            store.store(f"fact_u{u}", f"The deploy target of user{u} is prod-{u}.", "core")
        cfg = MemoryInjectConfig(deadline_ms=300)
        who: contextvars.ContextVar[int] = contextvars.ContextVar("who", default=-1)
        connected: set[int] = set()
        real_aget = PostgresConnections._aget

        async def aget(self: PostgresConnections, *args: Any) -> Any:
            conn = await real_aget(self, *args)
            connected.add(who.get())
            return conn

        monkeypatch.setattr(PostgresConnections, "_aget", aget)
        attempts = _slow_connect(monkeypatch, connect_s)

        async def one(u: int) -> tuple[int, tuple[str, ...]]:
            who.set(u)
            r = await arender_memory_context(store, f"deploy target of user{u}?", config=cfg)
            assert isinstance(r.event, MemoryRecall)
            return u, r.event.degraded

        async def main() -> list[tuple[int, tuple[str, ...]]]:
            return list(await asyncio.gather(*(one(u) for u in range(30))))

        try:
            results = asyncio.run(main())
        finally:
            store.close()
        never = [d for u, d in results if u not in connected]
        assert never or connect_s < 0.3  # fast connections may serve every turn in time
        assert [] == [d for d in never if not (len(d) == 1 and d[0].startswith("pool_wait: "))]
        # The pool's 8, and at most 8 direct ones while it lent none (an outage's probe).
        assert len(attempts) <= (8 if connected else 16), len(attempts)

    def test_a_sync_turn_waiting_for_a_pool_still_connecting_names_the_wait(
        self, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The sync twin: the pool opens no connection within the turn's deadline while
        none is lent (its recall thread runs late: no grace); ``deadline`` before."""
        from memory_inject import _recall

        monkeypatch.setattr(_recall, "GRACE_S", 0.0)
        pool = _conns(store).pool

        def connecting(timeout: float | None = None) -> Any:
            time.sleep((timeout or 0) + 0.05)
            raise PoolTimeout("the pool is still opening connections")

        monkeypatch.setattr(pool, "getconn", connecting)
        result = render_memory_context(store, QUESTION, config=MemoryInjectConfig(deadline_ms=150))
        assert isinstance(result.event, MemoryRecall)
        (note,) = result.event.degraded
        assert note.startswith("pool_wait: no connection of the pool came free for "), note
