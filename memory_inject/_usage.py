"""A recall plan's usage counts (``track_usage``), written within the turn's deadline.

After a render, a plan with ``track_usage`` counts one use of each rendered
row (the store's ``mark_used``). That write can wait for a lock another
process holds: a SQLite file inside another connection's ``BEGIN IMMEDIATE``
is waited for a busy timeout, a pause and a busy timeout more (10.3 s at the
default 5 s: the turn answered correctly and took 10.5 s), a PostgreSQL
namespace's shared lock as long as an import holds it. The turn must not wait
for a counter.

So the write runs on the library's worker threads
(:mod:`memory_inject._workers`) and the turn waits for it until its deadline
(:data:`USAGE_WAIT_S` without one). A write still running then goes on
alone and lands when the lock frees; the event's ``degraded`` says
``usage_deferred: ...``; one that fails within the wait says
``usage_failed: ...``, and one that fails later is logged, its counts lost
(counters are best-effort, and a memory failure never fails the turn).
One write per store runs at a time: the ids of turns that come meanwhile wait
and go together in the next one, so a store locked for minutes holds one
worker thread, not one per turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future

from memory_inject._turn import Turn, describe_fault
from memory_inject._workers import submit, wait_on_loop
from memory_inject.contract import Memory, SupportsUsage, supports
from memory_inject.models import MemoryEntry

__all__ = ["USAGE_WAIT_S", "acount_uses", "count_uses", "usage_ids", "usage_wait"]

#: How long a turn without a deadline waits for its usage counts (seconds): founder-os's
#: ``deadline_ms``.
USAGE_WAIT_S = 2.0

_log = logging.getLogger("memory_inject")
_lock = threading.Lock()
# id(store) -> the ids waiting for the store's running write to end, and their future
# (None: none waiting). An entry lives while a write runs, which holds the store, so
# the id is not reused meanwhile.
_running: dict[int, tuple[list[list[str]], Future[int]] | None] = {}


def _after_fork_in_child() -> None:
    """A child of ``fork()`` has none of its parent's writes running: none to join."""
    global _lock  # noqa: PLW0603
    _lock = threading.Lock()
    _running.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def usage_ids(t: Turn, rendered: Sequence[MemoryEntry]) -> list[str]:
    """The rendered ids a plan with ``track_usage`` counts (one statement for all, founder-os),
    on a store that counts uses; else none."""
    if t.plan is None or not t.plan.track_usage or not rendered:
        return []
    try:
        if not supports(t.store, SupportsUsage):
            return []
    except Exception:  # noqa: BLE001 - a broken store never fails the turn
        return []
    return [e.id for e in rendered]


def usage_wait(t: Turn) -> float:
    """How long the turn waits for its usage counts: what is left of its deadline."""
    return USAGE_WAIT_S if t.until is None else t.until - time.perf_counter()


def _start(store: Memory, ids: Sequence[str]) -> Future[int]:
    """The future of the write that counts ``ids``: a new one, or the store's next one."""
    key = id(store)
    with _lock:
        if key in _running:
            waiting = _running[key]
            if waiting is None:
                waiting = ([], Future())
                _running[key] = waiting
            waiting[0].append(list(ids))
            return waiting[1]
        _running[key] = None
    future: Future[int] = Future()
    try:
        submit(lambda: _write(store, [list(ids)], future))
    except BaseException:
        with _lock:
            _running.pop(key, None)
        raise
    return future


def _layers(turns: list[list[str]]) -> list[list[str]]:
    """One ``mark_used`` per layer, each id in as many layers as turns rendered it (a
    statement counts an id once)."""
    uses = Counter(i for ids in turns for i in dict.fromkeys(ids))  # in the turns' order
    return [[i for i, n in uses.items() if n > k] for k in range(max(uses.values(), default=0))]


def _write(store: Memory, turns: list[list[str]], future: Future[int]) -> None:
    """Write the counts of ``turns``, then those of the turns that came meanwhile, until
    none wait. A failed statement drops the rest of its turns' counts (the store is
    still locked)."""
    key = id(store)
    while True:
        try:
            touched = 0
            for ids in _layers(turns):
                touched += store.mark_used(ids)  # type: ignore[attr-defined]
            future.set_result(touched)
        except Exception as exc:  # noqa: BLE001 - logged, then handed to the turn
            _log.warning(
                "memory_inject: could not update usage counters (%d turns' counts lost): %s",
                len(turns),
                describe_fault(exc),
            )
            future.set_exception(exc)
        with _lock:
            waiting = _running[key]
            if waiting is None:
                del _running[key]
                return
            _running[key] = None
        turns, future = waiting


def _outcome(future: Future[int], n: int) -> str | None:
    if not future.done():
        return (
            f"usage_deferred: the usage counts of {n} rendered memories were still being "
            "written at the turn's deadline (the store is locked or slow); they are "
            "written when it frees, or logged as lost"
        )
    exc = future.exception()
    return None if exc is None else f"usage_failed: {describe_fault(exc)}"


def count_uses(store: Memory, ids: Sequence[str], wait_s: float) -> str | None:
    """Count a use of each of ``ids``, waiting at most ``wait_s``; what the event must say
    (None: counted)."""
    try:
        future = _start(store, ids)
    except Exception as exc:  # noqa: BLE001 - e.g. no thread to run it in
        return f"usage_failed: {describe_fault(exc)}"
    with contextlib.suppress(Exception):
        future.result(timeout=max(0.0, wait_s))
    return _outcome(future, len(set(ids)))


async def acount_uses(store: Memory, ids: Sequence[str], wait_s: float) -> str | None:
    """The async twin of :func:`count_uses`: the event loop runs on while it waits."""
    try:
        future = _start(store, ids)
    except Exception as exc:  # noqa: BLE001 - e.g. no thread to run it in
        return f"usage_failed: {describe_fault(exc)}"
    await wait_on_loop(future, wait_s)
    return _outcome(future, len(set(ids)))
