"""The recall phase of a render: the only I/O, run under the per-turn deadline.

A render's recall is a list of calls (one per session scope, or one per scope
and plan query). They run in order; with a deadline they run in a worker
thread (or task) and whatever has answered when the deadline passes is used,
the rest is abandoned and the event says ``partial``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from functools import partial
from typing import Any

import attrs
from attrs import define, frozen

from memory_inject._deadline import Busy, Waited, arun_in_thread, hand_off, wait_note
from memory_inject._filter_first import both_statuses
from memory_inject._seam import Seam, as_answer, seam_of
from memory_inject.contract import Memory, RecallAnswer, RecallQuery, SupportsInterrupt
from memory_inject.exceptions import RecallInterruptedError, RecallWaitError
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, company_mentions, extract_entities, merge_results

__all__ = ["GRACE_S", "STANDING", "Call", "Recalled", "build_calls", "run_async", "run_sync"]

#: How much longer than the deadline a render listens to a built-in store, which
#: stops its own waits at the deadline and then says what it waited for.
GRACE_S = 0.03
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
    ``{key: reason}`` for the entries a plan cut. ``passed_over`` are the rows
    the answers' restrictions left out (``RecallAnswer.passed_over``), once
    each and none that an answer returned.
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
    passed_over: list[MemoryEntry] = attrs.Factory(list)


@define
class _Results:
    """Batches in call order; filled by whoever runs the calls."""

    batches: list[tuple[Call, Any]]
    errors: list[tuple[Call, BaseException]]
    abandoned: bool = False
    #: Why calls were not started (a hung store, or every recall thread held by one).
    busy: str | None = None
    #: What the turn waited for until its deadline passed (the calls never started).
    wait: str | None = None
    #: What a call is waiting for now (an async turn polls for a recall thread):
    #: ``"store"`` (its share of threads), ``"threads"`` (any), or None.
    waiting: str | None = None
    #: The deadline stopped a call that was running (the store's, or the runner's).
    timed_out: bool = False
    #: The degraded lines of the answers used, in call order.
    degraded: list[str] = attrs.Factory(list)
    #: Rows the answers' restrictions passed over (``RecallAnswer.passed_over``).
    passed_over: list[MemoryEntry] = attrs.Factory(list)
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


class _Entities:
    """A plan's entity query: the store's entity names, read once per render, inside a call.

    ``known_entities`` used to be read while the calls were built, before the
    deadline applied, so a slow or hung store held the turn there. A failure
    is the entity query's error (one per scope); no entity in the turn is an
    empty batch.
    """

    def __init__(self, memory: Memory, query: str, seam: Seam, deadline: float | None) -> None:
        self._memory = memory
        self._query = query
        self._seam = seam
        self._deadline = deadline
        self._ids: list[str] | None = None

    def ids(self) -> list[str]:
        if self._ids is None:
            memory = self._memory
            names = dict(memory.known_entities()) if self._seam.entities else {}  # type: ignore[attr-defined]
            found = extract_entities(self._query, names.keys())
            ids = [names[c] for c in found.companies]
            mentions = company_mentions(self._query, found) if self._seam.mentions else ()
            if mentions:
                # founder-os resolves a company the input names by the rows that name it.
                resolved = memory.entities_mentioned(mentions)  # type: ignore[attr-defined]
                ids.extend(str(v) for v in dict(resolved).values())
            self._ids = ids
        return self._ids

    def query(
        self,
        limit: int,
        scope: str | None,
        statuses: tuple[str, ...] | None,
        profiles: tuple[str | None, ...] | None = None,
    ) -> Any:
        """The rows of every company the input names (``acme`` and ``acme-corp`` alike),
        most confident first, at most ``limit`` in all."""
        ids = list(dict.fromkeys(self.ids()))
        if not ids:
            return []
        batches = []
        degraded: list[str] = []
        over: list[MemoryEntry] = []
        for entity_id in ids:
            q = RecallQuery(
                "",
                limit,
                session_id=scope,
                entity_id=entity_id,
                statuses=statuses,
                deadline=self._deadline,
                profiles=profiles,
            )
            got = self._seam.ask(self._memory, q)()
            if len(ids) == 1:
                return got
            if isinstance(got, RecallAnswer):
                degraded.extend(got.degraded)
                over.extend(got.passed_over)
                got = got.entries
            batches.append(list(got))
        seen: set[str] = set()
        merged = []
        for e in sorted((e for b in batches for e in b), key=lambda e: -_confidence_of(e)):
            if isinstance(e, MemoryEntry) and e.key not in seen:
                seen.add(e.key)
                merged.append(e)
        return RecallAnswer(merged[:limit], degraded=tuple(degraded), passed_over=over)


def _confidence_of(entry: MemoryEntry) -> float:
    value = entry.extra.get("confidence") if isinstance(entry, MemoryEntry) else None
    return float(value) if isinstance(value, int | float) else -1.0


def build_calls(
    memory: Memory,
    query: str,
    limit: int,
    scopes: tuple[str | None, ...],
    plan: RecallPlan | None,
    source: str | None,
    *,
    asynchronous: bool = False,
    deadline: float | None = None,
    statuses: tuple[str, ...] | None = None,
    profiles: tuple[str | None, ...] | None = None,
) -> list[Call]:
    """The store calls of one render, in the order their results take precedence.

    ``asynchronous`` also prepares the awaitable twin of each call (where the
    store has one), for the async runner. ``deadline`` (a ``perf_counter``
    value) travels in each :class:`RecallQuery`. ``statuses`` and ``profiles``
    (a governed turn's) restrict every query, so stores filter first and rank
    then; a plan's own statuses narrow them further.
    """
    seam = seam_of(memory)

    def call(sid: str | None, src: str, q: RecallQuery) -> Call:
        return Call(sid, src, seam.ask(memory, q), seam.aask(memory, q) if asynchronous else None)

    def default(sid: str | None, n: int) -> RecallQuery:
        return RecallQuery(
            query, n, session_id=sid, deadline=deadline, statuses=statuses, profiles=profiles
        )

    if plan is None:
        return [call(sid, "default", default(sid, limit)) for sid in scopes]
    only = both_statuses(plan.statuses, statuses)
    calls: list[Call] = []
    # The entity lookup is a store call too: it runs inside the calls, under the deadline.
    entities = _Entities(memory, query, seam, deadline)
    for sid in scopes:
        for q in plan.queries:
            if q.source in ("semantic", "lexical"):
                rq = RecallQuery(
                    query,
                    q.limit,
                    session_id=sid,
                    mode=q.source,
                    statuses=only,
                    deadline=deadline,
                    profiles=profiles,
                )
                calls.append(call(sid, q.source, rq))
            elif q.source == "default":
                calls.append(call(sid, q.source, default(sid, q.limit)))
            elif q.source == "entity":
                calls.append(
                    Call(sid, q.source, partial(entities.query, q.limit, sid, only, profiles))
                )
            elif q.source == "plugin" and source:
                rq = RecallQuery(
                    "",
                    q.limit,
                    session_id=sid,
                    source=source,
                    statuses=only,
                    deadline=deadline,
                    profiles=profiles,
                )
                calls.append(Call(sid, q.source, seam.ask(memory, rq)))
    return calls


# -- the driver: one generator of store calls, a sync and an async runner ----------


Steps = Generator[Call, Any, None]


def _steps(calls: list[Call], res: _Results) -> Steps:
    """Yield each store call; the runner sends its batch back (or throws its error).

    Everything but making the call lives here, so the sync and async runners
    cannot disagree about what a result means. A call's answer brings its own
    degraded lines (never another turn's).
    """
    for call in calls:
        if res.abandoned:
            return
        notes: tuple[str, ...] = ()
        over: Sequence[MemoryEntry] = ()
        try:
            batch = yield call
            answer = as_answer(batch)
            if answer is not None:
                notes = tuple(str(n) for n in answer.degraded if n)
                over = answer.passed_over
                if notes and call.source == "semantic":
                    # founder-os: an embedder failure drops the semantic query only
                    raise RuntimeError("; ".join(notes))
                batch = answer.entries
        except RecallWaitError as exc:
            # The deadline passed before the call could start: name the wait.
            with res.lock:
                res.wait, res.abandoned = exc.note, True
            return
        except RecallInterruptedError:
            # The store stopped at the deadline: what answered before it is used.
            with res.lock:
                res.abandoned = res.timed_out = True
            return
        except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
            with res.lock:
                res.errors.append((call, exc))
            continue
        with res.lock:
            if not res.abandoned:
                res.batches.append((call, batch))
                res.degraded.extend(notes)
                res.passed_over.extend(e for e in over if isinstance(e, MemoryEntry))


def _lazy(batch: Any) -> bool:
    """True for a batch (or an answer's entries) that is iterated only when read."""
    if isinstance(batch, RecallAnswer):
        batch = batch.entries
    return not isinstance(batch, list | tuple) and hasattr(batch, "__iter__")


def _materialise(batch: Any) -> Any:
    """A lazy batch (a generator, or an answer whose entries are one) made a list here,
    where the deadline applies.

    Anything else is returned as it is (a non-iterable batch is reported by ``_collect``).
    """
    if not _lazy(batch):
        return batch
    if isinstance(batch, RecallAnswer):
        return attrs.evolve(batch, entries=list(batch.entries))
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


def _work(
    memory: Memory, seam: Seam, calls: list[Call], res: _Results, until: float | None
) -> Callable[[], None]:
    """The whole recall of a render as one piece of work, for this thread or a recall thread.

    A store that stops itself (``interrupt_at``) does so at ``until``, so a call
    the deadline abandoned does not keep holding the store.
    """
    if until is None or not seam.interrupts:
        return lambda: _drive(_steps(calls, res))
    stopper: SupportsInterrupt = memory  # type: ignore[assignment]

    def bounded() -> None:
        with stopper.interrupt_at(until):
            _drive(_steps(calls, res))

    return bounded


async def _adrive(steps: Steps, memory: Memory, res: _Results, until: float | None) -> None:
    """Run the steps, awaiting each call's awaitable twin, else a recall thread for that call."""
    try:
        call = next(steps)
        while True:
            try:
                if call.afn is not None:
                    batch = await call.afn()
                    if _lazy(batch):
                        # Iterated on a recall thread, under the deadline, never on the loop.
                        batch = await _athread(memory, partial(_materialise, batch), res, until)
                else:
                    batch = await _athread(memory, partial(_made, call.fn), res, until)
            except (Busy, Waited):
                return
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which record it
                call = steps.throw(exc)
            else:
                call = steps.send(batch)
    except StopIteration:
        return


async def _athread(
    memory: Memory, fn: Callable[[], Any], res: _Results, until: float | None
) -> Any:
    """``fn`` on a recall thread; a turn that could not start one says why (and re-raises)."""

    def waiting(kind: str | None) -> None:
        res.waiting = kind

    try:
        return await arun_in_thread(memory, fn, until, waiting)
    except (Busy, Waited) as exc:
        with res.lock:
            res.abandoned = True
            if isinstance(exc, Busy):
                res.busy = exc.note
            else:
                res.wait = exc.note
        raise
    finally:
        res.waiting = None


def run_sync(
    memory: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
    until: float | None = None,
) -> Recalled:
    """Run the calls in order: inline, or under the deadline (``until``, a
    ``perf_counter`` value, by default now + ``deadline``) inline when the
    store stops itself in place, else on a recall thread."""
    res = _Results([], [])
    t0 = time.perf_counter()
    if deadline is not None and until is None:
        until = t0 + deadline
    seam = seam_of(memory)
    work = _work(memory, seam, calls, res, until)
    in_place = seam.interrupts and bool(getattr(memory, "interrupts_in_place", False))
    if deadline is None or until is None or in_place:
        work()
    else:
        try:
            finished = hand_off(
                memory,
                work,
                max(0.0, until - time.perf_counter()),
                grace=GRACE_S if seam.reports_waits else 0.0,
            )
        except Busy as busy:
            res.busy, res.abandoned = busy.note, True
        except Waited as waited:
            res.wait, res.abandoned = waited.note, True
        else:
            if not finished:
                with res.lock:
                    res.abandoned = res.timed_out = True
        _note_stall(memory, res)
    return _collect(res, time.perf_counter() - t0, plan, deadline)


def _note_stall(memory: Memory, res: _Results) -> None:
    """Add the store's own account of a recall left waiting (``stall_note``), if any."""
    if not (res.timed_out or res.busy is not None or res.wait is not None):
        return
    explain = getattr(memory, "stall_note", None)
    if not callable(explain):
        return
    try:
        note = explain()
    except Exception:  # noqa: BLE001 - a diagnosis never fails the turn
        return
    if isinstance(note, str) and note:
        with res.lock:
            res.degraded.append(note)


async def run_async(
    memory: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
    until: float | None = None,
) -> Recalled:
    """The async twin: awaits the store's async calls, else one recall thread per render."""
    res = _Results([], [])
    t0 = time.perf_counter()
    if deadline is not None and until is None:
        until = t0 + deadline
    seam = seam_of(memory)
    if until is not None and _inline(memory, seam):
        # A store that stops itself at the deadline and has been answering in a
        # few milliseconds: its recall runs here, with no thread hop.
        _work(memory, seam, calls, res, until)()
        _note_inline(memory, time.perf_counter() - t0)
        return _collect(res, time.perf_counter() - t0, plan, deadline)
    if seam.interrupts or all(c.afn is None for c in calls):
        # One thread hop for the whole recall, not one per call.
        job: Awaitable[Any] = _athread(memory, _work(memory, seam, calls, res, until), res, until)
    else:
        job = _adrive(_steps(calls, res), memory, res, until)
    task = asyncio.ensure_future(job)
    timeout = None
    if until is not None:
        timeout = max(0.0, until - time.perf_counter()) + (GRACE_S if seam.reports_waits else 0.0)
    try:
        # Not wait_for: it waits for the cancelled task to end, and an arecall that
        # swallows CancelledError would hold the turn past the deadline.
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:
        task.cancel()
        raise
    if task in done:
        with contextlib.suppress(Busy, Waited):  # already recorded on ``res``
            task.result()
    else:
        task.cancel()
        task.add_done_callback(_forget)
        with res.lock:
            if res.waiting is not None:
                res.wait = wait_note(res.waiting, time.perf_counter() - t0, memory)
            elif res.wait is None and res.busy is None:
                res.timed_out = True
            res.abandoned = True
    _note_stall(memory, res)
    return _collect(res, time.perf_counter() - t0, plan, deadline)


#: An async recall on the event loop that takes longer than this is slow.
INLINE_MAX_S = 0.025
#: This many slow recalls in a row move the store's async recalls to threads ...
INLINE_SLOW_IN_A_ROW = 2
#: ... for this long.
INLINE_BACKOFF_S = 30.0
#: ``id(store) -> [slow recalls in a row, perf_counter before which threads are used]``.
_inline_state: dict[int, list[float]] = {}


def _inline(memory: Memory, seam: Seam) -> bool:
    """True when an async render may make its recall on the event loop itself.

    Only for a store whose calls stop themselves in place at the deadline
    (keyword-only SQLite), and only while its recalls are fast: a thread hop
    costs more than such a recall, and the loop is then held for about as long
    as the hop would take. :data:`INLINE_SLOW_IN_A_ROW` recalls in a row that
    held the loop longer than :data:`INLINE_MAX_S` (a slow disk, a lock; not a
    single hiccup of a busy machine) send the store's async recalls to recall
    threads for :data:`INLINE_BACKOFF_S`.
    """
    if not (seam.interrupts and getattr(memory, "interrupts_in_place", False) is True):
        return False
    state = _inline_state.get(id(memory))
    return state is None or time.perf_counter() >= state[1]


def _note_inline(memory: Memory, took: float) -> None:
    key = id(memory)
    state = _inline_state.get(key)
    if took <= INLINE_MAX_S:
        if state is not None:
            state[0] = 0
        return
    if state is None:
        if len(_inline_state) > 4096:
            now = time.perf_counter()
            for old in [k for k, v in _inline_state.items() if v[0] == 0 and v[1] < now]:
                del _inline_state[old]
        state = _inline_state[key] = [0, 0.0]
    state[0] += 1
    if state[0] >= INLINE_SLOW_IN_A_ROW:
        state[0] = 0
        state[1] = time.perf_counter() + INLINE_BACKOFF_S


def _forget(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned recall's outcome, so asyncio does not log it as never read."""
    if not task.cancelled():
        task.exception()


def _collect(
    res: _Results,
    duration: float,
    plan: RecallPlan | None,
    deadline: float | None,
) -> Recalled:
    with res.lock:
        batches = list(res.batches)
        failures = list(res.errors)
        notes = list(dict.fromkeys(res.degraded))
        passed_over = list(res.passed_over)
        partial = res.abandoned
        if res.busy is not None:
            notes.append(res.busy)
        if res.wait is not None:
            notes.append(res.wait)
        if res.timed_out:
            notes.append(
                f"deadline: recall abandoned after {deadline or 0.0:.3f}s, partial results used"
            )
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
    standing_ok = False
    for _call, batch in batches:
        if _call.source == STANDING:
            standing.extend(e for e in batch if isinstance(e, MemoryEntry))
            raw += len(batch)
            standing_ok = True
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
    degraded = notes
    if standing_ok and not any(c.source != STANDING for c, _ in (*batches, *failures)):
        # A turn with only the standing context (a prompt without content words): the
        # store answered all that was asked of it.
        any_ok = True
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
        _passed_over(passed_over, entries),
    )


def _passed_over(rows: Sequence[MemoryEntry], entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """Each row passed over once, and none that an answer returned."""
    seen = {e.key for e in entries}
    out = []
    for e in rows:
        if isinstance(e.key, str) and e.key not in seen:
            seen.add(e.key)
            out.append(e)
    return out
