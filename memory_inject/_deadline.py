"""The per-turn deadline of a recall: recall threads and per-store stuck-call accounting.

A render with a deadline whose store cannot stop itself in place hands its
store calls to a recall thread and waits at most the deadline for them (the
async runner awaits them the same way). A thread whose store never answers
stays with it, so:

* a store with :data:`MAX_STUCK_PER_STORE` calls still running past their
  deadline is skipped at once (``store_busy``), whatever else is running;
* every recall thread of the process counts against :data:`MAX_THREADS`, so
  many distinct hung stores cannot grow threads without bound: beyond it a
  render is skipped at once too (``recall_threads_exhausted``);
* the threads are daemon threads of the library's own, never joined at
  interpreter exit, so a stuck store cannot keep the host from shutting down
  (``concurrent.futures`` joins its workers at exit).

Idle threads are kept for reuse, at most :data:`_IDLE` of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from memory_inject.contract import Memory

__all__ = [
    "MAX_STUCK_PER_STORE",
    "MAX_THREADS",
    "Busy",
    "arun_in_thread",
    "hand_off",
]

#: At most this many calls per store may still be running past their deadline;
#: beyond it the store is skipped at once, so one hung store cannot take every
#: thread and starve the renders of other stores.
MAX_STUCK_PER_STORE = 4
#: Recall threads in the process, busy or idle; beyond it renders skip at once.
MAX_THREADS = 64
_IDLE = 16
_running: dict[int, int] = {}
_running_lock = threading.Lock()


class Busy(Exception):
    """A recall was not started: its store (or the process) has too many stuck calls."""

    def __init__(self, note: str) -> None:
        """``note`` is the event's degraded line."""
        super().__init__(note)
        self.note = note


_STORE_BUSY = (
    f"store_busy: {MAX_STUCK_PER_STORE} earlier recalls are still running past "
    "their deadline; recall skipped"
)
_EXHAUSTED = (
    f"recall_threads_exhausted: {MAX_THREADS} recall threads are busy with stores that "
    "have not answered; recall skipped"
)


class _Threads:
    """Daemon worker threads fed by one queue; a new one starts only when none is idle."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # workers waiting for an item that no submit has claimed
        self.count = 0  # workers alive

    def submit(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` on a worker; False when :data:`MAX_THREADS` are all busy."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._queue.put(fn)
                return True
            if self.count >= MAX_THREADS:
                return False
            self.count += 1
        try:
            threading.Thread(
                target=self._work, args=(fn,), name="memory-inject-recall", daemon=True
            ).start()
        except BaseException:
            with self._lock:
                self.count -= 1
            raise
        return True

    def _work(self, fn: Callable[[], None]) -> None:
        while True:
            with contextlib.suppress(BaseException):  # each call records its own outcome
                fn()
            with self._lock:
                if self._idle >= _IDLE:
                    self.count -= 1
                    return
                self._idle += 1
            fn = self._queue.get()


_THREADS = _Threads()


def _enter(memory: Memory) -> None:
    """Reserve a stuck-call slot for ``memory``, or raise :class:`Busy`."""
    with _running_lock:
        n = _running.get(id(memory), 0)
        if n >= MAX_STUCK_PER_STORE:
            raise Busy(_STORE_BUSY)
        _running[id(memory)] = n + 1


def _leave(memory: Memory) -> None:
    with _running_lock:
        n = _running.get(id(memory), 1) - 1
        if n <= 0:
            _running.pop(id(memory), None)
        else:
            _running[id(memory)] = n


def _start(memory: Memory, run: Callable[[], None]) -> None:
    """Start ``run`` (which must call ``_leave(memory)`` when done) on a recall thread."""
    _enter(memory)
    try:
        started = _THREADS.submit(run)
    except BaseException:
        # No thread could start (the interpreter is out of threads, or shutting
        # down): give the slot back, and let the render report the error.
        _leave(memory)
        raise
    if not started:
        _leave(memory)
        raise Busy(_EXHAUSTED)


def hand_off(memory: Memory, work: Callable[[], None], deadline: float) -> bool:
    """Run ``work`` (the calls to ``memory``) on a recall thread and wait up to ``deadline`` s.

    True: it finished in time. False: it is still running (it keeps its
    thread until the store answers). Raises :class:`Busy` when it was not
    started.
    """
    # A plain lock as the completion flag: acquiring it with a timeout is a
    # single C call, cheaper than an Event's or a Future's condition variable.
    done = threading.Lock()
    done.acquire()

    def run() -> None:
        try:
            work()
        finally:
            _leave(memory)
            done.release()

    _start(memory, run)
    return done.acquire(timeout=deadline)


async def arun_in_thread(memory: Memory, fn: Callable[[], Any]) -> Any:
    """Await ``fn()`` run on a recall thread, under the same caps as :func:`hand_off`.

    Cancelling the await (the deadline) leaves the thread to finish on its
    own; its result is dropped. Raises :class:`Busy` when it was not started.
    """
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
            _leave(memory)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    _start(memory, run)
    return await future
