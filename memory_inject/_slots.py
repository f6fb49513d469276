"""The recall threads' ledger: each store's slots, its stuck calls and the turns waiting in line.

Owns two of the rules' numbers (:data:`MAX_STUCK_PER_STORE`, :data:`MAX_THREADS`),
the ledger of running and stuck calls per store, the first-come-first-served
line of turns waiting for a store's slot (a thread or a task), :class:`Job`
(one call holding a slot), the :class:`Busy` / :class:`Waited` outcomes and
the event lines that name them.
The threads themselves and the hand-off are ``memory_inject._deadline``,
whose docstring states the rules.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable

from memory_inject._slot_notes import (
    EXHAUSTED,
    MAX_THREADS,
    store_busy,
    waited_note,
    waited_store_note,
)
from memory_inject.contract import Memory

__all__ = [
    "EXHAUSTED",
    "HUNG_AFTER_S",
    "MAX_STUCK_PER_STORE",
    "MAX_THREADS",
    "Busy",
    "Full",
    "Job",
    "Waited",
    "aadmit",
    "admit",
    "stuck_calls",
    "stuck_total",
    "waited_note",
    "waited_store_note",
]

#: A store with this many calls still running past their deadline is skipped at
#: once, so one hung store cannot take every thread and starve the other stores.
MAX_STUCK_PER_STORE = 4
#: A call counts as stuck only once it has run this long (seconds), whatever its turn's
#: deadline: a turn of ``deadline_ms: 10`` giving up on a 200 ms answer says nothing of
#: the store, and four such turns made a healthy store send every other turn away.
HUNG_AFTER_S = 1.0

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
        #: Calls whose turn was cancelled before its deadline: stuck once it passes.
        self.due: dict[int, list[Job]] = {}


class _Waiter:
    """A turn waiting for a store's slot: a thread (``lock``) or a task (``loop``, ``future``)."""

    __slots__ = ("future", "granted", "job", "lock", "loop", "start")

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
        #: A task's call, started by the thread that frees the slot (see :func:`aadmit`).
        self.start: Callable[[Job], None] | None = None
        self.job: Job | None = None

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


def _after_fork_in_child() -> None:
    """A child of ``fork()`` runs none of its parent's recalls: a new ledger and lock (a
    parent's thread may have held the old one), or every turn waited out its deadline for
    slots no call would give back (``storage/sqlite/forks.py``)."""
    global _lock, _STUCK
    _lock, _STUCK = threading.Lock(), _Ledger()


os.register_at_fork(after_in_child=_after_fork_in_child)


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


def stuck_total() -> int:
    """How many calls to any store are running past their turn's deadline now (a call
    given up on earlier counts from its time: every store's are promoted here first)."""
    if _STUCK.due:
        with _lock:
            for key in list(_STUCK.due):
                _promote(key)
    return _STUCK.total


def stuck_calls(store: object) -> int:
    """How many calls to ``store`` are running past their turn's deadline now."""
    with _lock:
        _promote(id(store))
        return _STUCK.per_store.get(id(store), 0)


class Job:
    """One call handed to a recall thread: finished, or stuck once its turn gave up on it.

    ``key`` is its store's ``id``, the ledger's key.
    """

    __slots__ = ("due", "finished", "key", "lent", "started", "stuck")

    def __init__(self, key: int) -> None:
        self.key = key
        self.finished = False
        self.lent = False  # its slot went to the next turn while it waits (``lend``)
        self.stuck = False
        self.started = time.perf_counter()
        #: When a call whose turn stopped waiting early becomes stuck (None: not given up).
        self.due: float | None = None

    def finish(self) -> None:
        """The call returned (or raised): its slot goes to the first waiting turn, or is
        free; a stuck one no longer counts. A waiting task's call is started here, on
        this thread's way out (:func:`aadmit`), not when the task's loop comes round."""
        with _lock:
            if self.finished:
                return
            self.finished = True
            waiter = None if self.lent else _hand_on(self.key)
            if self.stuck:
                n = _STUCK.per_store.get(self.key, 1) - 1
                if n <= 0:
                    _STUCK.per_store.pop(self.key, None)
                else:
                    _STUCK.per_store[self.key] = n
                _STUCK.total -= 1
            elif self.due is not None:
                _undue(self)
        if waiter is not None:
            _start(waiter)

    def lend(self) -> Callable[[], None]:
        """The call waits for something not the store (its prompt's vector): the slot goes
        to the next turn in line meanwhile (it held it for half its deadline, and the turns
        behind it lost theirs). Answers what takes it back, without waiting in line."""
        with _lock:
            if self.finished or self.lent:
                return _nothing
            self.lent = True
            waiter = _hand_on(self.key)
        if waiter is not None:
            _start(waiter)
        return self._take_back

    def _take_back(self) -> None:
        with _lock:
            self.lent = False
            _STUCK.running[self.key] = _STUCK.running.get(self.key, 0) + 1

    def give_up(self, at: float | None = None) -> None:
        """The turn stopped waiting: a call still running is stuck from ``at`` (a
        ``perf_counter`` value, the turn's deadline; None: now), and not before it has run
        :data:`HUNG_AFTER_S`. A turn cancelled before its deadline (a client hung up) does
        not make a healthy call stuck: it holds its slot until it returns, and counts
        against the store only once the deadline passed."""
        with _lock:
            if self.finished or self.stuck or self.due is not None:
                return
            now = time.perf_counter()
            at = max(now if at is None else at, self.started + HUNG_AFTER_S)
            if at > now:
                self.due = at
                _STUCK.due.setdefault(self.key, []).append(self)
                return
            self._stick()

    def _stick(self) -> None:
        """Count the call as stuck (the lock is held)."""
        self.stuck = True
        _STUCK.per_store[self.key] = _STUCK.per_store.get(self.key, 0) + 1
        _STUCK.total += 1


