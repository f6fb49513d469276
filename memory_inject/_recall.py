"""The recall phase of a render: the only I/O, run under the per-turn deadline.

A render's recall is a list of calls (one per session scope, or one per scope
and plan query). They run in order; with a deadline they run in a worker
thread (or task) and whatever has answered when the deadline passes is used,
the rest is abandoned and the event says ``partial``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from functools import partial
from typing import Any

import attrs
from attrs import define, frozen

from memory_inject._deadline import Busy, arun_in_thread, hand_off
from memory_inject.contract import (
    Memory,
    SupportsAsyncRecall,
    SupportsEntities,
    SupportsFilteredRecall,
    SupportsInterrupt,
    SupportsRecallInfo,
    supports,
)
from memory_inject.exceptions import RecallInterruptedError
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, extract_entities, merge_results

__all__ = ["STANDING", "Call", "Recalled", "build_calls", "run_async", "run_sync"]

#: The source of the standing-context call (``memory_inject.standing``): its
#: entries follow the query's, and a key the query returned keeps its entry.
STANDING = "standing"


@frozen
class Call:
    """One store call: which scope and plan source it serves, and how to make it."""

    scope: str | None
    source: str
    fn: Callable[[], Any]
    afn: Callable[[], Awaitable[Any]] | None = None


@frozen
class Recalled:
    """What a render's recall produced, for the pipeline and the recall event.

    ``entries`` are the valid entries, de-duplicated by key (the first scope
    wins) or merged by the plan; ``raw_count`` counts every item the store
    returned, valid or not. ``any_ok`` is true when at least one call returned
    a batch. ``errors`` has a line per failed call, ``invalid`` a
    ``{placeholder: reason}`` per item that was not a ``MemoryEntry``.
    ``duration`` is in seconds. ``degraded`` holds the store's fallback reason
    and any deadline or busy-store note; ``partial`` means calls were abandoned
    at the deadline or skipped because the store was busy. ``plan_dropped`` is
    ``{key: reason}`` for the entries a plan cut.
    """

    entries: list[MemoryEntry]
    raw_count: int
    any_ok: bool
    errors: list[str]
    invalid: dict[str, str]
    duration: float
    degraded: tuple[str, ...] = ()
    partial: bool = False
    plan_dropped: dict[str, str] = attrs.Factory(dict)


@define
class _Results:
    """Batches in call order; filled by whoever runs the calls."""

    batches: list[tuple[Call, Any]]
    errors: list[tuple[Call, BaseException]]
    abandoned: bool = False
    #: Why calls were not started (a store or the process out of recall threads).
    busy: str | None = None
    lock: threading.Lock = attrs.Factory(threading.Lock)


def describe(exc: BaseException) -> str:
    """``"reason: message"`` for an exception, as errors and events report it.

    ``reason`` is the exception's ``reason`` attribute (a :class:`StorageError`'s)
    or else its type name; an empty message is left out.
    """
    try:
        reason = getattr(exc, "reason", None)
    except Exception:  # noqa: BLE001 - a hostile exception must not fail the turn
        reason = None
    head = reason if isinstance(reason, str) else type(exc).__name__
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        text = "<the error's message could not be read>"
    return f"{head}: {text}" if text else head


def _degraded_flag(memory: Memory) -> str | None:
    try:
        if not supports(memory, SupportsRecallInfo):
            return None
        info = memory.last_recall_info
        flag = info.get("degraded") if isinstance(info, dict) else getattr(info, "degraded", None)
        return str(flag) if flag else None
    except Exception as exc:  # noqa: BLE001 - a store's report must not fail the turn
        return f"recall_info_failed: {describe(exc)}"


def _filtered(
    memory: Memory,
    limit: int,
    scope: str | None,
    field: str,
    value: str,
    statuses: tuple[str, ...] | None = None,
) -> Sequence[MemoryEntry]:
    """Rows whose ``extra[field]`` holds ``value`` (and of ``statuses``), best confidence first."""
    if supports(memory, SupportsFilteredRecall):
        kw: dict[str, Any] = {field: value}
        if statuses is not None:
            kw["statuses"] = statuses
        return memory.recall_where(None, limit, session_id=scope, **kw)
    rows = memory.recall("*", max(limit * 20, 200), session_id=scope)
    allowed = None if statuses is None else frozenset(statuses)
    hits = []
    for e in rows:
        have = e.extra.get("entity_ids" if field == "entity_id" else field) if e.extra else None
        if allowed is not None and (e.extra or {}).get("status", "active") not in allowed:
            continue
        if have == value or (isinstance(have, tuple | list) and value in have):
            hits.append(e)
    hits.sort(key=lambda e: -(e.extra.get("confidence") or 0.0))
    return hits[:limit]


class _Entities:
    """A plan's entity query: the store's entity names, read once per render, inside a call.

    ``known_entities`` used to be read while the calls were built, before the
    deadline applied, so a slow or hung store held the turn there. A failure
    is the entity query's error (one per scope); no entity in the turn is an
    empty batch.
    """

    def __init__(self, memory: Memory, query: str) -> None:
        self._memory = memory
        self._query = query
        self._ids: list[str] | None = None

    def ids(self) -> list[str]:
        if self._ids is None:
            memory = self._memory
            names = dict(memory.known_entities()) if supports(memory, SupportsEntities) else {}
            found = extract_entities(self._query, names.keys())
            self._ids = [names[c] for c in found.companies]
        return self._ids

    def query(
        self, limit: int, scope: str | None, statuses: tuple[str, ...] | None
    ) -> Sequence[MemoryEntry]:
        ids = self.ids()
        if not ids:
            return []
        return _filtered(self._memory, limit, scope, "entity_id", ids[0], statuses)


def build_calls(
    memory: Memory,
    query: str,
    limit: int,
    scopes: tuple[str | None, ...],
    plan: RecallPlan | None,
    source: str | None,
    *,
    asynchronous: bool = False,
) -> list[Call]:
    """The store calls of one render, in the order their results take precedence.

    ``asynchronous`` also prepares the ``arecall`` twin of each default call
    (where the store has one), for the async runner.
    """
    arecall = memory.arecall if asynchronous and supports(memory, SupportsAsyncRecall) else None
    if plan is None:
        return [
            Call(
                sid,
                "default",
                partial(memory.recall, query, limit, session_id=sid, since=None, until=None),
                None
                if arecall is None
                else partial(arecall, query, limit, session_id=sid, since=None, until=None),
            )
            for sid in scopes
        ]
    calls: list[Call] = []
    # The entity lookup is a store call too: it runs inside the calls, under the deadline.
    entities = _Entities(memory, query)
    where = memory.recall_where if supports(memory, SupportsFilteredRecall) else None
    for sid in scopes:
        for q in plan.queries:
            fn: Callable[[], Any]
            if q.source in ("semantic", "lexical") and where is not None:
                only: dict[str, Any] = {} if plan.statuses is None else {"statuses": plan.statuses}
                fn = partial(where, query, q.limit, session_id=sid, mode=q.source, **only)
            elif q.source in ("default", "semantic", "lexical"):
                fn = partial(memory.recall, query, q.limit, session_id=sid)
            elif q.source == "entity":
                fn = partial(entities.query, q.limit, sid, plan.statuses)
            elif q.source == "plugin" and source:
                fn = partial(_filtered, memory, q.limit, sid, "source", source, plan.statuses)
            else:
                continue
            calls.append(Call(sid, q.source, fn))
    return calls


# -- the driver: one generator of store calls, a sync and an async runner ----------


Steps = Generator[Call, Any, None]


def _steps(calls: list[Call], res: _Results, memory: Memory) -> Steps:
    """Yield each store call; the runner sends its batch back (or throws its error).

    Everything but making the call lives here, so the sync and async runners
    cannot disagree about what a result means.
    """
    for call in calls:
        if res.abandoned:
            return
        try:
            batch = yield call
            flag = _degraded_flag(memory) if call.source == "semantic" else None
            if flag:  # founder-os: an embedder failure drops the semantic query only
                raise RuntimeError(flag)
        except RecallInterruptedError:
            # The store stopped at the deadline: what answered before it is used.
            with res.lock:
                res.abandoned = True
            return
        except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
            with res.lock:
                res.errors.append((call, exc))
            continue
        with res.lock:
            if not res.abandoned:
                res.batches.append((call, batch))


def _materialise(batch: Any) -> Any:
    """A lazy batch (a generator) as a list, iterated here, where the deadline applies.

    Anything else is returned as it is (a non-iterable batch is reported by ``_collect``).
    """
    if isinstance(batch, list | tuple) or not hasattr(batch, "__iter__"):
        return batch
    return list(batch)


def _made(fn: Callable[[], Any]) -> Any:
    return _materialise(fn())


def _drive(steps: Steps) -> None:
    """Run the steps, making each store call inline."""
    try:
        call = next(steps)
        while True:
            try:
                batch = _materialise(call.fn())
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which record it
                call = steps.throw(exc)
            else:
                call = steps.send(batch)
    except StopIteration:
        return


def _call_until(stopper: SupportsInterrupt, until: float, fn: Callable[[], Any]) -> Any:
    with stopper.interrupt_at(until):
        return fn()


async def _adrive(
    steps: Steps,
    memory: Memory,
    res: _Results,
    stopper: SupportsInterrupt | None = None,
    until: float = 0.0,
) -> None:
    """Run the steps, awaiting ``arecall`` where the store has it, else a recall thread.

    With a ``stopper`` (a store that stops itself at ``until``) each call runs
    in a recall thread under :meth:`~SupportsInterrupt.interrupt_at`, so a call
    the deadline cancels stops too instead of holding the store. Recall
    threads are the sync path's, under its per-store and process caps.
    """
    try:
        call = next(steps)
        while True:
            try:
                if stopper is not None:
                    fn: Callable[[], Any] = partial(_call_until, stopper, until, call.fn)
                    batch = await arun_in_thread(memory, partial(_made, fn))
                elif call.afn is not None:
                    batch = await call.afn()
                else:
                    batch = await arun_in_thread(memory, partial(_made, call.fn))
            except Busy as busy:
                with res.lock:
                    res.busy, res.abandoned = busy.note, True
                return
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which record it
                call = steps.throw(exc)
            else:
                call = steps.send(batch)
    except StopIteration:
        return


def run_sync(
    memory: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
) -> Recalled:
    """Run the calls in order, inline or under the deadline in a worker thread."""
    res = _Results([], [])
    t0 = time.perf_counter()
    partial = False
    stopper = memory if deadline is not None and supports(memory, SupportsInterrupt) else None
    if deadline is None:
        _drive(_steps(calls, res, memory))
    elif stopper is not None:
        # The store stops itself at the deadline: in place when that covers
        # the whole call, else in the worker (so an abandoned call never
        # keeps holding the store).
        until = t0 + deadline

        def bounded() -> None:
            with stopper.interrupt_at(until):
                _drive(_steps(calls, res, memory))

        if stopper.interrupts_in_place:
            bounded()
            partial = res.abandoned
        else:
            partial = _handed(memory, bounded, deadline, res)
    else:
        partial = _handed(memory, lambda: _drive(_steps(calls, res, memory)), deadline, res)
    return _with_busy(_collect(res, time.perf_counter() - t0, memory, partial, plan, deadline), res)


def _handed(memory: Memory, work: Callable[[], None], deadline: float, res: _Results) -> bool:
    """Run ``work`` on a recall thread under ``deadline``; True when the result is partial."""
    try:
        finished = hand_off(memory, work, deadline)
    except Busy as busy:
        res.busy = busy.note
        return True
    return _abandon(res) if not finished else res.abandoned


def _with_busy(out: Recalled, res: _Results) -> Recalled:
    if res.busy is None:
        return out
    return attrs.evolve(out, partial=True, degraded=(*out.degraded, res.busy))


def _abandon(res: _Results) -> bool:
    """Mark the results abandoned at the deadline (later batches are dropped); True."""
    with res.lock:
        res.abandoned = True
    return True


async def run_async(
    memory: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
) -> Recalled:
    """The async twin: awaits ``arecall`` where the store has it, else a thread."""
    res = _Results([], [])
    t0 = time.perf_counter()

    partial = False
    stopper = memory if deadline is not None and supports(memory, SupportsInterrupt) else None
    until = t0 + (deadline or 0.0)
    task = asyncio.ensure_future(_adrive(_steps(calls, res, memory), memory, res, stopper, until))
    try:
        # Not wait_for: it waits for the cancelled task to end, and an arecall that
        # swallows CancelledError would hold the turn past the deadline.
        done, _ = await asyncio.wait({task}, timeout=deadline)
    except BaseException:
        task.cancel()
        raise
    if task in done:
        task.result()
    else:
        task.cancel()
        task.add_done_callback(_forget)
        partial = _abandon(res)
    partial = partial or res.abandoned
    out = _collect(res, time.perf_counter() - t0, memory, partial, plan, deadline)
    return _with_busy(out, res)


def _forget(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned recall's outcome, so asyncio does not log it as never read."""
    if not task.cancelled():
        task.exception()


