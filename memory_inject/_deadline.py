"""The per-turn deadline of a recall: recall threads, and the calls that outlived their deadline.

A render with a deadline whose store cannot stop itself in place hands its
store calls to a recall thread and waits at most the deadline for them (the
async runner awaits them the same way). Many turns run at once in a server,
so the rules are about *stuck* calls, not running ones:

* A call is **stuck** once its turn stopped waiting for it (the deadline
  passed), it has run :data:`~memory_inject._slots.HUNG_AFTER_S` (1 s: a turn
  of a 10 ms deadline says nothing of the store) and it has not returned.
  Only stuck calls count against a store:
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

Owns the recall threads and the hand-off of a turn's calls to them (sync and
async), and how many slots a store has (:func:`slots_of`). The ledger of slots
and stuck calls is ``memory_inject._slots``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from memory_inject._render_ears import _WAIT_EAR
from memory_inject._slots import (
    EXHAUSTED,
    MAX_STUCK_PER_STORE,
    MAX_THREADS,
    Busy,
    Full,
    Job,
    Waited,
    aadmit,
    admit,
    stuck_calls,
    stuck_total,
    waited_note,
    waited_store_note,
)
from memory_inject._workers import settle
from memory_inject.contract import _SLOT_LEND, Memory
from memory_inject.exceptions import RecallWaitError

__all__ = [
    "MAX_RUNNING_PER_STORE",
    "MAX_STUCK_PER_STORE",
    "MAX_THREADS",
    "Busy",
    "Waited",
    "arun_in_thread",
    "hand_off",
    "in_recall_thread",
    "slots_of",
    "stuck_calls",
    "wait_note",
]

T = TypeVar("T")

#: Calls of one store running on recall threads at once; further turns wait.
MAX_RUNNING_PER_STORE = MAX_THREADS // 2
_IDLE = 16
#: How often an async turn looks for a free recall thread while all are busy.
_ASYNC_POLL_S = 0.002


def slots_of(store: object) -> int:
    """How many calls of ``store`` may run on recall threads at once.

    A store says so with an integer ``recall_slots`` (the built-in stores: about
    what their connections and the cores can serve; more only fight for the
    GIL or a connection); otherwise, and at most, :data:`MAX_RUNNING_PER_STORE`.
    """
    try:
        n = getattr(store, "recall_slots", None)
    except Exception:  # noqa: BLE001 - a store's attribute must not fail the turn
        n = None
    if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        return min(n, MAX_RUNNING_PER_STORE)
    return MAX_RUNNING_PER_STORE


def wait_note(kind: str, waited: float, store: object = None) -> str:
    """The event's line for a turn whose deadline passed while it waited (``kind``:
    ``"store"`` for the store's slots, ``"threads"`` for any recall thread)."""
    return waited_store_note(waited, slots_of(store)) if kind == "store" else waited_note(waited)


