"""The recall phase of a render: the only I/O, run under the per-turn deadline.

A render's recall is a list of calls (one per session scope, or one per scope
and plan query). They run in order; with a deadline they run in a worker
thread (or task) and whatever has answered when the deadline passes is used,
the rest is abandoned and the event says ``partial``.

Owns the driver only: one generator of store calls (:func:`_steps`), the sync
and async runners, and when an async turn may recall on the event loop. The
calls are built by ``memory_inject._calls``; their results become a
:class:`~memory_inject._recalled.Recalled` in ``memory_inject._recalled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from functools import partial
from typing import Any

import attrs

from memory_inject._calls import Call
from memory_inject._deadline import Busy, Waited, arun_in_thread, hand_off, wait_note
from memory_inject._recalled import Recalled, Results, collect
from memory_inject._render_ears import _WAIT_EAR
from memory_inject._seam import Seam, as_answer, seam_of
from memory_inject.contract import Memory, RecallAnswer, SupportsInterrupt
from memory_inject.exceptions import RecallInterruptedError, RecallWaitError
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan

__all__ = ["GRACE_S", "run_async", "run_sync"]

#: How much longer than the deadline a render listens to a built-in store, which
#: stops its own waits at the deadline and then says what it waited for.
GRACE_S = 0.03

# -- the driver: one generator of store calls, a sync and an async runner ----------


Steps = Generator[Call, Any, None]


def _steps(calls: list[Call], res: Results) -> Steps:
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
        similarity: float | None = None
        try:
            batch = yield call
            answer = as_answer(batch)
            if answer is not None:
                notes = tuple(str(n) for n in answer.degraded if n)
                over = answer.passed_over
                if notes and call.source == "semantic":
                    # founder-os: an embedder failure drops the semantic query only
                    raise RuntimeError("; ".join(notes))
                similarity, bad = _told(answer.similarity)
                notes += bad
                batch = answer.entries
        except RecallWaitError as exc:
            # The deadline passed before the call could start: name the wait (unless the
            # render gave up on the call first and said why).
            with res.lock:
                if not res.abandoned:
                    res.wait, res.abandoned = exc.note, True
            return
        except RecallInterruptedError:
            # The store stopped at the deadline: what answered before it is used.
            with res.lock:
                if not res.abandoned:
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
                if similarity is not None:
                    was = res.similarity
                    res.similarity = similarity if was is None else max(was, similarity)


def _told(value: object) -> tuple[float | None, tuple[str, ...]]:
    """A store's ``RecallAnswer.similarity`` clamped to 0..1, or None and why it is unusable."""
    if value is None:
        return None, ()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, (f"invalid_similarity: the store answered {value!r:.60}",)
    return min(1.0, max(0.0, float(value))), ()


def _lazy(batch: Any) -> bool:
    """True for a batch (or an answer's entries) that is iterated only when read."""
    if isinstance(batch, RecallAnswer):
        batch = batch.entries
    return not isinstance(batch, list | tuple) and hasattr(batch, "__iter__")


def _materialise(batch: Any) -> Any:
    """A lazy batch (a generator, or an answer whose entries are one) made a list here,
    where the deadline applies.

    Anything else is returned as it is (a non-iterable batch is reported by ``collect``).
    """
    if not _lazy(batch):
        return batch
    if isinstance(batch, RecallAnswer):
        return attrs.evolve(batch, entries=list(batch.entries))
    return list(batch)


class StoreRaised(Exception):
    """A sync store call raised a ``BaseException`` that is not an ``Exception``
    (``GeneratorExit``, ``CancelledError`` from a sync wrapper around async code): the
    store's failure, recorded like any other (its name and message on the event), where it
    had escaped the recall thread unnamed or the render itself. ``KeyboardInterrupt`` and
    ``SystemExit`` still propagate."""

    def __init__(self, exc: BaseException) -> None:
        """Name ``exc`` (its message too, when it can be read)."""
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - its message may be as broken as the store
            message = ""
        name = type(exc).__name__
        super().__init__(f"{name}: {message}" if message else name)


def _made(fn: Callable[[], Any]) -> Any:
    try:
        return _materialise(fn())
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:
        raise
    except BaseException as exc:
        raise StoreRaised(exc) from exc


def _drive(steps: Steps) -> None:
    """Run the steps, making each store call inline."""
    try:
        call = next(steps)
        while True:
            try:
                batch = _made(call.fn)
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which record it
                call = steps.throw(exc)
            else:
                call = steps.send(batch)
    except StopIteration:
        return


def _work(
    store: Memory, seam: Seam, calls: list[Call], res: Results, until: float | None
) -> Callable[[], None]:
    """The whole recall of a render as one piece of work, for this thread or a recall thread.

    A store that stops itself (``interrupt_at``) does so at ``until``, so a call
    the deadline abandoned does not keep holding the store.
    """
    if until is None or not seam.interrupts:
        return lambda: _drive(_steps(calls, res))
    stopper: SupportsInterrupt = store  # type: ignore[assignment]

    def bounded() -> None:
        with stopper.interrupt_at(until):
            _drive(_steps(calls, res))

    return bounded


