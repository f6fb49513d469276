"""The stage chain, as data: in which order entries are dropped, and by whom.

:func:`build_stages` turns a resolved config into the named stages a render
runs, in order, each configured at construction::

    (threat_scan)           run by the recall step, not listed here: rows that read as
                            instructions to the model (``threat:<rule>`` on the recall
                            trace), the store asked again for as many (``threat.py``)
    session_scope           the scope rule (docs/storage.md): other sessions' rows,
                            and in a mixed list unshared sessionless rows
    [prompt_gate]           min_prompt_similarity: every scored entry when the row
                            nearest the prompt, by the store's embedder, is under it
    [governance stages]     memory.governance.enabled: status, profile, project,
                            positive applicability, negative scope (PI's reasons);
                            renderer sectioned alone: status and profile,
    [routed_scope]          then the same scope stages over routed (contested) entries,
                            and the conversation exclusion and skip set below
    decay | rerank          the arm: time decay, or blend + duplicate collapse + MMR
    relevance_filter        scored entries under min_relevance_score
    conversation_exclusion  ``conversation`` rows when the policy excludes them
    skip_set                autosaves, history blobs, image markers, tool results
    (renderer)              entry cap, truncation, char and token budgets, the block

The renderer is the last stage (``memory_inject.render``). A stage is
``stage(ctx, entries) -> StageResult`` and pure; add one by writing it in a
module here, naming it in :func:`build_stages`, and copying a test from
``tests/test_stages.py``.
"""

from __future__ import annotations

import math

from attrs import frozen

from memory_inject._cache import PerObject
from memory_inject.config import MemoryInjectConfig
from memory_inject.stages._base import Stage, StageContext, StageResult, StageTrace, format_score
from memory_inject.stages.filters import (
    UNRELATED_PROMPT,
    Decay,
    PromptGate,
    RelevanceFilter,
    conversation_exclusion,
    eligibility_reason,
    session_scope,
    should_skip_entry,
    skip_reason,
    skip_set,
)
from memory_inject.stages.governance import RoutedScope, StatusFilter, build_governance
from memory_inject.stages.rerank import Rerank
from memory_inject.stages.threat import ThreatScan, threat_scan_for

__all__ = [
    "UNRELATED_PROMPT",
    "Decay",
    "NamedStage",
    "PromptGate",
    "RelevanceFilter",
    "Rerank",
    "RoutedScope",
    "Stage",
    "StageContext",
    "StageResult",
    "StageTrace",
    "ThreatScan",
    "build_stages",
    "conversation_exclusion",
    "eligibility_reason",
    "format_score",
    "governed",
    "recall_restriction",
    "session_scope",
    "should_skip_entry",
    "skip_reason",
    "skip_set",
    "stages_for",
    "threat_scan_for",
]


@frozen
class NamedStage:
    """One stage of the chain, the name its trace carries, and whether it records scores."""

    name: str
    stage: Stage
    #: The arm's trace carries the scores after it (what the relevance floor then sees).
    scored: bool = False


#: The stages ``renderer: sectioned`` runs even with governance off: its sections
#: read ``status`` and ``profile_id``, so a deprecated, contested or
#: other-profile record must never reach them as ordinary Selected Memory.
SECTIONED_FLOOR: tuple[str, ...] = ("status", "profile")


def governed(config: MemoryInjectConfig) -> bool:
    """True when a render with ``config`` runs governance stages (and needs the profile)."""
    return config.governance.enabled or config.renderer.kind == "sectioned"


def _governance_names(config: MemoryInjectConfig) -> tuple[str, ...]:
    gov = config.governance
    return gov.stages if gov.enabled else SECTIONED_FLOOR if governed(config) else ()


def recall_restriction(
    config: MemoryInjectConfig, profile_id: str | None
) -> tuple[tuple[str, ...] | None, tuple[str | None, ...] | None]:
    """``(statuses, profiles)`` a governed turn's recall keeps before it ranks (PI's order).

    The status stage keeps active rows and routes contested ones, so recall
    keeps those two statuses; the profile stage keeps the turn's profile and
    unbound rows (only unbound ones when the turn has no profile). None where
    the stage does not run. The stages still run after recall, so a store
    that ignores the restriction renders the same block, only from fewer rows.
    """
    names = {n.strip().lower() for n in _governance_names(config)}
    statuses = profiles = None
    if "status" in names:
        rule = StatusFilter()
        statuses = (*rule.active, *rule.route)
    if "profile" in names:
        profiles = (None,) if profile_id is None else (profile_id, None)
    return statuses, profiles


def build_stages(config: MemoryInjectConfig) -> tuple[NamedStage, ...]:
    """The named stages a render with ``config`` runs, in order (see the module docstring)."""
    chain = [NamedStage("session_scope", session_scope)]
    if config.min_prompt_similarity is not None:
        gate = PromptGate(config.min_prompt_similarity, config.prompt_gate_bypass_score)
        chain.append(NamedStage("prompt_gate", gate))
    gov = config.governance
    names = _governance_names(config)
    if names:
        governance = tuple(build_governance(names, min_token_length=gov.min_token_length))
        chain.extend(NamedStage(name, stage) for name, stage in governance)
        # Routed (contested) entries are shown too: they face the scope stages, and what
        # every block leaves out (a conversation the turn may not see, the skip set).
        leave_out = (
            ("conversation_exclusion", conversation_exclusion),
            ("skip_set", skip_set),
        )
        chain.append(NamedStage("routed_scope", RoutedScope((*governance, *leave_out))))
    if config.rerank.enabled:
        arm = NamedStage(
            "rerank",
            Rerank(config.rerank, config.recall_limit, config.min_relevance_score),
            scored=True,
        )
    else:
        half_life = config.decay.half_life_days if config.decay.enabled else math.inf
        arm = NamedStage("decay", Decay(half_life), scored=True)
    chain.extend(
        (
            arm,
            NamedStage(
                "relevance_filter",
                RelevanceFilter(config.min_relevance_score, config.min_companion_score),
            ),
            NamedStage("conversation_exclusion", conversation_exclusion),
            NamedStage("skip_set", skip_set),
        )
    )
    return tuple(chain)


#: :func:`build_stages` for a config, built once for the life of the config object.
stages_for: PerObject[MemoryInjectConfig, tuple[NamedStage, ...]] = PerObject(build_stages)
