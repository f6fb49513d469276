"""The per-turn deadline of a sync recall: worker threads and per-store stuck-call accounting.

A sync render with a deadline hands its store calls to a worker thread and
waits at most the deadline for them. A worker whose store never answers keeps
its thread, so the pool is bounded, a full pool spills to threads of their
own, and a store with too many calls still running past their deadline is
skipped at once. The async runner needs none of this: it cancels with
``asyncio.wait_for``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from memory_inject.contract import Memory

__all__ = ["MAX_STUCK_PER_STORE", "hand_off"]

# Recalls that outlive their deadline keep a worker until the store answers;
# the pool bounds how many can pile up behind a store that hangs for good.
_EXECUTOR = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memory-inject-recall")
# When every pool worker is stuck (several hung stores), a call gets a thread of
# its own, so a healthy store is never queued behind hung ones.
#: At most this many calls per store may still be running past their deadline;
#: beyond it the store is skipped at once, so one hung store cannot take every
#: worker and starve the renders of other stores.
MAX_STUCK_PER_STORE = 4
_POOL_SIZE = 16
_running: dict[int, int] = {}
_inflight = [0]
_running_lock = threading.Lock()


def _enter(memory: Memory) -> bool | None:
    """Reserve a slot for ``memory``: True (pool), False (own thread: pool full), None (busy)."""
    with _running_lock:
        n = _running.get(id(memory), 0)
        if n >= MAX_STUCK_PER_STORE:
            return None
        _running[id(memory)] = n + 1
        _inflight[0] += 1
        return _inflight[0] <= _POOL_SIZE


def _leave(memory: Memory) -> None:
    with _running_lock:
        _inflight[0] -= 1
        n = _running.get(id(memory), 1) - 1
        if n <= 0:
            _running.pop(id(memory), None)
        else:
            _running[id(memory)] = n


def _run_tracked(work: Callable[[], None], memory: Memory) -> None:
    try:
        work()
    finally:
        _leave(memory)


def hand_off(memory: Memory, work: Callable[[], None], deadline: float) -> bool | None:
    """Run ``work`` (the calls to ``memory``) in a worker and wait up to ``deadline`` seconds.

    True: it finished in time. False: it is still running (it keeps its worker
    until the store answers). None: ``memory`` already has
    :data:`MAX_STUCK_PER_STORE` calls running past their deadline, so ``work``
    was not started.
    """
    slot = _enter(memory)
    if slot is None:
        return None
    # A plain lock as the completion flag: acquiring it with a timeout is a
    # single C call, cheaper than an Event's or a Future's condition variable.
    done = threading.Lock()
    done.acquire()

    def run() -> None:
        try:
            _run_tracked(work, memory)
        finally:
            done.release()

    try:
        if slot:
            _EXECUTOR.submit(run)
        else:
            threading.Thread(target=run, name="memory-inject-recall-extra", daemon=True).start()
    except BaseException:
        # No thread could start (the interpreter is out of threads, or shutting
        # down): give the slot back, and let the render report the error.
        _leave(memory)
        raise
    return done.acquire(timeout=deadline)
