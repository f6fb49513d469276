"""``render_memory_context``: recall, then the stages, then exactly one signal.

A render takes the turn's :class:`~memory_inject.policy.InjectPolicy` whole:
a skip sends ``memory_skipped`` and touches nothing; an inject renders with the
config the policy carries. The I/O of a render is the store's ``recall``
(under the per-turn deadline, see ``_recall``, one generator of store calls
driven by a sync and an async runner), a cached profile lookup when
governance is on, and the usage-counter update of a recall plan; everything
between is the pure stage chain of :func:`~memory_inject.stages.stages_for`.

Owns the two entry points, the recall step (with the threat scan's refill,
``_refill``), the stage chain (:func:`run_stages`), the event and its signal.
The turn is prepared in ``_turn``; the plan and its calls are ``plan`` and ``_calls``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType

import attrs
from attrs import field, frozen

from memory_inject._phrases import context_text
from memory_inject._recall import run_async, run_sync
from memory_inject._recalled import Recalled, abstention, invalid_notes
from memory_inject._refill import Withholding
from memory_inject._send import send_event
from memory_inject._text import scrub_credentials, scrubbed_summary
from memory_inject._turn import Turn, TurnInput, describe_fault, prepare
from memory_inject._usage import acount_uses, count_uses, usage_ids, usage_wait
from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import Memory
from memory_inject.models import MemoryEntry, TurnMeta, TurnOrigin
from memory_inject.policy import InjectPolicy
from memory_inject.profile import ProfileIdentity, turn_profile
from memory_inject.render import renderer_for
from memory_inject.signals import MemoryRecall, MemorySkipped, memory_recall, memory_skipped
from memory_inject.stages import StageContext, StageTrace, governed, stages_for

__all__ = [
    "RenderResult",
    "TurnInput",
    "arender_memory_context",
    "arender_turn",
    "render_memory_context",
    "render_turn",
]

_QUERY_SUMMARY_CHARS = 200
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


def _backend_name(store: Memory) -> str:
    try:
        return str(store.name)
    except Exception:  # noqa: BLE001 - a broken store must not break the turn
        return type(store).__name__


def _failed(reason: str) -> Recalled:
    """What a recall that could not run (or broke the runner) produced: nothing, one error."""
    return Recalled([], 0, False, [reason], {}, 0.0)


def _recall(t: Turn) -> Recalled:
    """The sync recall, with any fault the runner lets through named on the event."""
    if t.abstained:
        return _NOTHING
    if t.failed is not None:
        return _failed(t.failed)
    try:
        rec = run_sync(t.store, t.calls, t.deadline, t.plan, t.until)
        held = Withholding.of(t, rec)
        while held is not None and (ask := held.ask()) is not None:
            held.take(run_sync(t.store, ask[0], t.deadline, ask[1], t.until))
        return rec if held is None else held.result()
    except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
        return _failed(f"recall_failed: {describe_fault(exc)}")


async def _arecall(t: Turn) -> Recalled:
    """The async twin of :func:`_recall`."""
    if t.abstained:
        return _NOTHING
    if t.failed is not None:
        return _failed(t.failed)
    try:
        rec = await run_async(t.store, t.calls, t.deadline, t.plan, t.until)
        held = Withholding.of(t, rec)
        while held is not None and (ask := held.ask()) is not None:
            held.take(await run_async(t.store, ask[0], t.deadline, ask[1], t.until))
        return rec if held is None else held.result()
    except Exception as exc:  # noqa: BLE001 - a memory failure never fails the turn
        return _failed(f"recall_failed: {describe_fault(exc)}")


def render_memory_context(
    store: Memory,
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

    The keyword form of :func:`render_turn` for direct calls: the turn's
    inputs (``query``, ``origin``, ``sessions``, ``turn``, ``source``, ``now``)
    become one :class:`TurnInput`. ``policy`` is the turn's decision
    (:func:`resolve_inject_policy`), carrying the origin's resolved config; a
    skip policy renders nothing, touches no store and sends ``memory_skipped``.
    Instead of a policy, ``config`` and ``origin`` resolve one here (without
    ``origin``: inject, keep conversation, ``config`` as given). ``now`` pins
    the clock (decay, recency) for reproducible renders. ``source`` names the
    calling plugin for a recall plan's ``plugin`` query. ``cwd`` and
    ``profile`` feed the governance stages (the profile is resolved from
    ``cwd`` when not given). Sends exactly one signal: ``memory_recall`` or
    ``memory_skipped``.
    """
    inp = _input(query, origin, sessions, turn, source, now, policy)
    return render_turn(store, inp, policy=policy, config=config, cwd=cwd, profile=profile)


