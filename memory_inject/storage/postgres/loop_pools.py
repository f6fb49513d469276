"""The async pools of one store, one per event loop, for :mod:`.connection`.

psycopg_pool's ``AsyncConnectionPool`` belongs to the loop it was opened on:
its workers are tasks of that loop. A store serves every loop of a process (a
server's loop, a thread's ``asyncio.run`` per request, pydantic-ai's
``run_sync`` in request threads), so :class:`LoopPools` keeps one pool per
live loop. A pool is closed only when its own loop shuts down
(:func:`close_at_shutdown`), is found closed or idle in a thread that ended,
or when the store closes: before,
the store kept one pool, and a call from a second loop closed the first loop's
pool while that loop's turns were using it ("the store is closed"), and two
alternating loops opened a new pool on every switch. This module also closes
a pool from outside its loop (:func:`close_async_pool`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from memory_inject.storage._base import check_open

__all__ = [
    "SHUTDOWN_CLOSE_S",
    "LoopPools",
    "cancel_closer",
    "close_async_pool",
    "close_at_shutdown",
    "keep",
]


def keep(task: asyncio.Task[None]) -> None:
    """Hold a strong reference to ``task`` until it is done (the loop keeps only weak ones)."""
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


def close_async_pool(pool: AsyncConnectionPool[Any], loop: asyncio.AbstractEventLoop) -> None:
    """Close an async pool from outside its loop, as well as that loop's state allows."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop.is_closed():
        _finish_idle(pool)  # its workers died with the loop
    elif running is loop:
        keep(loop.create_task(pool.close()))
    elif loop.is_running():  # in another thread: ask it, without blocking this one
        asyncio.run_coroutine_threadsafe(pool.close(), loop)
    elif running is None:
        loop.run_until_complete(pool.close())
    else:  # an idle loop, from inside another one: its workers cannot run now
        _finish_idle(pool)


def _finish_idle(pool: AsyncConnectionPool[Any]) -> None:
    """Close the idle connections of a pool whose loop cannot run its ``close`` (without
    the loop: libpq's ``finish``), so their backends end now, not when collected."""
    for conn in list(getattr(pool, "_pool", ())):  # psycopg_pool's idle connections
        if not conn.closed:
            conn.pgconn.finish()


_PENDING: set[asyncio.Task[None]] = set()

#: How long a loop's shutdown waits for its pool to close (the pool's own default is 5 s).
SHUTDOWN_CLOSE_S = 1.0