def _collect(
    res: _Results,
    duration: float,
    memory: Memory,
    partial: bool,
    plan: RecallPlan | None,
    deadline: float | None,
) -> Recalled:
    with res.lock:
        batches = list(res.batches)
        failures = list(res.errors)
    errors = [
        f"scope {c.scope!r} ({c.source}): {describe(e)}"
        if plan
        else f"scope {c.scope!r}: {describe(e)}"
        for c, e in failures
    ]
    invalid: dict[str, str] = {}
    valid_batches: list[list[MemoryEntry]] = []
    raw = 0
    any_ok = False
    standing: list[MemoryEntry] = []
    for _call, batch in batches:
        if _call.source == STANDING:
            standing.extend(e for e in batch if isinstance(e, MemoryEntry))
            raw += len(batch)
            continue
        try:
            items = list(batch)  # a non-iterable batch counts as a failed call
        except Exception as exc:  # noqa: BLE001
            errors.append(f"scope {_call.scope!r}: {describe(exc)}")
            continue
        any_ok = True
        good = []
        for item in items:
            raw += 1
            if not isinstance(item, MemoryEntry):
                invalid[f"<invalid #{len(invalid)}>"] = f"invalid_entry:{type(item).__name__}"
            elif not isinstance(item.key, str):
                # Keys are hashed and compared by every later stage (a session id
                # that is not a string is dropped by name by ``session_scope``).
                invalid[f"<invalid #{len(invalid)}>"] = "invalid_entry:key"
            else:
                good.append(item)
        valid_batches.append(good)
    degraded: list[str] = []
    flag = _degraded_flag(memory)
    if flag:
        degraded.append(flag)
    if partial:
        degraded.append(f"deadline: recall abandoned after {deadline:.3f}s, partial results used")
    plan_dropped: dict[str, str] = {}
    if plan is None:
        seen: set[str] = set()
        entries = []
        for batch in valid_batches:
            for e in batch:
                if e.key not in seen:  # first scope wins
                    seen.add(e.key)
                    entries.append(e)
    else:
        entries, plan_dropped = merge_results(valid_batches, plan)
    if standing:
        # A standing entry is shown whatever the query scored it: it replaces
        # recall's copy (keeping recall's place), so no relevance floor drops it.
        by_key = {e.key: e for e in standing}
        have = {e.key for e in entries}
        entries = [by_key.get(e.key, e) for e in entries]
        entries.extend(e for e in standing if e.key not in have)
    return Recalled(
        entries,
        raw,
        any_ok,
        errors,
        invalid,
        duration,
        tuple(degraded),
        partial,
        plan_dropped,
    )
