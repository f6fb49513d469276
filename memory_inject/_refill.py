"""The recall step's refill: withhold what a turn may not be shown, then ask the store again.

Owns :class:`Withholding` (one turn's withheld rows and its refill rounds) and
the refill's bounds (zeroclaw's ``READ_REFILL_MULTIPLIER``, the number of
rounds). Three rules withhold: the threat scan's (``memory_inject.stages.threat``),
a scheduled turn's scope (a sessionless cron or daemon turn sees the rows
bound to no session: :func:`~memory_inject.stages.filters.unshared`) and PI's
Daily Log (``daily_today_only``: the daily notes of past days are never shown), so
a row any withholds never takes the place of one the turn may see. The recall
step of ``memory_inject.pipeline`` drives the rounds. A store that honours
``RecallQuery.exclude`` (:class:`~memory_inject.contract.SupportsExcludingRecall`)
is asked once past the rows no stage would show instead of ever more of them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime

import attrs
from attrs import define

from memory_inject._calls import STANDING, Call
from memory_inject._recalled import Recalled
from memory_inject._seam import seam_of
from memory_inject._turn import Turn
from memory_inject.config import MAX_CANDIDATE_POOL
from memory_inject.contract import RecallExclusion
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.plan import RecallPlan, recall_limit_for
from memory_inject.render._fields import utc
from memory_inject.stages.filters import SHARED_CATEGORIES, eligibility_reason, unshared
from memory_inject.stages.threat import ThreatScan, threat_scan_for

__all__ = ["Withholding"]


#: A refill asks a scope for at most this many times its limit (zeroclaw's
#: ``READ_REFILL_MULTIPLIER``) ...
_REFILL_MULTIPLIER = 4
#: ... in at most this many more rounds.
_REFILL_ROUNDS = 3


def _owed(scope: str | None, flagged: Sequence[MemoryEntry]) -> int:
    """How many withheld rows a scope's recall may have returned: the unscoped recall any,
    a session's its own and the shared sessionless ones (``core``, ``daily``)."""
    if scope is None:
        return len(flagged)
    return sum(
        1
        for e in flagged
        if e.session_id == scope or (e.session_id is None and e.category in SHARED_CATEGORIES)
    )


@define
class _Rules:
    """What one turn may not be shown, known at recall time.

    Withheld (dropped by the recall step): the threat scan's flags, for a scheduled turn
    that names no session, the rows bound to one (``foreign_session``), and, when the
    sectioned renderer shows today's daily notes only (``daily_today_only``, PI), the daily
    notes of other days than ``today``, the turn's UTC day (``daily:not_today``). Left to
    their stages, but counted so the store is asked for more when nothing else is left: the
    rows the skip set drops (autosaves, history blobs, ...) and, when the policy excludes
    it, chat memory. Without the count a chat that autosaves each message fills the recall
    limit with its own messages, and the fact it asks about falls out of the block. (Only a
    page of nothing else: a turn that has some row to show pays no other call for them.)
    """

    scan: ThreatScan | None
    shared_only: bool
    exclude_conversation: bool
    today: date | None = None

    def withhold(self, entries: Sequence[MemoryEntry]) -> dict[str, str]:
        """``{key: reason}`` for each entry a rule withholds."""
        held = {} if self.scan is None else self.scan.withhold(entries).dropped
        if self.shared_only:
            for e in entries:
                why = unshared(e, True)
                if why is not None:
                    held.setdefault(e.key, why)
        if self.today is not None:
            for e in entries:
                if e.category == "daily" and (
                    e.timestamp is None or utc(e.timestamp).date() != self.today
                ):
                    held.setdefault(e.key, "daily:not_today")
        return held

    def doomed(self, entries: Sequence[MemoryEntry], held: Mapping[str, str]) -> list[MemoryEntry]:
        """The entries, not withheld, a later stage drops whatever their score, when they
        are all the turn has left; none once one entry is found that no stage drops (a
        long answer is read no further)."""
        doomed: list[MemoryEntry] = []
        for e in entries:
            if e.key in held:
                continue
            if eligibility_reason(e, self.exclude_conversation) is None:
                return []
            doomed.append(e)
        return doomed

    def exclusion(self) -> RecallExclusion:
        """The rows no stage of the turn shows that a store can tell by key, category or
        session (not the threat scan's, a content scan): a refill's query leaves them out."""
        chat = (str(MemoryCategory.CONVERSATION),) if self.exclude_conversation else ()
        return RecallExclusion(skip_keys=True, categories=chat, sessionless=self.shared_only)


