"""The recall-time threat scan's refill: withhold what a rule flags, then ask the store again.

Owns :class:`Withholding` (one turn's withheld rows and its refill rounds) and
the refill's bounds (zeroclaw's ``READ_REFILL_MULTIPLIER``, the number of
rounds). The rules themselves are ``memory_inject.stages.threat``; the recall
step of ``memory_inject.pipeline`` drives the rounds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import attrs
from attrs import define

from memory_inject._calls import STANDING, Call
from memory_inject._recalled import Recalled
from memory_inject._turn import Turn
from memory_inject.config import MAX_CANDIDATE_POOL
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, recall_limit_for
from memory_inject.stages.filters import SHARED_CATEGORIES
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
class Withholding:
    """The recall-time threat scan of one turn (``stages/threat.py``): withhold, then refill.

    A row a rule flags is withheld, named ``threat:<rule>`` on the recall trace,
    and the store is asked again: each scope for its limit plus the withheld rows
    it could have returned (a plan: each query and the cap plus all of them), at
    most 4 x its limit, in up to 3 more rounds while new rows are withheld. A
    hostile row therefore never takes a benign row's place. A turn that withholds
    nothing makes no other call and renders what it did without the scan. A round
    that fails or runs out of time is not used: the turn keeps the last whole
    answer, with one note on the event.
    """

    t: Turn
    scan: ThreatScan
    rec: Recalled
    held: dict[str, str]
    limits: dict[str | None, int]
    plan: RecallPlan | None
    rounds: int = 0
    duration: float = 0.0
    notes: list[str] = attrs.Factory(list)

    @classmethod
    def of(cls, t: Turn, rec: Recalled) -> Withholding | None:
        """The turn's withholding, or None when the scan is off or flags nothing."""
        scan = threat_scan_for(t.config)
        if scan is None or not rec.entries:
            return None
        held = scan.withhold(rec.entries).dropped
        if not held:
            return None
        base = recall_limit_for(t.config)
        limits = dict.fromkeys(t.scopes, base)
        return cls(t, scan, rec, held, limits, t.plan, 0, rec.duration, list(rec.degraded))

    def _flagged(self) -> list[MemoryEntry]:
        return [e for e in self.rec.entries if e.key in self.held]

    def ask(self) -> tuple[list[Call], RecallPlan | None] | None:
        """The next round's calls and plan, or None when no round would return more."""
        t = self.t
        if self.rounds >= _REFILL_ROUNDS or t.rebuild is None:
            return None
        if t.until is not None and time.perf_counter() >= t.until:
            self.notes.append(f"threat_scan: no time left to refill {len(self.held)} withheld")
            return None
        flagged = self._flagged()
        standing = [c for c in t.calls if c.source == STANDING]
        plan = self.plan
        if plan is None:
            base = recall_limit_for(t.config)
            if self.rec.raw_count < min(self.limits.values()):
                return None  # every scope came back short: the store has no more
            ceiling = min(base * _REFILL_MULTIPLIER, MAX_CANDIDATE_POOL)
            limits = {s: min(ceiling, base + _owed(s, flagged)) for s in self.limits}
            if all(limits[s] <= self.limits[s] for s in limits):
                return None
            self.limits = limits
            calls = [c for s in t.scopes for c in t.rebuild(limits[s], (s,), None)]
        else:
            k = len(flagged)
            base_plan = t.plan or plan

            def more(n: int) -> int:
                return min(n + k, n * _REFILL_MULTIPLIER, MAX_CANDIDATE_POOL)

            wider = attrs.evolve(
                base_plan,
                queries=tuple(attrs.evolve(q, limit=more(q.limit)) for q in base_plan.queries),
                cap=more(base_plan.cap),
            )
            if wider == plan:
                return None
            self.plan = plan = wider
            calls = t.rebuild(recall_limit_for(t.config), t.scopes, plan)
        self.rounds += 1
        return [*calls, *standing], plan

    def take(self, rec: Recalled) -> None:
        """Use a round's answer when it is whole; otherwise keep the last one and say why."""
        self.duration += rec.duration
        if not rec.any_ok or rec.partial or len(rec.errors) > len(self.rec.errors):
            why = "deadline" if rec.partial else "; ".join(rec.errors) or "no answer"
            self.notes.append(
                f"threat_scan: refill not used ({why}); {len(self.held)} withheld not replaced"
            )
            self.rounds = _REFILL_ROUNDS
            return
        self.notes.extend(rec.degraded)
        self.rec = rec
        self.held = self.scan.withhold(rec.entries).dropped

    def result(self) -> Recalled:
        """The last whole answer without the withheld rows, which join the recall's drops."""
        rec = self.rec
        return attrs.evolve(
            rec,
            entries=[e for e in rec.entries if e.key not in self.held],
            # The recall step's drops, named on its trace (with what a plan cut).
            plan_dropped={**rec.plan_dropped, **self.held},
            duration=self.duration,
            degraded=tuple(dict.fromkeys([*rec.degraded, *self.notes])),
        )
