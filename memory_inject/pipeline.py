"""``render_memory_context``: recall, then the stages, then exactly one signal.

A render takes the turn's :class:`~memory_inject.policy.InjectPolicy` whole:
a skip sends ``memory_skipped`` and touches nothing; an inject renders with the
config the policy carries. The I/O of a render is the store's ``recall``
(under the per-turn deadline, see ``_recall``, one generator of store calls
driven by a sync and an async runner), a cached profile lookup when
governance is on, and the usage-counter update of a recall plan; everything
between is the pure stage chain of :func:`~memory_inject.stages.stages_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from types import MappingProxyType

import attrs
from attrs import define, field, frozen
from blinker import NamedSignal

from memory_inject._phrases import context_text
from memory_inject._recall import (
    STANDING,
    Call,
    Recalled,
    build_calls,
    describe,
    run_async,
    run_sync,
)
from memory_inject._text import scrub_credentials, scrubbed_summary
from memory_inject.config import MAX_CANDIDATE_POOL, MemoryInjectConfig
from memory_inject.contract import Memory, SupportsUsage, supports
from memory_inject.models import MemoryEntry, TurnMeta, TurnOrigin
from memory_inject.plan import PRESETS, PlanQuery, RecallPlan
from memory_inject.policy import InjectPolicy, direct_policy, has_session, resolve_inject_policy
from memory_inject.profile import ProfileIdentity, TurnProfile, turn_profile
from memory_inject.render import renderer_for
from memory_inject.signals import MemoryRecall, MemorySkipped, memory_recall, memory_skipped
from memory_inject.stages import (
    StageContext,
    StageTrace,
    governed,
    recall_restriction,
    stages_for,
)
from memory_inject.stages.filters import SHARED_CATEGORIES
from memory_inject.stages.rerank import rerank_recall_limit
from memory_inject.stages.threat import ThreatScan, threat_scan_for
from memory_inject.standing import standing_fetch
from memory_inject.trivial import has_query_terms

__all__ = ["RenderResult", "arender_memory_context", "render_memory_context"]

_log = logging.getLogger("memory_inject")
_QUERY_SUMMARY_CHARS = 200
_NO_QUERY_TERMS = "no_query_terms"
_BELOW_RELEVANCE = "below_relevance"
# What an abstaining render "recalled": nothing, successfully, in no time.
_NOTHING = Recalled([], 0, True, [], {}, 0.0)
_NO_SCORES: Mapping[str, float | None] = MappingProxyType({})


@frozen(slots=True)
class RenderResult:
    """The block (``""`` when nothing survived), what was rendered and why the rest was not."""

    text: str
    entries: tuple[MemoryEntry, ...]
    trace: tuple[StageTrace, ...]
    #: ``MemoryRecall`` for a render, ``MemorySkipped`` when the policy skipped.
    event: MemoryRecall | MemorySkipped = field(repr=False)

    @property
    def success(self) -> bool:
        """False when memory failed (store, garbage, a stage); a skip is a success."""
        return self.event.success

    @property
    def skipped(self) -> bool:
        """True when the policy skipped the turn (``event`` says why)."""
        return isinstance(self.event, MemorySkipped)


def recall_limit_for(cfg: MemoryInjectConfig) -> int:
    """Entries to ask of each scope: the limit, or the rerank arm's over-fetched pool."""
    limit = cfg.recall_limit or cfg.rerank.pool_cap
    if cfg.rerank.enabled:
        return rerank_recall_limit(limit, cfg.rerank)
    return limit


def plan_for(cfg: MemoryInjectConfig) -> RecallPlan | None:
    """The recall plan of a config, or None for one recall per session scope."""
    rp = cfg.recall_plan
    if not rp.enabled:
        return None
    if rp.preset is not None:
        return PRESETS[rp.preset]
    queries = tuple(PlanQuery(q.source, q.limit) for q in rp.queries) or (
        PlanQuery("default", recall_limit_for(cfg)),
    )
    return RecallPlan(
        queries, cap=rp.cap, priority=rp.priority, statuses=rp.statuses, track_usage=rp.track_usage
    )