@define
class Withholding:
    """The recall-time rules of one turn (:class:`_Rules`): withhold, then refill.

    A row a rule flags is withheld, named on the recall trace (``threat:<rule>``,
    ``foreign_session``, ``daily:not_today``), and the store is asked again; so is it
    when the rows the skip set or the conversation exclusion will drop are all the answer holds.
    Each scope is asked for its limit plus the withheld or dropped rows it could
    have returned (a plan: each query and the cap plus all of them), at most 4 x its
    limit, in up to 3 more rounds while rows are still withheld or nothing else is
    left, so a hostile row, or a chat's own autosaved messages, never take the
    place of the rows ranked within 4 x the limit. Another session's rows may
    outnumber a scheduled turn's shared rows many times over, and a chat's autosaved
    messages its facts: while fewer than the limit are left (for the dropped rows: none
    at all), each round asks 4 times as many (5, 20, 80, 320; at most the candidate
    pool, 1,024; for the dropped rows, 16 x the limit). A turn with nothing to
    withhold, or with a row to show among those a stage drops, makes no other call. A
    round that fails or runs out of time is not used: the turn keeps the last whole
    answer, with one note on the event.

    A store that honours ``RecallQuery.exclude`` is asked instead, at the first page's
    limits, once past every row the skip set's key rules, the conversation exclusion
    or a scheduled turn's scope would drop (:meth:`_Rules.exclusion`), however many:
    1,000 autosaves cost one query, not 4 rounds that stop before the fact. The
    first page's dropped rows stay on the answer (their stages name them, as before);
    a row the exclusion cannot name (a threat flag, an autosave told by its content)
    is refilled as above, the exclusion kept.
    """

    t: Turn
    rules: _Rules
    rec: Recalled
    held: dict[str, str]
    #: The answer's rows, not withheld, a later stage drops, when nothing else is left
    #: (none once one row is).
    doomed: list[MemoryEntry]
    limits: dict[str | None, int]
    plan: RecallPlan | None
    rounds: int = 0
    duration: float = 0.0
    notes: list[str] = attrs.Factory(list)
    #: The exclusion every later round carries, once a round asked with it.
    excluding: RecallExclusion | None = None
    #: The rows of the answers before that round a stage drops / a rule withheld: they
    #: stay on the answer, so the turn's trace names them as before.
    spent: list[MemoryEntry] = attrs.Factory(list)
    spent_held: dict[str, str] = attrs.Factory(dict)

    @classmethod
    def of(cls, t: Turn, rec: Recalled) -> Withholding | None:
        """The turn's rules, or None when its answer has nothing they withhold or drop."""
        if not rec.entries:
            return None
        shared_only = t.policy.shared_only and not any(s is not None for s in t.scopes)
        renderer = t.config.renderer
        today = None
        if renderer.kind == "sectioned" and renderer.daily_today_only:
            today = utc(t.now or datetime.now(UTC)).date()
        rules = _Rules(threat_scan_for(t.config), shared_only, t.policy.exclude_conversation, today)
        held = rules.withhold(rec.entries)
        base = recall_limit_for(t.config)
        doomed = rules.doomed(rec.entries, held)
        if not held and not doomed:
            return None
        limits = dict.fromkeys(t.scopes, base)
        return cls(t, rules, rec, held, doomed, limits, t.plan, 0, rec.duration, list(rec.degraded))

    def _note(self, what: str) -> str:
        """A note on the event, named after what the refill was for: the threat scan's
        withheld rows (``threat_scan: ...``, as before), else other sessions' rows and rows
        a stage drops (``refill: ...``), with how many of each."""
        threats = sum(r.startswith("threat:") for r in self.held.values())
        if threats and threats == len(self.held) and not self.doomed:
            return f"threat_scan: {what}; {threats} withheld not replaced"
        parts = [f"{len(self.held)} withheld"] if self.held else []
        if self.doomed:
            parts.append(f"{len(self.doomed)} a stage drops")
        return f"refill: {what}; {' and '.join(parts) or 'none'} not replaced"

    def _owed(self) -> list[MemoryEntry]:
        """The answer's rows the turn will not show: withheld, then dropped by a stage."""
        return [*(e for e in self.rec.entries if e.key in self.held), *self.doomed]

    def ask(self) -> tuple[list[Call], RecallPlan | None] | None:
        """The next round's calls and plan, or None when no round would return more."""
        t = self.t
        if self.rounds >= _REFILL_ROUNDS or t.rebuild is None:
            return None
        base = recall_limit_for(t.config)
        owed = self._owed()
        # Other sessions' rows may outnumber a scheduled turn's shared rows many times
        # over, and a chat's autosaved messages its facts: those widen by the multiplier,
        # until as many rows as the limit are left (for the dropped rows: until one is; at
        # most 16 x the limit deep, since such a turn pays every round). Threat flags
        # alone grow the limit by their number.
        foreign = any(r == "foreign_session" for r in self.held.values())
        widening = foreign or bool(self.doomed)
        deepest = MAX_CANDIDATE_POOL if foreign else min(base * 16, MAX_CANDIDATE_POOL)
        if widening and len(self.rec.entries) - len(owed) >= base:
            return None
        if t.until is not None and time.perf_counter() >= t.until:
            self.notes.append(self._note("no time left to refill"))
            return None
        standing = [c for c in t.calls if c.source == STANDING]
        plan = self.plan
        if plan is None and self.rec.raw_count < min(self.limits.values()):
            return None  # every scope came back short: the store has no more
        if widening and self.excluding is None and seam_of(t.store).excludes:
            # One query past the rows no stage shows, at the first page's limits.
            self.excluding = ex = self.rules.exclusion()
            self.spent, self.spent_held = list(self.doomed), dict(self.held)
            self.rounds += 1
            if plan is None:
                n = self.limits
                calls = [c for s in t.scopes for c in t.rebuild(n[s], (s,), None, exclude=ex)]
            else:
                calls = t.rebuild(base, t.scopes, plan, exclude=ex)
            return [*calls, *standing], plan
        if plan is None:
            if widening:
                limits = {s: min(n * _REFILL_MULTIPLIER, deepest) for s, n in self.limits.items()}
            else:
                ceiling = min(base * _REFILL_MULTIPLIER, MAX_CANDIDATE_POOL)
                limits = {s: min(ceiling, base + _owed(s, owed)) for s in self.limits}
            if all(limits[s] <= self.limits[s] for s in limits):
                return None
            self.limits = limits
            calls = [
                c
                for s in t.scopes
                for c in t.rebuild(limits[s], (s,), None, exclude=self.excluding)
            ]
        else:
            k = len(owed)
            base_plan = t.plan or plan
            times = int(_REFILL_MULTIPLIER ** (self.rounds + 1))

            def more(n: int) -> int:
                if widening:
                    return min(n * times, max(n, deepest))
                return min(n + k, n * _REFILL_MULTIPLIER, MAX_CANDIDATE_POOL)

            wider = attrs.evolve(
                base_plan,
                queries=tuple(attrs.evolve(q, limit=more(q.limit)) for q in base_plan.queries),
                cap=more(base_plan.cap),
            )
            if wider == plan:
                return None
            self.plan = plan = wider
            calls = t.rebuild(base, t.scopes, plan, exclude=self.excluding)
        self.rounds += 1
        return [*calls, *standing], plan

    def take(self, rec: Recalled) -> None:
        """Use a round's answer when it is whole; otherwise keep the last one and say why."""
        self.duration += rec.duration
        if not rec.any_ok or rec.partial or len(rec.errors) > len(self.rec.errors):
            why = "deadline" if rec.partial else "; ".join(rec.errors) or "no answer"
            self.notes.append(self._note(f"refill not used ({why})"))
            self.rounds = _REFILL_ROUNDS
            return
        self.notes.extend(rec.degraded)
        self.rec = rec
        self.held = self.rules.withhold(rec.entries)
        self.doomed = self.rules.doomed(rec.entries, self.held)

    def result(self) -> Recalled:
        """The last whole answer without the withheld rows, which join the recall's drops."""
        rec = self.rec
        entries = [e for e in rec.entries if e.key not in self.held]
        if self.spent:
            keys = {e.key for e in rec.entries}
            entries += [e for e in self.spent if e.key not in keys]
        return attrs.evolve(
            rec,
            entries=entries,
            # The recall step's drops, named on its trace (with what a plan cut).
            plan_dropped={**rec.plan_dropped, **self.spent_held, **self.held},
            duration=self.duration,
            degraded=tuple(dict.fromkeys([*rec.degraded, *self.notes])),
        )