def cancel_closer(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (a pool's :func:`close_at_shutdown`) from any thread, if its loop lives."""
    if task is None or task.done():
        return
    loop = task.get_loop()
    if not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)


async def close_at_shutdown(pool: AsyncConnectionPool[Any]) -> None:
    """Wait for ever; when the loop's shutdown cancels this task, close ``pool``.

    ``asyncio.run`` ends by cancelling every task of its loop and waiting for
    them. A psycopg_pool worker cancelled while it runs a connection attempt
    can lose the cancellation and go back to waiting on its queue, and the
    loop's shutdown then waits for ever (seen at the end of an async render
    whose recall was abandoned at its deadline). Closing the pool sends each
    worker a stop message, which ends that wait too.

    The shutdown cancels the pool's workers as well, and the pool's ``close``
    waits for them with ``gather``, which then raises ``CancelledError`` before
    the pool closes its idle connections: each ``asyncio.run`` left them open
    until the garbage collector found them (a backend per request, for as long).
    They are closed here when that happens.
    """
    try:
        await asyncio.Event().wait()
    finally:
        idle = list(getattr(pool, "_pool", ()))  # psycopg_pool's idle connections
        try:
            await pool.close(timeout=SHUTDOWN_CLOSE_S)
        except asyncio.CancelledError:
            for conn in idle:
                if not conn.closed:
                    await conn.close()
            raise


class _Entry:
    """One loop's pool and the task that closes it when the loop shuts down."""

    __slots__ = ("guard", "loop", "pool", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop, pool: AsyncConnectionPool[Any]) -> None:
        self.loop, self.pool = loop, pool
        self.guard: asyncio.Task[None] | None = None
        self.thread = threading.current_thread()  # the last thread that ran the loop

    def gone(self) -> bool:
        """The loop is closed, or idle with its thread ended (pydantic-ai's ``run_sync``
        leaves a loop per thread open, and a server's request thread ends)."""
        loop = self.loop
        return loop.is_closed() or (not loop.is_running() and not self.thread.is_alive())


class LoopPools:
    """One async pool per live event loop, made by ``make()`` on the loop's first call.

    Each pool holds up to the store's ``max_size`` connections (``make``
    decides), so the async connections of a store are at most ``max_size`` per
    loop that uses it at the same time: an ``asyncio.run`` per request holds a pool only while it
    runs (its shutdown closes it), and a loop found closed, or idle in a thread
    that ended, gives up its pool on the next call from any loop.
    """

    def __init__(self, make: Callable[[], AsyncConnectionPool[Any]]) -> None:
        """No pool yet; ``make`` opens none (``open=False``): :meth:`get` opens it."""
        self._make = make
        self._lock = threading.Lock()
        self._pools: dict[int, _Entry] = {}  # by id(loop); the entry holds the loop
        self.closed = False

    def __len__(self) -> int:
        """How many loops hold a pool now."""
        with self._lock:
            return len(self._pools)

    async def get(self) -> AsyncConnectionPool[Any]:
        """The running loop's pool, opened on first use (without waiting for it to fill:
        each call waits for its own connection, within its deadline, so a burst of turns
        on a new pool is served as connections arrive)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            check_open(self.closed, "recall")
            gone = [e for e in self._pools.values() if e.gone()]
            for e in gone:
                del self._pools[id(e.loop)]
            found = self._pools.get(id(loop))
            fresh = found is None or found.loop is not loop
            if found is None or fresh:
                found = self._pools[id(loop)] = _Entry(loop, self._make())
            entry = found
            entry.thread = threading.current_thread()
        for e in gone:
            close_async_pool(e.pool, e.loop)
        pool = entry.pool
        try:
            # Not wait=True: that waits until the pool is full *and idle*, which under a
            # burst of turns lasts as long as the burst.
            await pool.open()  # a no-op once open
            if fresh:
                guard = loop.create_task(close_at_shutdown(pool), name=f"{pool.name}-closer")
                keep(guard)
                guard.add_done_callback(lambda _: self._drop(entry))
                with self._lock:
                    entry.guard = guard
                    dropped = self._pools.get(id(loop)) is not entry  # the store closed meanwhile
                if dropped:
                    cancel_closer(guard)
        except BaseException:
            if fresh:
                self._drop(entry)
                close_async_pool(pool, loop)  # its workers must not outlive the loop
            raise
        return pool

    def _drop(self, entry: _Entry) -> None:
        """Forget ``entry``'s pool (closed, or closing), unless a newer one took its place."""
        with self._lock:
            if self._pools.get(id(entry.loop)) is entry:
                del self._pools[id(entry.loop)]

    def _take_all(self, *, final: bool) -> list[_Entry]:
        with self._lock:
            self.closed = self.closed or final
            entries, self._pools = list(self._pools.values()), {}
        return entries

    def close(self) -> None:
        """Close every loop's pool, each as well as its loop's state allows; no more pools."""
        for entry in self._take_all(final=True):
            close_async_pool(entry.pool, entry.loop)
            cancel_closer(entry.guard)

    async def aclose(self) -> None:
        """Close every loop's pool as :meth:`close` does, awaiting the running loop's own;
        a later call opens a new one (the store's ``aclose`` closes the store next)."""
        running = asyncio.get_running_loop()
        for entry in self._take_all(final=False):
            if entry.loop is running:
                await entry.pool.close()
            else:
                close_async_pool(entry.pool, entry.loop)
            cancel_closer(entry.guard)