async def _adrive(steps: Steps, store: Memory, res: Results, until: float | None) -> None:
    """Run the steps, awaiting each call's awaitable twin, else a recall thread for that call."""
    try:
        call = next(steps)
        while True:
            try:
                if call.afn is not None:
                    batch = await call.afn()
                    if _lazy(batch):
                        # Iterated on a recall thread, under the deadline, never on the loop.
                        batch = await _athread(store, partial(_materialise, batch), res, until)
                else:
                    batch = await _athread(store, partial(_made, call.fn), res, until)
            except (Busy, Waited):
                return
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which record it
                call = steps.throw(exc)
            else:
                call = steps.send(batch)
    except StopIteration:
        return


async def _athread(store: Memory, fn: Callable[[], Any], res: Results, until: float | None) -> Any:
    """``fn`` on a recall thread; a turn that could not start one says why (and re-raises)."""

    def waiting(kind: str | None) -> None:
        res.waiting = kind

    try:
        return await arun_in_thread(store, res.heard(fn), until, waiting)
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
    store: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
    until: float | None = None,
) -> Recalled:
    """Run the calls in order: inline, or under the deadline (``until``, a
    ``perf_counter`` value, by default now + ``deadline``) inline when the
    store stops itself in place, else on a recall thread."""
    res = Results([], [])
    t0 = time.perf_counter()
    if deadline is not None and until is None:
        until = t0 + deadline
    seam = seam_of(store)
    work = _work(store, seam, calls, res, until)
    in_place = seam.interrupts and bool(getattr(store, "interrupts_in_place", False))
    if deadline is None or until is None or in_place:
        work()
    else:
        try:
            finished = hand_off(
                store,
                res.heard(work),
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
                    res.give_up(time.perf_counter() - t0)
        _note_stall(store, res)
    return collect(res, time.perf_counter() - t0, plan, deadline)


def _note_stall(store: Memory, res: Results) -> None:
    """Add the store's own account of a recall left waiting (``stall_note``), if any."""
    if not (res.timed_out or res.busy is not None or res.wait is not None):
        return
    explain = getattr(store, "stall_note", None)
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
    store: Memory,
    calls: list[Call],
    deadline: float | None,
    plan: RecallPlan | None,
    until: float | None = None,
) -> Recalled:
    """The async twin: awaits the store's async calls, else one recall thread per render."""
    res = Results([], [])
    t0 = time.perf_counter()
    if deadline is not None and until is None:
        until = t0 + deadline
    seam = seam_of(store)
    if until is not None and _inline(store, seam):
        # A store that stops itself at the deadline and has been answering in a
        # few milliseconds: its recall runs here, with no thread hop.
        _work(store, seam, calls, res, until)()
        _note_inline(store, time.perf_counter() - t0)
        return collect(res, time.perf_counter() - t0, plan, deadline)
    if seam.interrupts or all(c.afn is None for c in calls):
        # One thread hop for the whole recall, not one per call.
        job: Awaitable[Any] = _athread(store, _work(store, seam, calls, res, until), res, until)
    else:
        job = _adrive(_steps(calls, res), store, res, until)
    # The task copies the context: a store call in it that waits for a connection tells
    # ``res`` (``contract.report_wait``), so a deadline passing then is named as that wait.
    token = _WAIT_EAR.set(res.hear)
    try:
        task = asyncio.ensure_future(job)
    finally:
        _WAIT_EAR.reset(token)
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
            waited = time.perf_counter() - t0
            res.give_up(
                waited, None if res.waiting is None else wait_note(res.waiting, waited, store)
            )
    _note_stall(store, res)
    return collect(res, time.perf_counter() - t0, plan, deadline)


#: An async recall on the event loop that takes longer than this is slow.
INLINE_MAX_S = 0.025
#: This many slow recalls in a row move the store's async recalls to threads ...
INLINE_SLOW_IN_A_ROW = 2
#: ... for this long.
INLINE_BACKOFF_S = 30.0
#: ``id(store) -> [slow recalls in a row, perf_counter before which threads are used]``.
_inline_state: dict[int, list[float]] = {}


def _inline(store: Memory, seam: Seam) -> bool:
    """True when an async render may make its recall on the event loop itself.

    Only for a store whose calls stop themselves in place at the deadline
    (keyword-only SQLite), and only while its recalls are fast: a thread hop
    costs more than such a recall, and the loop is then held for about as long
    as the hop would take. :data:`INLINE_SLOW_IN_A_ROW` recalls in a row that
    held the loop longer than :data:`INLINE_MAX_S` (a slow disk, a lock; not a
    single hiccup of a busy machine) send the store's async recalls to recall
    threads for :data:`INLINE_BACKOFF_S`.
    """
    if not (seam.interrupts and getattr(store, "interrupts_in_place", False) is True):
        return False
    state = _inline_state.get(id(store))
    return state is None or time.perf_counter() >= state[1]


def _note_inline(store: Memory, took: float) -> None:
    key = id(store)
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
