"""What a render's recall produced: the :class:`Recalled` value and how the batches become it.

Owns :class:`Results` (the batches, errors and notes the driver fills while
the calls run), :func:`collect` (checks each batch, merges them by the plan or
first-scope-wins, places the standing context's entries) and :func:`describe`,
the one wording of a failed call. The driver that fills the results is
``memory_inject._recall``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC
from typing import Any, TypeVar

import attrs
from attrs import define, frozen

from memory_inject._calls import STANDING, Call
from memory_inject._render_ears import _WAIT_EAR
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, merge_results
from memory_inject.stages import UNRELATED_PROMPT, StageTrace
from memory_inject.stages.filters import out_of_scope

__all__ = ["Recalled", "Results", "collect", "describe"]

T = TypeVar("T")


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
    each and none that an answer returned. ``similarity`` is the greatest
    ``RecallAnswer.similarity`` of the answers used (None: none told one).
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
    similarity: float | None = None


@define
class Results:
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
    #: The event's line for what an async store call is waiting for now, given how long
    #: the turn waited (``contract.report_wait``: a pooled connection), or None.
    wait_note: Callable[[float], str] | None = None
    #: The deadline stopped a call that was running (the store's, or the runner's).
    timed_out: bool = False
    #: The degraded lines of the answers used, in call order.
    degraded: list[str] = attrs.Factory(list)
    #: Rows the answers' restrictions passed over (``RecallAnswer.passed_over``).
    passed_over: list[MemoryEntry] = attrs.Factory(list)
    #: The greatest similarity an answer used told (``RecallAnswer.similarity``).
    similarity: float | None = None
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def give_up(self, waited: float, named: str | None = None) -> None:
        """The render stopped waiting for its calls after ``waited`` s (the lock is held).
        Why: what it waited for itself (``named``: a recall thread), else what a call said
        it waits for (:meth:`hear`), else the deadline; a call's own account, come first,
        stands (a late one is ignored: the calls see :attr:`abandoned`)."""
        self.abandoned = True
        if self.wait is not None or self.busy is not None or self.timed_out:
            return
        if named is not None:
            self.wait = named
        elif self.wait_note is not None:
            self.wait = self.wait_note(waited)
        else:
            self.timed_out = True

    def hear(self, note: Callable[[float], str] | None) -> None:
        """What a store call waits for now (``contract.report_wait``), or None."""
        self.wait_note = note

    def heard(self, work: Callable[[], T]) -> Callable[[], T]:
        """``work`` for a recall thread, whose store calls tell :meth:`hear` what they wait
        for, as an async render's task does."""

        def run() -> T:
            token = _WAIT_EAR.set(self.hear)
            try:
                return work()
            finally:
                _WAIT_EAR.reset(token)

        return run


def _bad_number(entry: MemoryEntry) -> str | None:
    """``"importance"`` when ``entry``'s is neither None nor a finite number (a custom
    store's ``nan`` lost the whole block before: ``stage_failed``); ``MemoryEntry``
    already refuses such a score. The caller tries a finite float first (two comparisons)."""
    value = entry.importance
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "importance"
    return None


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


def _off_utc(entry: MemoryEntry) -> bool:
    """True when the entry's time has no UTC equivalent (an aware time of year 1 or 9999)."""
    ts = entry.timestamp
    if ts is None or ts.tzinfo is None or 1 < ts.year < 9999:
        return False
    try:
        ts.astimezone(UTC)
    except OverflowError:
        return True
    return False


def _in_scope(
    batch: list[MemoryEntry], own: set[str], dropped: dict[str, str]
) -> list[MemoryEntry]:
    """``batch`` without what :func:`~memory_inject.stages.filters.session_scope` drops."""
    kept = []
    for e in batch:
        why = out_of_scope(e, own, True, any_profile=True)  # the stage knows the profile
        if why is None:
            kept.append(e)
        else:
            dropped.setdefault(e.key, why)
    return kept


