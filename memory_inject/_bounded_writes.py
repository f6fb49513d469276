"""A turn's autosave, waited for within its deadline, written in turn order.

After the render an adapter stores the user's message (``autosave``). That write can
wait for a lock another process holds: a SQLite file inside another connection's
``BEGIN IMMEDIATE`` (a bulk import) is waited for a busy timeout, a pause and a busy
timeout more, so the turn answered with its block and took 10.3 s whatever
``deadline_ms`` said (round 34's attack); a PostgreSQL row as long as an import holds
it. The turn must not wait for its own bookkeeping.

So :func:`write_in_time` hands the write to its store's writers (:class:`_Line`): up to
:data:`PER_STORE` threads per store with writes to make, which take the writes in the
order they came, never two of one order key (a session) at once, so a chat's messages
land in turn order while other chats' writes go on beside them; a writer waits
:data:`IDLE_S` for more and ends. They are not the library's shared worker pool
(:mod:`memory_inject._workers`): a store locked for minutes holds its own few threads,
not the threads other stores' turns need (the first version of this change ran there,
and locked stores deferred a healthy store's writes; with one writer per store, eight
healthy turns whose store takes 100 ms a write were deferred in turn). The
turn waits for its write at most :func:`write_wait`: what is left of its deadline,
never under :data:`WRITE_WAIT_FLOOR_S` (a healthy store's write under load is not cut
short), :data:`WRITE_WAIT_S` without a deadline. A write still running then goes on
alone and lands when the lock frees (:class:`Late`: the adapter says
``autosave_deferred``), or a warning on the ``memory_inject`` logger says it was lost
(it failed, its event loop ended before it ran, or the process exited first: at exit
the writers get :data:`EXIT_WAIT_S`). Past :data:`MAX_WAITING` waiting writes a store's
new one is refused at once. :func:`awrite_in_time` is the async twin; the write of a
store that only writes async (``astore`` and no ``store``) runs as a task of the running
loop instead, and is lost if the loop ends first.

The session row (``record_turn``) is written here too, in the same line under its own
order key (``("session-row", session)``): it reads the row and merges the turn into it, so
a session's merges must be made one at a time in turn order, which the order key gives for
sync and async turns alike (round 34 had kept it on the turn's thread after a version that
wrote it behind the turn's back let a later turn read the row first; round 36 bounded it).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
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

from memory_inject._store_capabilities import store_identity
from memory_inject._turn import describe_fault
from memory_inject._workers import wait_on_loop

__all__ = [
    "EXIT_WAIT_S",
    "IDLE_S",
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
#: Writer threads of one store at most (writes of one session are made one at a time).
PER_STORE = 4
#: Writes of one store that may wait in its line; a new one beyond is refused.
MAX_WAITING = 1000
#: A store's writer with nothing to write for this long (seconds) ends.
IDLE_S = 5.0
#: At interpreter exit, how long the writers get to finish (seconds).
EXIT_WAIT_S = 2.0

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
    """One store's writes still to make (each with its order key: writes of one key are
    made one at a time, in order), its writer threads, and the keys being written."""

    __slots__ = ("busy", "running", "waiting", "writing")

    def __init__(self) -> None:
        self.waiting: deque[tuple[object, Callable[[], Any], Future[Any]]] = deque()
        self.running = 0  # writer threads
        self.writing = 0  # of them, making a write
        self.busy: set[object] = set()  # order keys being written


_lock = threading.Lock()
_more = threading.Condition(_lock)  # a write was put in some line, or one ended
_lines: dict[object, _Line] = {}  # store_identity(store) -> its line, while its writers run


def _after_fork_in_child() -> None:
    """A child of ``fork()`` has none of its parent's writers."""
    global _lock, _more  # noqa: PLW0603
    _lock = threading.Lock()
    _more = threading.Condition(_lock)
    _lines.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _start(store: object, fn: Callable[[], T], order: object) -> Future[T]:
    """Put ``fn`` at the end of ``store``'s line; start a writer unless one is idle or
    :data:`PER_STORE` run."""
    future: Future[T] = Future()
    call = functools.partial(contextvars.copy_context().run, fn)
    key = store_identity(store)  # two objects on one file share a line (round 36)
    with _lock:
        line = _lines.setdefault(key, _Line())
        if len(line.waiting) >= MAX_WAITING:
            raise RuntimeError(f"{len(line.waiting)} writes of this store already wait for it")
        line.waiting.append((order, call, future))
        _more.notify_all()
        if line.running > line.writing or line.running >= PER_STORE:
            return future
        line.running += 1
    try:
        name = "memory-inject-store-writer"
        threading.Thread(target=_write_all, args=(key, line), name=name, daemon=True).start()
    except BaseException as exc:
        with _lock:
            line.running -= 1
            stranded = [] if line.running else list(line.waiting)
            if stranded:
                line.waiting.clear()
                if _lines.get(key) is line:
                    del _lines[key]
        for _, _, other in stranded:  # no writer is left for them
            if other is not future:
                other.set_exception(RuntimeError(f"no writer thread could start: {exc}"))
        raise
    return future


