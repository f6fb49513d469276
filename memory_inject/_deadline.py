"""The per-turn deadline of a recall: recall threads, and the calls that outlived their deadline.

A render with a deadline whose store cannot stop itself in place hands its
store calls to a recall thread and waits at most the deadline for them (the
async runner awaits them the same way). Many turns run at once in a server,
so the rules are about *stuck* calls, not running ones:

* A call is **stuck** once its turn stopped waiting for it (the deadline
  passed) and it has not returned. Only stuck calls count against a store:
  a store with :data:`MAX_STUCK_PER_STORE` of them is skipped at once
  (``store_busy``), because it is hung; a healthy store serves any number of
  concurrent turns, however many calls are running.
* At most :data:`MAX_THREADS` recall threads exist in the process, and one
  store runs at most :data:`MAX_RUNNING_PER_STORE` calls on them at once (so
  a burst of turns on a store that has just hung cannot take every thread
  before any deadline passes). When either is reached a turn **waits**, and
  the wait counts against its deadline; if the deadline passes first, the
  turn's recall never started and its event says so (``recall_wait: ...``),
  not ``deadline``. When every thread is held by a stuck call, no wait can
  help: the turn is skipped at once (``recall_threads_exhausted``).
* The threads are daemon threads of the library's own, never joined at
  interpreter exit, so a stuck store cannot keep the host from shutting down
  (``concurrent.futures`` joins its workers at exit).

Idle threads are kept for reuse, at most :data:`_IDLE` of them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from memory_inject.contract import Memory

__all__ = [
    "MAX_RUNNING_PER_STORE",
    "MAX_STUCK_PER_STORE",
    "MAX_THREADS",
    "Busy",
    "Waited",
    "arun_in_thread",
    "hand_off",
    "slots_of",
    "stuck_calls",
    "wait_note",
]

#: A store with this many calls still running past their deadline is skipped at
#: once, so one hung store cannot take every thread and starve the other stores.
MAX_STUCK_PER_STORE = 4
#: Recall threads in the process, busy or idle.
MAX_THREADS = 64
#: Calls of one store running on recall threads at once; further turns wait.
MAX_RUNNING_PER_STORE = MAX_THREADS // 2
_IDLE = 16
#: How often an async turn looks for a free recall thread while all are busy.
_ASYNC_POLL_S = 0.002

_lock = threading.Lock()


class _Ledger:
    """Stuck calls per store (by ``id``) and in the whole process, running calls per store
    and the turns waiting for one of a store's slots (first come, first served); guarded
    by ``_lock``."""

    def __init__(self) -> None:
        self.per_store: dict[int, int] = {}
        self.total = 0
        self.running: dict[int, int] = {}
        self.waiters: dict[int, collections.deque[_Waiter]] = {}


class _Waiter:
    """A turn waiting for a store's slot: a thread (``lock``) or a task (``loop``, ``future``)."""

    __slots__ = ("future", "granted", "lock", "loop")

    def __init__(
        self,
        lock: threading.Lock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        future: asyncio.Future[None] | None = None,
    ) -> None:
        self.lock = lock
        self.loop = loop
        self.future = future
        self.granted = False

    def wake(self) -> bool:
        """Tell the waiter it has the slot; False when it cannot hear (its loop is closed)."""
        if self.lock is not None:
            self.lock.release()
            return True
        if self.loop is None or self.future is None:
            return False
        try:
            self.loop.call_soon_threadsafe(_settle, self.future)
        except RuntimeError:
            return False
        return True


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_STUCK = _Ledger()


class Busy(Exception):
    """A recall was not started: its store (or every recall thread) is held by stuck calls."""

    def __init__(self, note: str) -> None:
        """``note`` is the event's degraded line."""
        super().__init__(note)
        self.note = note


class Waited(Exception):
    """A recall was not started: the deadline passed while it waited for a recall thread."""

    def __init__(self, note: str) -> None:
        """``note`` is the event's degraded line."""
        super().__init__(note)
        self.note = note


def _store_busy(n: int) -> str:
    return (
        f"store_busy: {n} earlier recalls of this store are still running past their "
        "deadline; recall skipped"
    )


_EXHAUSTED = (
    f"recall_threads_exhausted: all {MAX_THREADS} recall threads are held by calls "
    "past their deadline; recall skipped"
)


def _waited(waited: float) -> str:
    return (
        f"recall_wait: all {MAX_THREADS} recall threads stayed busy for {waited:.3f}s "
        "(the turn's deadline); the recall never started"
    )


def _waited_store(waited: float, slots: int) -> str:
    return (
        f"recall_wait: {slots} recalls of this store stayed running for "
        f"{waited:.3f}s (the turn's deadline); the recall never started"
    )


def wait_note(kind: str, waited: float, memory: object = None) -> str:
    """The event's line for a turn whose deadline passed while it waited (``kind``:
    ``"store"`` for the store's slots, ``"threads"`` for any recall thread)."""
    return _waited_store(waited, slots_of(memory)) if kind == "store" else _waited(waited)