def collect(
    res: Results,
    duration: float,
    plan: RecallPlan | None,
    deadline: float | None,
) -> Recalled:
    """The :class:`Recalled` of a recall's results: batches checked, merged (by the
    plan, else first scope wins), the standing entries placed, the notes joined."""
    with res.lock:
        batches = list(res.batches)
        failures = list(res.errors)
        notes = list(dict.fromkeys(res.degraded))
        passed_over = list(res.passed_over)
        similarity = res.similarity
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
    in_time: list[int] = []  # which of them a plan's ``time`` query answered
    raw = 0
    any_ok = False
    standing: list[MemoryEntry] = []
    standing_ok = False
    for _call, batch in batches:
        if _call.source == STANDING:
            standing.extend(e for e in batch if isinstance(e, MemoryEntry) and not _off_utc(e))
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
            elif not isinstance(item.content, str):
                # Every later stage reads the text (a NULL column failed the whole render).
                invalid[item.key] = "invalid_entry:content"
            elif (
                (imp := item.importance) is not None
                and (imp.__class__ is not float or not -math.inf < imp < math.inf)
                and (bad := _bad_number(item)) is not None
            ):
                # A NaN importance failed the rerank or the floor for every entry.
                invalid[item.key] = f"invalid_entry:{bad}"
            elif _off_utc(item):
                # 9999-12-31T23:59-12:00 has no UTC day: the sectioned block lost every row.
                invalid[item.key] = "invalid_entry:timestamp"
            else:
                good.append(item)
        if _call.source == "time":
            in_time.append(len(valid_batches))
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
        # A plan's cap is shared by every scope's rows: in a mixed turn ([None, s]) the
        # unscoped recall's other sessions' rows took its slots, and the turn's own rows
        # were dropped as plan:cap. The scope rule runs first here (session_scope, later,
        # finds nothing more to drop).
        scopes = {c.scope for c, _ in (*batches, *failures) if c.source != STANDING}
        own = {s for s in scopes if isinstance(s, str)}
        out_of: dict[str, str] = {}
        if own and None in scopes:
            valid_batches = [_in_scope(b, own, out_of) for b in valid_batches]
        entries, plan_dropped = merge_results(valid_batches, plan, in_time)
        plan_dropped = {**out_of, **plan_dropped}
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
        similarity,
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


_BELOW_RELEVANCE = "below_relevance"
_OTHER_OWNER = "other_owner"
_OWNER = frozenset({_OTHER_OWNER, "owner_only"})
_BAD_NUMBERS = frozenset({"invalid_entry:score", "invalid_entry:importance"})
_BAD_TEXTS = frozenset({"invalid_entry:key", "invalid_entry:content"})


def invalid_notes(invalid: Mapping[str, str]) -> list[str]:
    """The event's ``invalid_entries`` parts for what a store returned that could not be
    used: non-entries, entries whose key or content is not a string, entries whose time
    has no UTC equivalent, and entries whose score or importance is not a finite number."""
    numbers = sum(1 for r in invalid.values() if r in _BAD_NUMBERS)
    texts = sum(1 for r in invalid.values() if r in _BAD_TEXTS)
    times = sum(1 for r in invalid.values() if r == "invalid_entry:timestamp")
    notes = []
    if len(invalid) > numbers + texts + times:
        others = len(invalid) - numbers - texts - times
        notes.append(f"invalid_entries: store returned {others} non-entries")
    if times:
        notes.append(f"invalid_entries: store returned {times} entries whose time has no UTC day")
    if texts:
        notes.append(
            f"invalid_entries: store returned {texts} entries whose key or content is not a string"
        )
    if numbers:
        notes.append(
            f"invalid_entries: store returned {numbers} entries with a score or importance "
            "that is not a finite number"
        )
    return notes


def abstention(traces: Sequence[StageTrace]) -> str | None:
    """Why a render that rendered nothing abstained: the prompt gate, the owner rule (every
    entry past the floor was about someone else than the one asked about), else the floor,
    but only when no entry passed it: one a later stage dropped (a budget, a skip rule) scored
    over the floor, so "every one scored under" would be untrue (None: not on purpose)."""
    kinds = [{r.split(":", 1)[0] for r in tr.dropped.values()} for tr in traces]
    if any(UNRELATED_PROMPT in k for k in kinds):
        return UNRELATED_PROMPT
    owner = next((i for i, k in enumerate(kinds) if k & _OWNER), None)
    if owner is not None:  # the entries past the floor were about someone else (``owners``)
        on_purpose = _OWNER | {_BELOW_RELEVANCE}
        return None if any(k - on_purpose for k in kinds[owner:]) else _OTHER_OWNER
    floor = next((i for i, k in enumerate(kinds) if _BELOW_RELEVANCE in k), None)
    if floor is None or any(k - {_BELOW_RELEVANCE} for k in kinds[floor:]):
        return None
    return _BELOW_RELEVANCE