async def arender_memory_context(
    store: Memory,
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
    inp = _input(query, origin, sessions, turn, source, now, policy)
    return await arender_turn(store, inp, policy=policy, config=config, cwd=cwd, profile=profile)


def _input(
    query: str,
    origin: TurnOrigin | str | None,
    sessions: Iterable[str | None] | None,
    turn: TurnMeta | None,
    source: str | None,
    now: datetime | None,
    policy: InjectPolicy | None,
) -> TurnInput:
    if policy is not None and origin is not None:
        raise TypeError("pass either 'policy' or 'config'/'origin', not both")
    meta = turn if turn is not None else TurnMeta()
    return TurnInput(
        query=query, origin=origin, sessions=sessions, turn=meta, source=source, now=now
    )


def render_turn(
    store: Memory,
    turn: TurnInput,
    *,
    policy: InjectPolicy | None = None,
    config: MemoryInjectConfig | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """Render one turn from its inputs as one value; never raises because of the store.

    ``policy``, ``config``, ``cwd`` and ``profile`` are as for
    :func:`render_memory_context`; without a policy, ``turn.suppress`` skips
    with reason ``suppressed``. Sends exactly one signal.
    """
    t = prepare(store, turn, policy, config, cwd, profile)
    if not t.policy.inject:
        return _skipped(t)
    result = _built(t, _recall(t))
    if ids := usage_ids(t, result.entries):
        result = _noted(result, count_uses(store, ids, usage_wait(t)))
    send_event(memory_recall, t.store, result.event)
    return result


async def arender_turn(
    store: Memory,
    turn: TurnInput,
    *,
    policy: InjectPolicy | None = None,
    config: MemoryInjectConfig | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """The async twin of :func:`render_turn`: awaits ``arecall`` (or ``recall`` in a thread)."""
    t = prepare(store, turn, policy, config, cwd, profile, asynchronous=True)
    if not t.policy.inject:
        return _skipped(t)
    try:
        recalled = await _arecall(t)
    except asyncio.CancelledError:
        # The host cancelled the turn (``asyncio.wait_for``): the turn still announces
        # itself, once, as a failed recall, and the cancellation goes on.
        _finish(t, _failed("cancelled: the turn was cancelled during recall"))
        raise
    result = _built(t, recalled)
    if ids := usage_ids(t, result.entries):
        result = _noted(result, await acount_uses(store, ids, usage_wait(t)))
    send_event(memory_recall, t.store, result.event)
    return result


def _noted(result: RenderResult, note: str | None) -> RenderResult:
    """``result`` with ``note`` (usage counts deferred or failed) on its event's ``degraded``."""
    event = result.event
    if note is None or not isinstance(event, MemoryRecall):
        return result
    event = attrs.evolve(event, degraded=(*event.degraded, scrub_credentials(note)))
    return attrs.evolve(result, event=event)


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


def _skipped(t: Turn) -> RenderResult:
    event = MemorySkipped(
        reason=t.policy.reason or "skipped",
        origin=None if t.policy.origin is None else str(t.policy.origin),
        sessions=t.scopes,
        channel=t.meta.channel,
        agent_alias=t.meta.agent_alias,
        turn_id=t.meta.turn_id,
        detail=None if t.policy.detail is None else scrub_credentials(t.policy.detail),
    )
    send_event(memory_skipped, t.store, event)
    return RenderResult("", (), (), event)


def _finish(t: Turn, rec: Recalled) -> RenderResult:
    result = _built(t, rec)
    send_event(memory_recall, t.store, result.event)
    return result


def _built(t: Turn, rec: Recalled) -> RenderResult:
    """The turn's result and its event, not sent yet."""
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
    errors.extend(invalid_notes(rec.invalid))
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
            similarity=rec.similarity,
            shared_only=t.policy.shared_only,
        )
        text, rendered, stage_traces = run_stages(ctx, recalled)
        traces.extend(stage_traces)
    except Exception as exc:  # noqa: BLE001 - a stage bug degrades to no memory
        stage_failed = True
        text, rendered = "", ()
        errors.append(f"stage_failed: {describe_fault(exc)}")
    success = rec.any_ok and not rec.invalid and not stage_failed
    abstained = t.abstained or (abstention(traces) if success and not rendered else None)
    query = t.query
    event = MemoryRecall(
        query_summary=None if query == "" else scrubbed_summary(query, _QUERY_SUMMARY_CHARS),
        duration=rec.duration,
        num_entries=len(rec.entries),
        backend=_backend_name(t.store),
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
        prompt_similarity=rec.similarity,
    )
    return RenderResult(text, rendered, event.trace, event)