def _backend_name(memory: Memory) -> str:
    try:
        return str(memory.name)
    except Exception:  # noqa: BLE001 - a broken store must not break the turn
        return type(memory).__name__


def _policy(
    policy: InjectPolicy | None,
    config: MemoryInjectConfig | None,
    origin: TurnOrigin | str | None,
    scopes: tuple[str | None, ...],
) -> InjectPolicy:
    """The turn's policy: the one given, else resolved from ``config`` and ``origin``."""
    if policy is not None:
        if config is not None or origin is not None:
            raise TypeError("pass either 'policy' or 'config'/'origin', not both")
        return policy
    if origin is None:
        return direct_policy(config)
    return resolve_inject_policy(origin, has_session=has_session(scopes), config=config)


def _scopes(sessions: Iterable[str | None] | None) -> tuple[str | None, ...]:
    """The render's session scopes; a wrong shape is the caller's bug, a ``TypeError`` here.

    ``None`` and an empty list are one unscoped recall. A bare string is
    refused: iterating it would recall one scope per letter.
    """
    if sessions is None:
        return (None,)
    if isinstance(sessions, str | bytes):
        raise TypeError(
            f"'sessions' must be a list of session ids, not a {type(sessions).__name__} "
            f"(got {sessions!r:.80}); pass [{sessions!r:.80}]"
        )
    try:
        scopes = tuple(sessions)
    except TypeError:
        raise TypeError(
            "'sessions' must be an iterable of session ids (str or None) "
            f"(got {type(sessions).__name__})"
        ) from None
    for i, scope in enumerate(scopes):
        if scope is not None and not isinstance(scope, str):
            raise TypeError(
                f"'sessions' items must be str or None (got {type(scope).__name__} at index {i})"
            )
    return scopes or (None,)


def _describe(exc: BaseException) -> str:
    """:func:`describe`, even for an exception whose ``__str__`` or ``reason`` raises."""
    try:
        return describe(exc)
    except Exception:  # noqa: BLE001 - the fault must still be named on the event
        try:
            name = type(exc).__name__
        except Exception:  # noqa: BLE001
            name = "exception"
        return f"{name} (its message raised when read)"


@define(slots=True)
class _Turn:
    """Everything one render knows before it recalls; built once, read by every step.

    Not frozen only because a frozen attrs class pays a per-field ``__setattr__``
    on the hot path; nothing assigns to it after ``_prepare``.
    """

    memory: Memory
    query: str
    scopes: tuple[str | None, ...]
    policy: InjectPolicy
    meta: TurnMeta
    now: datetime | None
    cwd: str | os.PathLike[str] | None
    profile: ProfileIdentity | str | None
    plan: RecallPlan | None
    calls: list[Call]
    abstained: str | None = None
    #: Why the store calls could not even be built (a store attribute that raises).
    failed: str | None = None
    #: The turn's profile when it was resolved before recall (the standing context's).
    who: TurnProfile | None = None
    #: The deadline as a ``perf_counter`` value (None: no deadline).
    until: float | None = None
    #: ``rebuild(limit, scopes, plan)``: the turn's store calls asking other limits (the
    #: threat scan's refill); None when the turn makes no store call.
    rebuild: Callable[[int, tuple[str | None, ...], RecallPlan | None], list[Call]] | None = None

    @property
    def config(self) -> MemoryInjectConfig:
        return self.policy.config

    @property
    def deadline(self) -> float | None:
        ms = self.policy.config.deadline_ms
        return None if ms is None else ms / 1000.0


