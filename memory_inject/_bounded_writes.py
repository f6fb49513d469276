"""A turn's own writes (the autosave, the session row), waited for within its deadline.

After the render an adapter writes the user's message (``autosave``) and the
turn's session row. Such a write can wait for a lock another process holds: a
SQLite file inside another connection's ``BEGIN IMMEDIATE`` (a bulk import) is
waited for a busy timeout, a pause and a busy timeout more, so the turn answered
with its block and took 10.3 s whatever ``deadline_ms`` said (round 34's
attack); a PostgreSQL namespace's lock as long as an import holds it. The turn
must not wait for its own bookkeeping.

So :func:`write_in_time` runs the write on the library's worker threads
(:mod:`memory_inject._workers`) and waits for it at most
:func:`write_wait`: what is left of the turn's deadline, never under
:data:`WRITE_WAIT_FLOOR_S` (a healthy store's write under load is not cut
short), :data:`WRITE_WAIT_S` without a deadline. A write still running then
goes on alone and lands when the lock frees (:class:`Late`: the adapter says
``..._deferred``), or is logged as lost. At most :data:`PER_STORE` writes of one
store run at a time; the others wait in that store's line, first come first
served, so a store locked for minutes holds a few worker threads, not one per
turn, and past :data:`MAX_WAITING` waiting writes a new one is refused at once.
:func:`awrite_in_time` is the async twin; a native async write (``astore``)
runs as a task of the loop instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from memory_inject._turn import describe_fault
from memory_inject._workers import submit, wait_on_loop

__all__ = [
    "MAX_WAITING",
    "PER_STORE",
    "WRITE_WAIT_FLOOR_S",
    "WRITE_WAIT_S",
    "Late",
    "awrite_in_time",
    "write_in_time",
    "write_wait",
]

T = TypeVar("T")

#: How long a turn without a deadline waits for its own writes (seconds).
WRITE_WAIT_S = 2.0
#: A turn waits at least this long for its own writes, however little of its deadline is left.
WRITE_WAIT_FLOOR_S = 0.25
#: Writes of one store that run at once on the worker threads.
PER_STORE = 4
#: Writes of one store that may wait in its line; a new one beyond is refused.
MAX_WAITING = 1000

_log = logging.getLogger("memory_inject")


class Late(Exception):
    """The write was still running when the turn stopped waiting: it lands when the
    store frees, or a warning on the ``memory_inject`` logger says it was lost."""

    def __init__(self, waited: float) -> None:
        """``waited``: how long the turn waited for the write (seconds)."""
        super().__init__(f"still running after {waited:.3f}s (the store is locked or slow)")
        self.waited = waited


def write_wait(deadline_ms: int | None, started: float) -> float:
    """How long a turn that started at ``started`` (``time.perf_counter()``) waits for a write."""
    if deadline_ms is None:
        return WRITE_WAIT_S
    left = started + deadline_ms / 1000.0 - time.perf_counter()
    return max(WRITE_WAIT_FLOOR_S, left)


class _Line:
    """One store's writes: those waiting, and how many run."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self.running = 0


_lock = threading.Lock()
_lines: dict[int, _Line] = {}  # id(store) -> its line, while a write of it runs


def _after_fork_in_child() -> None:
    """A child of ``fork()`` has none of its parent's writes running."""
    global _lock  # noqa: PLW0603
    _lock = threading.Lock()
    _lines.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _start(store: object, fn: Callable[[], T]) -> Future[T]:
    """Put ``fn`` in ``store``'s line; a worker takes it when fewer than PER_STORE run."""
    future: Future[T] = Future()
    call = functools.partial(contextvars.copy_context().run, fn)
    key = id(store)
    with _lock:
        line = _lines.setdefault(key, _Line())
        if len(line.waiting) >= MAX_WAITING:
            raise RuntimeError(f"{len(line.waiting)} writes of this store already wait for it")
        line.waiting.append((call, future))
        if line.running >= PER_STORE:
            return future
        line.running += 1
    try:
        submit(lambda: _drain(key, line))
    except BaseException:
        with _lock:
            line.running -= 1
            with contextlib.suppress(ValueError):
                line.waiting.remove((call, future))
            if not line.running and not line.waiting:
                _lines.pop(key, None)
        raise
    return future


def _drain(key: int, line: _Line) -> None:
    """Run the line's writes until none wait; the line's store is held by their calls."""
    while True:
        with _lock:
            if not line.waiting:
                line.running -= 1
                if not line.running and _lines.get(key) is line:
                    del _lines[key]
                return
            call, future = line.waiting.popleft()
        try:
            future.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the turn, or logged
            future.set_exception(exc)


def _late(future: Future[Any], waited: float, what: str) -> Late:
    """Say the turn no longer waits for ``future``: a failure of it is logged (once, when
    it ends, or now if it ended meanwhile)."""

    def lost(f: Future[Any]) -> None:
        exc = f.exception()
        if exc is not None:
            _log.warning("memory_inject: %s lost: %s", what, describe_fault(exc))

    future.add_done_callback(lost)
    return Late(waited)


def write_in_time(store: object, fn: Callable[[], T], wait_s: float, what: str) -> T:
    """``fn()`` (a write of ``store``), waited for at most ``wait_s``: its result, its
    exception, or :class:`Late` while it goes on alone. ``what`` names it in the log."""
    future = _start(store, fn)
    with contextlib.suppress(TimeoutError):
        return future.result(timeout=max(0.0, wait_s))
    raise _late(future, wait_s, what)


async def awrite_in_time(
    store: object, fn: Callable[[], T] | Awaitable[T], wait_s: float, what: str
) -> T:
    """The async twin of :func:`write_in_time`: a blocking ``fn`` runs in the store's line,
    an awaitable (a native async write) as a task of the running loop; the loop runs on
    while the turn waits."""
    if inspect.isawaitable(fn):
        return await _task_in_time(fn, wait_s, what)
    future = _start(store, fn)
    try:
        await wait_on_loop(future, wait_s)
    except asyncio.CancelledError:  # the turn was cancelled: the write still lands
        _late(future, wait_s, what)
        raise
    if future.done():
        return future.result()
    raise _late(future, wait_s, what)


_tasks: set[asyncio.Task[Any]] = set()  # deferred async writes, held until they end


async def _task_in_time(write: Awaitable[T], wait_s: float, what: str) -> T:
    task = asyncio.ensure_future(write)
    try:
        finished, _ = await asyncio.wait({task}, timeout=max(0.0, wait_s))
    except asyncio.CancelledError:  # the turn was cancelled: the write still lands
        _keep(task, what)
        raise
    if finished:
        return task.result()
    _keep(task, what)
    raise Late(wait_s)


def _keep(task: asyncio.Task[Any], what: str) -> None:
    """Hold ``task`` until it ends (the loop keeps only a weak reference); log its failure."""
    _tasks.add(task)

    def ended(t: asyncio.Task[Any]) -> None:
        _tasks.discard(t)
        exc = None if t.cancelled() else t.exception()
        if exc is not None:
            _log.warning("memory_inject: %s lost: %s", what, describe_fault(exc))

    task.add_done_callback(ended)
