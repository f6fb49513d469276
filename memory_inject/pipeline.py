"""``render_memory_context``: recall, then the stages, then exactly one signal.

The I/O of a render is the store's ``recall`` (under the per-turn deadline,
see ``_recall``), a cached profile lookup when governance is on, and the
usage-counter update of a recall plan; everything between is the pure stage
chain. The sync and async entry points share that chain and differ only in
how they call the store.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import attrs
from attrs import field, frozen

from memory_inject._phrases import context_text
from memory_inject._recall import Call, Recalled, build_calls, describe, run_async, run_sync
from memory_inject._text import scrub_credentials, truncate_with_ellipsis
from memory_inject.config import MemoryInjectConfig
from memory_inject.contract import Memory, SupportsUsage
from memory_inject.governance import apply_scope_to_routed, build_governance
from memory_inject.models import MemoryEntry, TurnMeta, TurnOrigin
from memory_inject.plan import PRESETS, PlanQuery, RecallPlan
from memory_inject.profile import ProfileIdentity, resolve_profile
from memory_inject.render import get_renderer
from memory_inject.rerank import rerank, rerank_recall_limit
from memory_inject.signals import MemoryRecall, memory_recall
from memory_inject.stages import (
    Stage,
    StageContext,
    StageTrace,
    conversation_exclusion,
    decay,
    relevance_filter,
    skip_set,
)

__all__ = ["RenderResult", "arender_memory_context", "render_memory_context"]

_log = logging.getLogger("memory_inject")
_DEFAULT = MemoryInjectConfig()
_QUERY_SUMMARY_CHARS = 200
_POST_ARM: tuple[tuple[str, Stage], ...] = (
    ("relevance_filter", relevance_filter),
    ("conversation_exclusion", conversation_exclusion),
    ("skip_set", skip_set),
)


@frozen(slots=True)
class RenderResult:
    """The block (``""`` when nothing survived), what was rendered and why the rest was not."""

    text: str
    entries: tuple[MemoryEntry, ...]
    trace: tuple[StageTrace, ...]
    event: MemoryRecall = field(repr=False)

    @property
    def success(self) -> bool:
        return self.event.success


def recall_limit_for(cfg: MemoryInjectConfig) -> int:
    """Entries to ask of each scope: the limit, or the rerank arm's over-fetched pool."""
    limit = cfg.recall_limit or cfg.rerank.pool_cap
    if cfg.rerank.enabled:
        return rerank_recall_limit(limit, cfg.rerank)
    return limit


def _resolve(
    config: MemoryInjectConfig | None, origin: TurnOrigin | str | None
) -> MemoryInjectConfig:
    cfg = config if config is not None else _DEFAULT
    if origin is not None and cfg.origins:
        return cfg.for_origin(origin)
    return cfg


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


def _prepare(
    memory: Memory,
    query: str,
    sessions: Iterable[str | None],
    config: MemoryInjectConfig | None,
    origin: TurnOrigin | str | None,
    source: str | None,
) -> tuple[MemoryInjectConfig, tuple[str | None, ...], RecallPlan | None, list[Call]]:
    """The resolved config, scopes, plan and store calls of one render."""
    cfg = _resolve(config, origin)
    scopes = tuple(sessions) or (None,)
    plan = plan_for(cfg)
    return (
        cfg,
        scopes,
        plan,
        build_calls(memory, query, recall_limit_for(cfg), scopes, plan, source),
    )


def _deadline(cfg: MemoryInjectConfig) -> float | None:
    return None if cfg.deadline_ms is None else cfg.deadline_ms / 1000.0


