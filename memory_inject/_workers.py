"""The library's own worker threads for blocking calls made from async code.

An async path of the library that must make a blocking call that is not a
recall (a write, a session row's read before its merge, a usage count) runs it
here, never on asyncio's default executor. That executor is the host's: its
own ``to_thread`` work can fill it, and then a memory write waited for it; and a
library call parked there on one of the library's locks, whose holder needed
the executor to go on, deadlocked the executor and with it every
``to_thread`` of the host (async session records, 7 turns of one session).

Rules: at most :data:`MAX_WORKERS` daemon threads, started on demand; more
calls wait in line, first come first served; idle threads end after
:data:`IDLE_S`. A call run here never waits for another call run here
(it may wait for a lock only a thread that runs to completion holds), so the
line always moves. Recalls have their own threads (``memory_inject._deadline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["IDLE_S", "MAX_WORKERS", "in_worker", "settle", "submit", "wait_on_loop"]

T = TypeVar("T")

#: Worker threads in the process, busy or idle.
MAX_WORKERS = 32
#: A worker with nothing to do for this long (seconds) ends.
IDLE_S = 10.0


class _Pool:
    """Daemon threads fed by one queue; a new one starts only when none is idle."""

    def __init__(self, size: int) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._size = size
        self._idle = 0  # workers waiting for an item
        self._pending = 0  # items put and not yet taken
        self.count = 0  # workers alive

    def submit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a worker: a waiting one, a new one, else the first that is free."""
        with self._lock:
            self._queue.put(fn)
            self._pending += 1
            if self._idle >= self._pending or self.count >= self._size:
                return  # a waiting worker takes it, or the first one free does
            self.count += 1
            self._idle += 1  # the new worker's first wait
        try:
            threading.Thread(target=self._work, name="memory-inject-worker", daemon=True).start()
        except BaseException:
            with self._lock:
                self.count -= 1
                self._idle -= 1
            raise

    def _work(self) -> None:
        while True:
            try:
                fn = self._queue.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._pending > 0:
                        continue  # one came meanwhile and counts on this worker: take it
                    self._idle -= 1
                    self.count -= 1
                    return
            with self._lock:
                self._idle -= 1
                self._pending -= 1
            with contextlib.suppress(BaseException):  # each call hands on its own outcome
                fn()
            with self._lock:
                self._idle += 1


_POOL = _Pool(MAX_WORKERS)


def _after_fork_in_child() -> None:
    """A child of ``fork()`` has none of its parent's worker threads."""
    global _POOL  # noqa: PLW0603
    _POOL = _Pool(MAX_WORKERS)


os.register_at_fork(after_in_child=_after_fork_in_child)


def submit(fn: Callable[[], None]) -> None:
    """Run ``fn`` on one of the library's worker threads and do not wait for it (a turn's
    usage counts, ``memory_inject._usage``); ``fn`` hands on its own outcome."""
    _POOL.submit(fn)


def settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    """Give ``future`` the outcome of a call a thread made for it, unless it is done (its
    awaiting task was cancelled): run on its loop, by ``call_soon_threadsafe``."""
    if future.done():
        return
    if exc is None:
        future.set_result(value)
    else:
        future.set_exception(exc)


async def wait_on_loop(future: Future[Any], wait_s: float) -> None:
    """Wait at most ``wait_s`` for ``future`` (settled by a worker thread) while the
    running loop goes on; its outcome stays in it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def wake(_: Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, done, None, None)

    future.add_done_callback(wake)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done, max(0.0, wait_s))


async def in_worker(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run on one of the library's worker threads, in a
    copy of the caller's context (as ``asyncio.to_thread`` does, not on its executor).

    Cancelling the await leaves the call to finish on its own; its outcome is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, future, value, error)

    _POOL.submit(run)
    return await future