def _next(line: _Line) -> tuple[object, Callable[[], Any], Future[Any]] | None:
    """The first waiting write whose order key is not being written."""
    return next((w for w in line.waiting if w[0] not in line.busy), None)


def _write_all(key: object, line: _Line) -> None:
    """A writer of the store: its writes, a key's in order, until none came for
    :data:`IDLE_S`. The line's calls hold the store, so its id is not reused meanwhile."""
    while True:
        with _lock:
            until = time.monotonic() + IDLE_S
            while (item := _next(line)) is None and time.monotonic() < until:
                _more.wait(until - time.monotonic())
            if item is None:
                line.running -= 1
                if not line.running and not line.waiting and _lines.get(key) is line:
                    del _lines[key]
                return
            line.waiting.remove(item)
            order, call, future = item
            line.busy.add(order)
            line.writing += 1
        try:
            future.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the turn, or logged
            future.set_exception(exc)
        finally:
            with _lock:
                line.writing -= 1
                line.busy.discard(order)
                _more.notify_all()  # the key's next write may run now


def _late(future: Future[Any], waited: float, what: str) -> Late:
    """Say the turn no longer waits for ``future``: a failure of it is logged (once, when
    it ends, or now if it ended meanwhile)."""

    def lost(f: Future[Any]) -> None:
        exc = f.exception()
        if exc is not None:
            _log.warning("memory_inject: %s lost: %s", what, describe_fault(exc))

    future.add_done_callback(lost)
    return Late(waited)


def write_in_time(
    store: object, fn: Callable[[], T], wait_s: float, what: str, order: object = None
) -> T:
    """``fn()`` (a write of ``store``), waited for at most ``wait_s``: its result, its
    exception, or :class:`Late` while it goes on alone. ``what`` names it in the log;
    writes of one ``order`` key (a session) are made one at a time, in order."""
    future = _start(store, fn, order)
    concurrent.futures.wait([future], timeout=max(0.0, wait_s))
    if future.done():
        return future.result()  # its own exception, a TimeoutError included, is raised
    raise _late(future, wait_s, what)


async def awrite_in_time(
    store: object,
    fn: Callable[[], T] | Awaitable[T],
    wait_s: float,
    what: str,
    order: object = None,
) -> T:
    """The async twin of :func:`write_in_time`: a blocking ``fn`` runs in the store's line,
    an awaitable (the write of a store that only writes async) as a task of the running
    loop; the loop runs on while the turn waits."""
    if inspect.isawaitable(fn):
        return await _task_in_time(fn, wait_s, what)
    future = _start(store, fn, order)
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
    """Hold ``task`` until it ends (the loop keeps only a weak reference); log it lost if
    it fails, or is cancelled (``asyncio.run`` cancels what is left when it ends)."""
    _tasks.add(task)

    def ended(t: asyncio.Task[Any]) -> None:
        _tasks.discard(t)
        if t.cancelled():
            _log.warning("memory_inject: %s lost: its event loop ended before it did", what)
            return
        exc = t.exception()
        if exc is not None:
            _log.warning("memory_inject: %s lost: %s", what, describe_fault(exc))

    task.add_done_callback(ended)


@atexit.register
def _at_exit() -> None:
    """Give the writers :data:`EXIT_WAIT_S` to finish; say how many writes were lost."""
    until = time.monotonic() + EXIT_WAIT_S
    with _lock:
        while any(ln.waiting or ln.writing for ln in _lines.values()) and time.monotonic() < until:
            _more.wait(0.05)
        left = sum(len(ln.waiting) + ln.writing for ln in _lines.values())
    if left:
        _log.warning("memory_inject: %d deferred memory writes lost at exit", left)