def render_memory_context(
    memory: Memory,
    query: str,
    *,
    sessions: Iterable[str | None] = (),
    config: MemoryInjectConfig | None = None,
    exclude_conversation: bool = False,
    turn: TurnMeta | None = None,
    now: datetime | None = None,
    origin: TurnOrigin | str | None = None,
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """Recall for each session scope and render one block. Never raises because of the store.

    ``config`` is the agent's config; with ``origin`` given, that origin's
    overrides apply. ``now`` pins the clock (decay, recency) for reproducible
    renders. ``source`` names the calling plugin for a recall plan's
    ``plugin`` query. ``cwd`` and ``profile`` feed the governance stages (the
    profile is resolved from ``cwd`` when not given). Sends exactly one
    ``memory_recall`` signal.
    """
    cfg, scopes, plan, calls = _prepare(memory, query, sessions, config, origin, source)
    recalled = run_sync(memory, calls, _deadline(cfg), plan, scopes)
    result = _finish(
        memory, query, scopes, cfg, recalled, exclude_conversation, turn, now, origin, cwd, profile
    )
    if plan is not None and plan.track_usage and result.entries:
        _mark_used(memory, result.entries)
    return result


async def arender_memory_context(
    memory: Memory,
    query: str,
    *,
    sessions: Iterable[str | None] = (),
    config: MemoryInjectConfig | None = None,
    exclude_conversation: bool = False,
    turn: TurnMeta | None = None,
    now: datetime | None = None,
    origin: TurnOrigin | str | None = None,
    source: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    """The async twin: awaits ``arecall`` (or runs ``recall`` in a thread)."""
    cfg, scopes, plan, calls = _prepare(memory, query, sessions, config, origin, source)
    recalled = await run_async(memory, calls, _deadline(cfg), plan, scopes)
    result = _finish(
        memory, query, scopes, cfg, recalled, exclude_conversation, turn, now, origin, cwd, profile
    )
    if plan is not None and plan.track_usage and result.entries:
        await asyncio.to_thread(_mark_used, memory, result.entries)
    return result


def _mark_used(memory: Memory, entries: Sequence[MemoryEntry]) -> None:
    if not isinstance(memory, SupportsUsage):
        return
    try:
        memory.mark_used([e.id for e in entries])  # one statement for all ids (founder-os)
    except Exception:  # noqa: BLE001 - usage counters never fail the turn
        _log.warning("memory_inject: could not update usage counters", exc_info=True)


def run_stages(
    ctx: StageContext, entries: Sequence[MemoryEntry]
) -> tuple[str, tuple[MemoryEntry, ...], list[StageTrace]]:
    """The pure part of a render: governance, arm, filters, renderer."""
    traces: list[StageTrace] = []
    cfg = ctx.config
    renderer = get_renderer(cfg.renderer)
    current: Sequence[MemoryEntry] = entries
    if cfg.governance.enabled:
        gov = _governance_stages(cfg.governance.stages, cfg.governance.min_token_length)
        routed: dict[str, list[MemoryEntry]] = {}
        for name, stage in gov:
            res = stage(ctx, current)
            traces.append(StageTrace(name, len(current), len(res.survivors), res.dropped))
            for section, items in res.routed.items():
                routed.setdefault(section, []).extend(items)
            current = res.survivors
        if routed:
            # Routed (contested) entries face the scope stages too; PI forgot to.
            kept, dropped = apply_scope_to_routed(ctx, routed, gov)
            n_in = sum(len(v) for v in routed.values())
            traces.append(
                StageTrace("routed_scope", n_in, sum(len(v) for v in kept.values()), dropped)
            )
            ctx = attrs.evolve(ctx, routed=kept)
    arm_name, arm = ("rerank", rerank) if cfg.rerank.enabled else ("decay", decay)
    for name, stage in ((arm_name, arm), *_POST_ARM):
        res = stage(ctx, current)
        scores = {e.key: e.score for e in res.survivors} if stage is arm else {}
        traces.append(StageTrace(name, len(current), len(res.survivors), res.dropped, scores))
        current = res.survivors
    rendered = renderer(ctx, current)
    traces.extend(rendered.traces)
    return rendered.text, rendered.entries, traces


@functools.lru_cache(maxsize=64)
def _governance_stages(names: tuple[str, ...], min_token_length: int) -> list[tuple[str, Stage]]:
    return build_governance(names, min_token_length=min_token_length)


@functools.lru_cache(maxsize=256)
def _identity(cwd: str, explicit: str | None) -> ProfileIdentity:
    return resolve_profile(cwd, explicit=explicit)


def _turn_scope(
    cfg: MemoryInjectConfig,
    query: str,
    cwd: str | os.PathLike[str] | None,
    profile: ProfileIdentity | str | None,
) -> tuple[str | None, frozenset[str], str]:
    """The governance context of a turn: profile id, project keys, text to match."""
    gov = cfg.governance
    if not gov.enabled:
        return None, frozenset(), ""
    where = os.fspath(cwd) if cwd is not None else os.getcwd()
    identity = profile if isinstance(profile, ProfileIdentity) else _identity(where, None)
    # An explicit profile id (argument, then config) wins over the resolved one.
    profile_id = profile if isinstance(profile, str) else gov.profile_id or identity.profile_id
    text = context_text(query, where, include_cwd=gov.include_working_directory)
    return profile_id, identity.project_keys, text


def _finish(
    memory: Memory,
    query: str,
    scopes: tuple[str | None, ...],
    cfg: MemoryInjectConfig,
    rec: Recalled,
    exclude_conversation: bool,
    turn: TurnMeta | None,
    now: datetime | None,
    origin: TurnOrigin | str | None,
    cwd: str | os.PathLike[str] | None = None,
    profile: ProfileIdentity | str | None = None,
) -> RenderResult:
    recall_trace = StageTrace(
        "recall", rec.raw_count, len(rec.entries), {**rec.invalid, **rec.plan_dropped}
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
        demand = get_renderer(cfg.renderer).demand(cfg)
        profile_id, project_keys, text_ctx = _turn_scope(cfg, query, cwd, profile)
        ctx = StageContext(
            cfg,
            now if now is not None else datetime.now(UTC),
            exclude_conversation,
            query,
            demand,
            profile_id,
            project_keys,
            text_ctx,
        )
        text, rendered, stage_traces = run_stages(ctx, rec.entries)
        traces.extend(stage_traces)
    except Exception as exc:  # noqa: BLE001 - a stage bug degrades to no memory
        stage_failed = True
        text, rendered = "", ()
        errors.append(f"stage_failed: {describe(exc)}")
    success = rec.any_ok and not rec.invalid and not stage_failed
    turn = turn if turn is not None else TurnMeta()
    event = MemoryRecall(
        query_summary=(
            None
            if query == ""
            else truncate_with_ellipsis(scrub_credentials(query), _QUERY_SUMMARY_CHARS)
        ),
        duration=rec.duration,
        num_entries=len(rec.entries),
        backend=_backend_name(memory),
        success=success,
        channel=turn.channel,
        agent_alias=turn.agent_alias,
        turn_id=turn.turn_id,
        origin=None if origin is None else str(origin),
        sessions=scopes,
        rendered_entries=len(rendered),
        rendered_chars=len(text),
        rendered_keys=tuple(e.key for e in rendered),
        trace=tuple(traces),
        error=scrub_credentials("; ".join(errors)) or None,
        degraded=tuple(scrub_credentials(d) for d in rec.degraded),
        partial=rec.partial,
        tokenizer=cfg.budget.tokenizer,
        text=text,
    )
    _send(memory, event)
    return RenderResult(text, rendered, event.trace, event)


def _send(sender: Memory, event: MemoryRecall) -> None:
    if not memory_recall.receivers:
        return
    for receiver in memory_recall.receivers_for(sender):
        try:
            receiver(sender, event=event)
        except Exception:  # noqa: BLE001 - observers never steer behaviour, nor break the turn
            _log.exception("memory_recall receiver %r raised", receiver)