def _prepare(
    memory: Memory,
    query: str,
    sessions: Iterable[str | None] | None,
    policy: InjectPolicy | None,
    config: MemoryInjectConfig | None,
    origin: TurnOrigin | str | None,
    turn: TurnMeta | None,
    now: datetime | None,
    source: str | None,
    cwd: str | os.PathLike[str] | None,
    profile: ProfileIdentity | str | None,
    *,
    asynchronous: bool = False,
) -> _Turn:
    if not isinstance(query, str):
        raise TypeError(f"'query' must be a str (got {type(query).__name__})")
    scopes = _scopes(sessions)
    pol = _policy(policy, config, origin, scopes)
    cfg = pol.config
    plan = plan_for(cfg) if pol.inject else None
    contentless = pol.inject and cfg.require_query_terms and not has_query_terms(query)
    calls: list[Call] = []
    failed = None
    ms = cfg.deadline_ms
    until = None if ms is None or not pol.inject else time.perf_counter() + ms / 1000.0
    who = None
    if pol.inject and governed(cfg):
        with contextlib.suppress(Exception):  # the stages resolve it again, and report why
            who = turn_profile(cfg.governance.profile_id, cwd, profile)
    rebuild = None
    if pol.inject and not contentless:
        # A governed turn filters first (status, profile), then ranks, as PI does.
        statuses, profiles = recall_restriction(cfg, who.profile_id) if who else (None, None)
        rebuild = partial(
            build_calls,
            memory,
            query,
            source=source,
            asynchronous=asynchronous,
            deadline=until,
            statuses=statuses,
            profiles=profiles,
        )
        try:
            calls = rebuild(recall_limit_for(cfg), scopes, plan)
        except Exception as exc:  # noqa: BLE001 - e.g. a store whose `recall` raises on access
            failed = f"recall_failed: {_describe(exc)}"
    meta = turn if turn is not None else TurnMeta()
    abstained = _NO_QUERY_TERMS if contentless else None
    if pol.inject and cfg.standing.enabled and failed is None:
        # PI's standing context comes whatever the prompt says (contentless too).
        who = who or turn_profile(cfg.governance.profile_id, cwd, profile)
        calls.append(Call(None, STANDING, standing_fetch(memory, cfg, who.profile_id, now)))
        abstained = None
    return _Turn(
        memory,
        query,
        scopes,
        pol,
        meta,
        now,
        cwd,
        profile,
        plan,
        calls,
        abstained,
        failed,
        who,
        until,
        rebuild,
    )


def _failed(reason: str) -> Recalled:
    """What a recall that could not run (or broke the runner) produced: nothing, one error."""
    return Recalled([], 0, False, [reason], {}, 0.0)


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
class _Withholding:
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

    t: _Turn
    scan: ThreatScan
    rec: Recalled
    held: dict[str, str]
    limits: dict[str | None, int]
    plan: RecallPlan | None
    rounds: int = 0
    duration: float = 0.0
    notes: list[str] = attrs.Factory(list)

    @classmethod
    def of(cls, t: _Turn, rec: Recalled) -> _Withholding | None:
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


def _recall(t: _Turn) -> Recalled:
    """The sync recall, with any fault the runner lets through named on the event."""
    if t.abstained:
        return _NOTHING
    if t.failed is not None:
        return _failed(t.failed)
    try:
        rec = run_sync(t.memory, t.calls, t.deadline, t.plan, t.until)
        held = _Withholding.of(t, rec)
        while held is not None and (ask := held.ask()) is not None:
            held.take(run_sync(t.memory, ask[0], t.deadline, ask[1], t.until))
        return rec if held is None else held.result()
    except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
        return _failed(f"recall_failed: {_describe(exc)}")


async def _arecall(t: _Turn) -> Recalled:
    """The async twin of :func:`_recall`."""
    if t.abstained:
        return _NOTHING
    if t.failed is not None:
        return _failed(t.failed)
    try:
        rec = await run_async(t.memory, t.calls, t.deadline, t.plan, t.until)
        held = _Withholding.of(t, rec)
        while held is not None and (ask := held.ask()) is not None:
            held.take(await run_async(t.memory, ask[0], t.deadline, ask[1], t.until))
        return rec if held is None else held.result()
    except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
        return _failed(f"recall_failed: {_describe(exc)}")