def slots_of(memory: object) -> int:
    """How many calls of ``memory`` may run on recall threads at once.

    A store says so with an integer ``recall_slots`` (the built-in stores: about
    what their connections and the cores can serve; more only fight for the
    GIL or a connection); otherwise, and at most, :data:`MAX_RUNNING_PER_STORE`.
    """
    try:
        n = getattr(memory, "recall_slots", None)
    except Exception:  # noqa: BLE001 - a store's attribute must not fail the turn
        n = None
    if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        return min(n, MAX_RUNNING_PER_STORE)
    return MAX_RUNNING_PER_STORE


def stuck_calls(memory: object) -> int:
    """How many calls to ``memory`` are running past their turn's deadline now."""
    with _lock:
        return _STUCK.per_store.get(id(memory), 0)


class _Job:
    """One call handed to a recall thread: finished, or stuck once its turn gave up on it."""

    __slots__ = ("finished", "key", "stuck")

    def __init__(self, key: int) -> None:
        self.key = key
        self.finished = False
        self.stuck = False

    def finish(self) -> None:
        """The call returned (or raised): its slot goes to the first waiting turn, or is
        free; a stuck one no longer counts."""
        with _lock:
            if self.finished:
                return
            self.finished = True
            _hand_on(self.key)
            if self.stuck:
                n = _STUCK.per_store.get(self.key, 1) - 1
                if n <= 0:
                    _STUCK.per_store.pop(self.key, None)
                else:
                    _STUCK.per_store[self.key] = n
                _STUCK.total -= 1

    def give_up(self) -> None:
        """The turn stopped waiting: a call still running is stuck from now on."""
        with _lock:
            if self.finished or self.stuck:
                return
            self.stuck = True
            _STUCK.per_store[self.key] = _STUCK.per_store.get(self.key, 0) + 1
            _STUCK.total += 1


class _Full(Exception):
    """Every recall thread (or the store's share of them) is busy (internal)."""


def _hand_on(key: int) -> None:
    """A slot of store ``key`` came free: give it to the first waiter that can hear (the
    lock is held)."""
    queue_ = _STUCK.waiters.get(key)
    while queue_:
        waiter = queue_.popleft()
        waiter.granted = True
        if waiter.wake():
            if not queue_:
                del _STUCK.waiters[key]
            return
        waiter.granted = False
    _STUCK.waiters.pop(key, None)
    running = _STUCK.running.get(key, 1) - 1
    if running <= 0:
        _STUCK.running.pop(key, None)
    else:
        _STUCK.running[key] = running


def _claim(memory: Memory) -> tuple[int, int, _Waiter | None]:
    """``(key, slots, None)`` with a slot taken, or a waiter queued for one (the lock is held).

    :class:`Busy` when the store is hung: as many of its calls are stuck past
    their deadline as may be (:data:`MAX_STUCK_PER_STORE`, or all its slots).
    """
    key = id(memory)
    slots = slots_of(memory)
    n = _STUCK.per_store.get(key, 0)
    if n >= min(MAX_STUCK_PER_STORE, slots):
        raise Busy(_store_busy(n))
    running = _STUCK.running.get(key, 0)
    if running < slots and not _STUCK.waiters.get(key):
        _STUCK.running[key] = running + 1
        return key, slots, None
    return key, slots, _Waiter()


def _admit(memory: Memory, until: float | None) -> _Job:
    """A job holding one of ``memory``'s slots, waiting in line for one until ``until``.

    :class:`Busy` when the store is hung; :class:`_Full` when no slot came
    before ``until``.
    """
    with _lock:
        key, _slots, waiter = _claim(memory)
        if waiter is None:
            return _Job(key)
        waiter.lock = threading.Lock()
        waiter.lock.acquire()
        _STUCK.waiters.setdefault(key, collections.deque()).append(waiter)
    left = 0.0 if until is None else until - time.perf_counter()
    if left > 0.0:
        waiter.lock.acquire(timeout=left)
    with _lock:
        if waiter.granted:
            return _Job(key)
        _drop_waiter(key, waiter)
    raise _Full


def _drop_waiter(key: int, waiter: _Waiter) -> None:
    queue_ = _STUCK.waiters.get(key)
    if queue_ is not None:
        with contextlib.suppress(ValueError):
            queue_.remove(waiter)
        if not queue_:
            del _STUCK.waiters[key]


async def _aadmit(
    memory: Memory, until: float | None, waiting: Callable[[str | None], None] | None
) -> _Job:
    """The async twin of :func:`_admit`: the task waits in the same line, never blocking
    the loop. Cancelled while it waits, it leaves the line (or passes on a slot it got)."""
    loop = asyncio.get_running_loop()
    with _lock:
        key, _slots, waiter = _claim(memory)
        if waiter is None:
            return _Job(key)
        waiter.loop, waiter.future = loop, loop.create_future()
        _STUCK.waiters.setdefault(key, collections.deque()).append(waiter)
    if waiting is not None:
        waiting("store")
    future = waiter.future
    try:
        left = None if until is None else max(0.0, until - time.perf_counter())
        await asyncio.wait({future}, timeout=left)
    except BaseException:
        with _lock:
            if waiter.granted:
                _hand_on(key)
            else:
                _drop_waiter(key, waiter)
        raise
    with _lock:
        if waiter.granted:
            return _Job(key)
        _drop_waiter(key, waiter)
    raise _Full