def _undue(job: Job) -> None:
    """Take ``job`` off its store's list of calls that become stuck later (the lock is held)."""
    jobs = _STUCK.due.get(job.key)
    if jobs is not None:
        with contextlib.suppress(ValueError):
            jobs.remove(job)
        if not jobs:
            del _STUCK.due[job.key]


def _promote(key: int) -> None:
    """Calls of store ``key`` given up early whose deadline has passed are stuck now (the
    lock is held)."""
    jobs = _STUCK.due.get(key)
    if not jobs:
        return
    now = time.perf_counter()
    for job in [j for j in jobs if j.due is not None and j.due <= now]:
        _undue(job)
        job._stick()


def _nothing() -> None:
    """Nothing to take back: the slot was not lent."""


class Full(Exception):
    """Every recall thread (or the store's share of them) is busy (internal)."""


def _hand_on(key: int) -> _Waiter | None:
    """A slot of store ``key`` came free: give it to the first waiter that can hear (the
    lock is held). A task's waiter is answered for the caller to start outside the lock."""
    queue_ = _STUCK.waiters.get(key)
    while queue_:
        waiter = queue_.popleft()
        waiter.granted = True
        if waiter.start is not None:
            waiter.job = Job(key)
            if not queue_:
                del _STUCK.waiters[key]
            return waiter
        if waiter.wake():
            if not queue_:
                del _STUCK.waiters[key]
            return None
        waiter.granted = False
    _STUCK.waiters.pop(key, None)
    running = _STUCK.running.get(key, 1) - 1
    if running <= 0:
        _STUCK.running.pop(key, None)
    else:
        _STUCK.running[key] = running
    return None


def _start(waiter: _Waiter) -> None:
    """Start a task's call on the slot it was handed (:func:`aadmit`), then wake the task
    to await its result."""
    if waiter.start is not None and waiter.job is not None:  # _hand_on set both
        waiter.start(waiter.job)
    waiter.wake()


def _claim(store: Memory, slots: int) -> tuple[int, int, _Waiter | None]:
    """``(key, slots, None)`` with one of the store's ``slots`` taken, or a waiter queued
    for one (the lock is held).

    :class:`Busy` when the store is hung: as many of its calls are stuck past
    their deadline as may be (:data:`MAX_STUCK_PER_STORE`, or all its slots).
    """
    key = id(store)
    _promote(key)
    n = _STUCK.per_store.get(key, 0)
    if n >= min(MAX_STUCK_PER_STORE, slots):
        raise Busy(store_busy(n))
    running = _STUCK.running.get(key, 0)
    if running < slots and not _STUCK.waiters.get(key):
        _STUCK.running[key] = running + 1
        return key, slots, None
    return key, slots, _Waiter()


def admit(store: Memory, until: float | None, slots: int) -> Job:
    """A job holding one of ``store``'s ``slots``, waiting in line for one until ``until``.

    :class:`Busy` when the store is hung; :class:`Full` when no slot came
    before ``until``.
    """
    with _lock:
        key, _slots, waiter = _claim(store, slots)
        if waiter is None:
            return Job(key)
        waiter.lock = threading.Lock()
        waiter.lock.acquire()
        _STUCK.waiters.setdefault(key, collections.deque()).append(waiter)
    left = 0.0 if until is None else until - time.perf_counter()
    if left > 0.0:
        waiter.lock.acquire(timeout=left)
    with _lock:
        if waiter.granted:
            return Job(key)
        _drop_waiter(key, waiter)
    raise Full


def _drop_waiter(key: int, waiter: _Waiter) -> None:
    queue_ = _STUCK.waiters.get(key)
    if queue_ is not None:
        with contextlib.suppress(ValueError):
            queue_.remove(waiter)
        if not queue_:
            del _STUCK.waiters[key]


async def aadmit(
    store: Memory,
    until: float | None,
    slots: int,
    waiting: Callable[[str | None], None] | None,
    start: Callable[[Job], None],
) -> tuple[Job, bool]:
    """The async twin of :func:`admit`: the task waits in the same line, never blocking
    the loop. Cancelled while it waits, it leaves the line.

    The thread that frees a slot for the task starts its call itself (``start(job)``,
    which must not raise), so a slot never waits for the task's loop to come round: a
    busy loop would hold it idle for its iterations, a stopped one for ever. Answers the
    job and whether its call was started that way (False: a free slot was taken at
    once; the task starts the call).
    """
    loop = asyncio.get_running_loop()
    with _lock:
        key, _slots, waiter = _claim(store, slots)
        if waiter is None:
            return Job(key), False
        waiter.loop, waiter.future = loop, loop.create_future()
        waiter.start = start
        _STUCK.waiters.setdefault(key, collections.deque()).append(waiter)
    if waiting is not None:
        waiting("store")
    future = waiter.future
    try:
        left = None if until is None else max(0.0, until - time.perf_counter())
        await asyncio.wait({future}, timeout=left)
    except BaseException:
        with _lock:
            if not waiter.granted:
                _drop_waiter(key, waiter)
                raise
            job = waiter.job
        if job is not None:  # its call is running: it holds the slot until it returns
            job.give_up(until)
        raise
    with _lock:
        if waiter.granted and waiter.job is not None:
            return waiter.job, True
        _drop_waiter(key, waiter)
    raise Full