class _Threads:
    """Daemon worker threads fed by one queue; a new one starts only when none is idle."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._cond = threading.Condition(threading.Lock())
        self._idle = 0  # workers waiting for an item that no submit has claimed
        self.count = 0  # workers alive

    def submit(self, fn: Callable[[], None], until: float | None = None) -> None:
        """Run ``fn`` on a worker, waiting for one until ``until`` (a ``perf_counter`` value).

        :class:`Busy` when every thread is held by a stuck call; :class:`Full`
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
                if stuck_total() >= MAX_THREADS:
                    raise Busy(EXHAUSTED)
                left = 0.0 if until is None else until - time.perf_counter()
                if left <= 0.0:
                    raise Full
                self._cond.wait(min(left, 0.05))  # calls given up on turn stuck meanwhile
        try:
            threading.Thread(
                target=self._work, args=(fn,), name="memory-inject-recall", daemon=True
            ).start()
        except BaseException:
            with self._cond:
                self.count -= 1
                self._cond.notify()
            raise

    def dispatch(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` next on this recall thread when called from one (a slot it just
        freed goes on at once), else on a worker, past :data:`MAX_THREADS` if need be:
        ``fn`` holds a slot already, and a slot must not wait."""
        chain = getattr(_local, "chain", None)
        if chain is not None:
            chain.append(fn)
            return
        try:
            self.submit(fn)
        except (Full, Busy):
            threading.Thread(target=fn, name="memory-inject-recall", daemon=True).start()

    def _work(self, fn: Callable[[], None]) -> None:
        chain: list[Callable[[], None]] = []
        _local.chain = chain
        while True:
            with contextlib.suppress(BaseException):  # each call records its own outcome
                fn()
            while chain:
                with contextlib.suppress(BaseException):
                    chain.pop(0)()
            with self._cond:
                if self._idle >= _IDLE:
                    self.count -= 1
                    self._cond.notify()
                    return
                self._idle += 1
                self._cond.notify()
            fn = self._queue.get()


_THREADS = _Threads()
#: A recall thread's calls to run next (``_Threads.dispatch``).
_local = threading.local()


def _after_fork_in_child() -> None:
    """A child of ``fork()`` has none of its parent's recall threads (``_slots``' note)."""
    global _THREADS  # noqa: PLW0603
    _THREADS = _Threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _lender(job: Job) -> Callable[[], Callable[[], None]]:
    """What lends ``job``'s slot while its call waits for a prompt's vector
    (``contract._SLOT_LEND``). A task the freed slot goes to starts on a thread of its
    own, not after this call in this thread's chain: this call is still waiting."""

    def lend() -> Callable[[], None]:
        chain = getattr(_local, "chain", None)
        _local.chain = None
        try:
            return job.lend()
        finally:
            _local.chain = chain

    return lend


def _submit(job: Job, run: Callable[[], None], until: float, t0: float) -> None:
    try:
        _THREADS.submit(run, until)
    except Full:
        job.finish()
        raise Waited(waited_note(time.perf_counter() - t0)) from None
    except BaseException:
        job.finish()  # no thread could start: the slot goes back
        raise


def hand_off(
    store: Memory, work: Callable[[], None], deadline: float, *, grace: float = 0.0
) -> bool:
    """Run ``work`` (the calls to ``store``) on a recall thread and wait up to ``deadline`` s.

    The wait for a free thread is part of the deadline. ``grace`` is added
    to the final wait only, for stores that stop their own work at the
    deadline and then report why. True: it finished in time. False: it is
    still running and now counts as stuck until it returns. Raises
    :class:`Busy` or :class:`Waited` when it was not started.
    """
    t0 = time.perf_counter()
    until = t0 + deadline
    try:
        job = admit(store, until, slots_of(store))
    except Full:
        raise Waited(waited_store_note(time.perf_counter() - t0, slots_of(store))) from None
    # A plain lock as the completion flag: acquiring it with a timeout is a
    # single C call, cheaper than an Event's or a Future's condition variable.
    done = threading.Lock()
    done.acquire()

    def run() -> None:
        token = _SLOT_LEND.set(_lender(job))
        try:
            work()
        finally:
            _SLOT_LEND.reset(token)
            job.finish()
            done.release()

    _submit(job, run, until, t0)
    if done.acquire(timeout=max(0.0, until - time.perf_counter()) + grace):
        return True
    job.give_up()
    return False


async def arun_in_thread(
    store: Memory,
    fn: Callable[[], Any],
    until: float | None = None,
    waiting: Callable[[str | None], None] | None = None,
) -> Any:
    """Await ``fn()`` run on a recall thread, under the same rules as :func:`hand_off`.

    While every thread is busy the task polls for one (the event loop is never
    blocked) until ``until``, then raises :class:`Waited`. A task waiting in line
    for one of the store's slots has its call started by the thread that frees
    the slot. Cancelling the await leaves the call to finish on its own; its
    result is dropped, and it counts as stuck once ``until`` has passed (at once
    when the deadline cancelled it). Raises :class:`Busy` when it was not
    started. ``waiting`` hears what the task waits for (``"store"``,
    ``"threads"``; see :func:`wait_note`), and None once a thread has the call.
    """
    t0 = time.perf_counter()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    jobs: list[Job] = []

    def tell(value: Any, exc: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, future, value, exc)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        token = _SLOT_LEND.set(_lender(jobs[0]))
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        finally:
            _SLOT_LEND.reset(token)
            jobs[0].finish()
        tell(value, error)

    def start(job: Job) -> None:
        jobs.append(job)
        if waiting is not None:
            waiting(None)
        try:
            _THREADS.dispatch(run)
        except BaseException as exc:  # noqa: BLE001 - no thread could start: the turn hears why
            job.finish()
            tell(None, exc)

    try:
        job, started = await aadmit(store, until, slots_of(store), waiting, start)
    except Full:
        raise Waited(waited_store_note(time.perf_counter() - t0, slots_of(store))) from None
    if not started:
        jobs.append(job)
        await _asubmit(job, run, until, waiting, t0)
    try:
        return await future
    except asyncio.CancelledError:
        job.give_up(until)
        raise


async def _asubmit(
    job: Job,
    run: Callable[[], None],
    until: float | None,
    waiting: Callable[[str | None], None] | None,
    t0: float,
) -> None:
    """Start ``run`` on a recall thread, polling while every thread is busy."""
    while True:
        try:
            _THREADS.submit(run)
        except Full:
            if waiting is not None:
                waiting("threads")
            if until is not None and time.perf_counter() >= until:
                job.finish()
                raise Waited(waited_note(time.perf_counter() - t0)) from None
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
            return


async def in_recall_thread(store: object, fn: Callable[[], T], until: float | None) -> T:
    """A store's async twin of a blocking recall: ``fn()`` on a recall thread, never on
    asyncio's default executor (the host's to fill: a turn whose recall waited there was
    told ``deadline`` with no recall started).

    The rules of :func:`arun_in_thread` apply, with ``store``'s slots (any object
    standing for the store: its ``recall_slots``, else the default); ``until`` is the
    query's deadline. In an async render what the call waits for is told to the turn
    (``contract.report_wait``), and a call that never started raises
    :class:`~memory_inject.exceptions.RecallWaitError` naming the wait (or the busy store).
    """
    ear = _WAIT_EAR.get()

    def waiting(kind: str | None) -> None:
        if ear is not None:  # told from the thread that frees a slot too: no context there
            ear(None if kind is None else (lambda waited: wait_note(kind, waited, store)))

    def heard() -> T:
        token = _WAIT_EAR.set(ear)  # a store call in it that waits for a connection says so
        try:
            return fn()
        finally:
            _WAIT_EAR.reset(token)

    try:
        return cast(T, await arun_in_thread(cast(Memory, store), heard, until, waiting))
    except (Busy, Waited) as exc:
        raise RecallWaitError(exc.note) from None