class _Threads:
    """Daemon worker threads fed by one queue; a new one starts only when none is idle."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0  # workers waiting for an item that no submit has claimed
        self.count = 0  # workers alive

    def submit(self, fn: Callable[[], None], until: float | None = None) -> None:
        """Run ``fn`` on a worker, waiting for one until ``until`` (a ``perf_counter`` value).

        :class:`Busy` when every thread is held by a stuck call; :class:`_Full`
        when all are busy and ``until`` passed (None: do not wait).
        """
        with self._cond:
            while True:
                if self._idle > 0:
                    self._idle -= 1
                    self._queue.put(fn)
                    return
                if self.count < MAX_THREADS:
                    self.count += 1
                    break
                if _STUCK.total >= MAX_THREADS:
                    raise Busy(_EXHAUSTED)
                left = 0.0 if until is None else until - time.perf_counter()
                if left <= 0.0:
                    raise _Full
                self._cond.wait(left)
        try:
            threading.Thread(
                target=self._work, args=(fn,), name="memory-inject-recall", daemon=True
            ).start()
        except BaseException:
            with self._cond:
                self.count -= 1
                self._cond.notify()
            raise

    def _work(self, fn: Callable[[], None]) -> None:
        while True:
            with contextlib.suppress(BaseException):  # each call records its own outcome
                fn()
            with self._cond:
                if self._idle >= _IDLE:
                    self.count -= 1
                    self._cond.notify()
                    return
                self._idle += 1
                self._cond.notify()
            fn = self._queue.get()


_THREADS = _Threads()


def _submit(job: _Job, run: Callable[[], None], until: float, t0: float) -> None:
    try:
        _THREADS.submit(run, until)
    except _Full:
        job.finish()
        raise Waited(_waited(time.perf_counter() - t0)) from None
    except BaseException:
        job.finish()  # no thread could start: the slot goes back
        raise


def hand_off(
    memory: Memory, work: Callable[[], None], deadline: float, *, grace: float = 0.0
) -> bool:
    """Run ``work`` (the calls to ``memory``) on a recall thread and wait up to ``deadline`` s.

    The wait for a free thread is part of the deadline. ``grace`` is added
    to the final wait only, for stores that stop their own work at the
    deadline and then report why. True: it finished in time. False: it is
    still running and now counts as stuck until it returns. Raises
    :class:`Busy` or :class:`Waited` when it was not started.
    """
    t0 = time.perf_counter()
    until = t0 + deadline
    try:
        job = _admit(memory, until)
    except _Full:
        raise Waited(_waited_store(time.perf_counter() - t0, slots_of(memory))) from None
    # A plain lock as the completion flag: acquiring it with a timeout is a
    # single C call, cheaper than an Event's or a Future's condition variable.
    done = threading.Lock()
    done.acquire()

    def run() -> None:
        try:
            work()
        finally:
            job.finish()
            done.release()

    _submit(job, run, until, t0)
    if done.acquire(timeout=max(0.0, until - time.perf_counter()) + grace):
        return True
    job.give_up()
    return False


async def arun_in_thread(
    memory: Memory,
    fn: Callable[[], Any],
    until: float | None = None,
    waiting: Callable[[str | None], None] | None = None,
) -> Any:
    """Await ``fn()`` run on a recall thread, under the same rules as :func:`hand_off`.

    While every thread is busy the task polls for one (the event loop is never
    blocked) until ``until``, then raises :class:`Waited`. Cancelling the
    await (the deadline) leaves the call to finish on its own, counted as
    stuck until it does; its result is dropped. Raises :class:`Busy` when it
    was not started. ``waiting`` hears what the task waits for (``"store"``,
    ``"threads"``; see :func:`wait_note`), and None once a thread has the call.
    """
    t0 = time.perf_counter()
    try:
        job = await _aadmit(memory, until, waiting)
    except _Full:
        raise Waited(_waited_store(time.perf_counter() - t0, slots_of(memory))) from None
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        finally:
            job.finish()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    while True:
        try:
            _THREADS.submit(run)
        except _Full:
            if waiting is not None:
                waiting("threads")
            if until is not None and time.perf_counter() >= until:
                job.finish()
                raise Waited(_waited(time.perf_counter() - t0)) from None
            try:
                await asyncio.sleep(_ASYNC_POLL_S)
            except BaseException:
                job.finish()
                raise
        except BaseException:
            job.finish()
            raise
        else:
            if waiting is not None:
                waiting(None)
            break
    try:
        return await future
    except asyncio.CancelledError:
        job.give_up()
        raise
