"""The stage chain, as data: in which order entries are dropped, and by whom.

:func:`build_stages` turns a resolved config into the named stages a render
runs, in order, each configured at construction::

    session_scope           rows bound to other sessions (``foreign_session``)
    [governance stages]     memory.governance.enabled: status, profile, project,
                            positive applicability, negative scope (PI's reasons),
    [routed_scope]          then the same scope stages over routed (contested) entries
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

import weakref
from collections.abc import Sequence

from attrs import frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.stages._base import Stage, StageContext, StageResult, StageTrace, format_score
from memory_inject.stages.filters import (
    Decay,
    RelevanceFilter,
    conversation_exclusion,
    decay,
    eligibility_reason,
    relevance_filter,
    session_scope,
    should_skip_entry,
    skip_reason,
    skip_set,
)
from memory_inject.stages.governance import RoutedScope, build_governance
from memory_inject.stages.rerank import Rerank, rerank

__all__ = [
    "ARM_NAMES",
    "Decay",
    "NamedStage",
    "RelevanceFilter",
    "Rerank",
    "RoutedScope",
    "Stage",
    "StageContext",
    "StageResult",
    "StageTrace",
    "build_stages",
    "conversation_exclusion",
    "decay",
    "eligibility_reason",
    "format_score",
    "relevance_filter",
    "rerank",
    "session_scope",
    "should_skip_entry",
    "skip_reason",
    "skip_set",
    "stages_for",
]

#: The trace names of the two arms; their traces carry the scores after the arm.
ARM_NAMES = frozenset({"decay", "rerank"})


@frozen
class NamedStage:
    """One stage of the chain and the name its trace carries."""

    name: str
    stage: Stage


def build_stages(config: MemoryInjectConfig) -> tuple[NamedStage, ...]:
    """The named stages a render with ``config`` runs, in order (see the module docstring)."""
    chain = [NamedStage("session_scope", session_scope)]
    gov = config.governance
    if gov.enabled:
        governance = tuple(build_governance(gov.stages, min_token_length=gov.min_token_length))
        chain.extend(NamedStage(name, stage) for name, stage in governance)
        chain.append(NamedStage("routed_scope", RoutedScope(governance)))
    if config.rerank.enabled:
        arm = NamedStage(
            "rerank", Rerank(config.rerank, config.recall_limit, config.min_relevance_score)
        )
    else:
        arm = NamedStage("decay", Decay(config.decay.half_life_days))
    chain.extend(
        (
            arm,
            NamedStage("relevance_filter", RelevanceFilter(config.min_relevance_score)),
            NamedStage("conversation_exclusion", conversation_exclusion),
            NamedStage("skip_set", skip_set),
        )
    )
    return tuple(chain)


# Built once per config object: configs are immutable, and a render must not
# pay for building its chain. Keyed by identity, dropped with the config.
_BUILT: dict[int, tuple[weakref.ref[MemoryInjectConfig], tuple[NamedStage, ...]]] = {}


def stages_for(config: MemoryInjectConfig) -> Sequence[NamedStage]:
    """:func:`build_stages` for ``config``, cached for the life of the config object."""
    hit = _BUILT.get(id(config))
    if hit is not None and hit[0]() is config:
        return hit[1]
    built = build_stages(config)
    key = id(config)
    _BUILT[key] = (weakref.ref(config, lambda _ref: _BUILT.pop(key, None)), built)
    return built