def render_memory_context(
    memory: Memory,
    query: str,
    *,
    policy: InjectPolicy | None = None,
    sessions: Iterable[str | None] | None = (),
    turn: TurnMeta | None = None,
    now: datetime | None = None,
    config: MemoryInjectConfig | None = None,
    origin: TurnOrigin | str | None = None,
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """Recall for each session scope and render one block. Never raises because of the store.

    ``policy`` is the turn's decision (:func:`resolve_inject_policy`), carrying
    the origin's resolved config; a skip policy renders nothing, touches no
    store and sends ``memory_skipped``. Instead of a policy, ``config`` and
    ``origin`` resolve one here (without ``origin``: inject, keep
    conversation, ``config`` as given). ``now`` pins the clock (decay,
    recency) for reproducible renders. ``source`` names the calling plugin for
    a recall plan's ``plugin`` query. ``cwd`` and ``profile`` feed the
    governance stages (the profile is resolved from ``cwd`` when not given).
    Sends exactly one signal: ``memory_recall`` or ``memory_skipped``.
    """
    t = _prepare(memory, query, sessions, policy, config, origin, turn, now, source, cwd, profile)
    if not t.policy.inject:
        return _skipped(t)
    recalled = _recall(t)
    result = _finish(t, recalled)
    if t.plan is not None and t.plan.track_usage and result.entries:
        _mark_used(memory, result.entries)
    return result


async def arender_memory_context(
    memory: Memory,
    query: str,
    *,
    policy: InjectPolicy | None = None,
    sessions: Iterable[str | None] | None = (),
    turn: TurnMeta | None = None,
    now: datetime | None = None,
    config: MemoryInjectConfig | None = None,
    origin: TurnOrigin | str | None = None,
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """The async twin: awaits ``arecall`` (or runs ``recall`` in a thread)."""
    t = _prepare(
        memory,
        query,
        sessions,
        policy,
        config,
        origin,
        turn,
        now,
        source,
        cwd,
        profile,
        asynchronous=True,
    )
    if not t.policy.inject:
        return _skipped(t)
    recalled = await _arecall(t)
    result = _finish(t, recalled)
    if t.plan is not None and t.plan.track_usage and result.entries:
        try:
            await asyncio.to_thread(_mark_used, memory, result.entries)
        except Exception:  # noqa: BLE001 - e.g. no thread to run it in; counters are best-effort
            _log.warning("memory_inject: could not update usage counters", exc_info=True)
    return result


def _mark_used(memory: Memory, entries: Sequence[MemoryEntry]) -> None:
    try:
        if not supports(memory, SupportsUsage):
            return
        memory.mark_used([e.id for e in entries])  # one statement for all ids (founder-os)
    except Exception:  # noqa: BLE001 - usage counters never fail the turn
        _log.warning("memory_inject: could not update usage counters", exc_info=True)


def run_stages(
    ctx: StageContext, entries: Sequence[MemoryEntry]
) -> tuple[str, tuple[MemoryEntry, ...], list[StageTrace]]:
    """The pure part of a render: the config's stage chain, then its renderer."""
    traces: list[StageTrace] = []
    current: Sequence[MemoryEntry] = entries
    routed: dict[str, list[MemoryEntry]] = {}
    for named in stages_for(ctx.config):
        res = named.stage(ctx, current)
        if res.rerouted is not None:  # a stage over the routed sections
            if routed:
                n_in = sum(len(v) for v in routed.values())
                routed = res.rerouted
                n_out = sum(len(v) for v in routed.values())
                traces.append(StageTrace(named.name, n_in, n_out, res.dropped))
                ctx = attrs.evolve(ctx, routed=routed)
            continue
        if res.routed:
            for section, items in res.routed.items():
                routed.setdefault(section, []).extend(items)
            ctx = attrs.evolve(ctx, routed=routed)
        survivors = res.survivors
        scores = {e.key: e.score for e in survivors} if named.scored else _NO_SCORES
        traces.append(StageTrace(named.name, len(current), len(survivors), res.dropped, scores))
        current = survivors
    rendered = renderer_for(ctx.config)(ctx, current)
    traces.extend(rendered.traces)
    return rendered.text, rendered.entries, traces


def _skipped(t: _Turn) -> RenderResult:
    event = MemorySkipped(
        reason=t.policy.reason or "skipped",
        origin=None if t.policy.origin is None else str(t.policy.origin),
        sessions=t.scopes,
        channel=t.meta.channel,
        agent_alias=t.meta.agent_alias,
        turn_id=t.meta.turn_id,
        detail=None if t.policy.detail is None else scrub_credentials(t.policy.detail),
    )
    _send(memory_skipped, t.memory, event)
    return RenderResult("", (), (), event)


def _any_below_floor(traces: Sequence[StageTrace]) -> bool:
    """True when a stage dropped an entry for scoring under the relevance floor."""
    return any(r.startswith(_BELOW_RELEVANCE) for tr in traces for r in tr.dropped.values())


def _finish(t: _Turn, rec: Recalled) -> RenderResult:
    cfg = t.config
    recalled = rec.entries
    if rec.passed_over and governed(cfg):
        # Rows the turn's restriction passed over: the governance stages drop them by
        # name (PI's trace), after the rows kept, so none takes a slot.
        recalled = [*recalled, *rec.passed_over]
    recall_trace = StageTrace(
        "recall",
        rec.raw_count + len(recalled) - len(rec.entries),
        len(recalled),
        {**rec.invalid, **rec.plan_dropped},
    )
    traces: list[StageTrace] = [recall_trace]
    text = ""
    rendered: tuple[MemoryEntry, ...] = ()
    errors = list(rec.errors)
    if rec.invalid:
        errors.append(f"invalid_entries: store returned {len(rec.invalid)} non-entries")
    stage_failed = False
    try:
        # The stages after the arm only drop what the rerank arm already
        # dropped, so the renderer's demand bounds how far the arm must rank.
        demand = renderer_for(cfg).demand(cfg)
        gov = cfg.governance
        if governed(cfg):
            who = t.who or turn_profile(gov.profile_id, t.cwd, t.profile)
            where = os.fspath(t.cwd) if t.cwd is not None else os.getcwd()
            text_ctx = context_text(t.query, where, include_cwd=gov.include_working_directory)
            profile_id, project_keys = who.profile_id, who.project_keys
        else:
            profile_id, project_keys, text_ctx = None, frozenset(), ""
        ctx = StageContext(
            cfg,
            t.now if t.now is not None else datetime.now(UTC),
            t.policy.exclude_conversation,
            t.query,
            demand,
            profile_id,
            project_keys,
            text_ctx,
            sessions=t.scopes,
        )
        text, rendered, stage_traces = run_stages(ctx, recalled)
        traces.extend(stage_traces)
    except Exception as exc:  # noqa: BLE001 - a stage bug degrades to no memory
        stage_failed = True
        text, rendered = "", ()
        errors.append(f"stage_failed: {_describe(exc)}")
    success = rec.any_ok and not rec.invalid and not stage_failed
    abstained = t.abstained or (
        _BELOW_RELEVANCE if success and not rendered and _any_below_floor(traces) else None
    )
    query = t.query
    event = MemoryRecall(
        query_summary=None if query == "" else scrubbed_summary(query, _QUERY_SUMMARY_CHARS),
        duration=rec.duration,
        num_entries=len(rec.entries),
        backend=_backend_name(t.memory),
        success=success,
        channel=t.meta.channel,
        agent_alias=t.meta.agent_alias,
        turn_id=t.meta.turn_id,
        origin=None if t.policy.origin is None else str(t.policy.origin),
        sessions=t.scopes,
        rendered_entries=len(rendered),
        rendered_chars=len(text),
        rendered_keys=tuple(e.key for e in rendered),
        trace=tuple(traces),
        error=scrub_credentials("; ".join(errors)) or None,
        degraded=tuple(scrub_credentials(d) for d in rec.degraded),
        partial=rec.partial,
        abstained=abstained,
        tokenizer=cfg.budget.tokenizer,
        text=text,
    )
    _send(memory_recall, t.memory, event)
    return RenderResult(text, rendered, event.trace, event)


def _send(signal: NamedSignal, sender: Memory, event: MemoryRecall | MemorySkipped) -> None:
    """Call every receiver; one that raises is logged and the rest still hear the event.

    Observers never steer behaviour, so anything a receiver raises is isolated,
    ``BaseException`` subclasses included (``CancelledError``, ``GeneratorExit``,
    a custom one): a sync receiver cannot be cancelled by the event loop, so its
    ``CancelledError`` is its own bug. ``KeyboardInterrupt`` and ``SystemExit``
    still propagate: they stop the process, and a library must not swallow them.
    """
    if not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, event=event)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - observers never steer behaviour, nor break the turn
            _log.exception("%s receiver %r raised", signal.name, receiver)
