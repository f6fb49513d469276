"""Function forms of stages that production builds as configured objects, for direct calls in tests.

``build_stages`` configures each stage once per config; these helpers configure one from a
context's config on every call, which only tests want (they moved here from the stage modules).
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.models import MemoryEntry
from memory_inject.stages import Rerank, StageContext, StageResult
from memory_inject.stages._dedupe import Candidates


def rerank(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """:class:`Rerank` configured from the context's config."""
    cfg = ctx.config
    return Rerank(cfg.rerank, cfg.recall_limit, cfg.min_relevance_score)(ctx, entries)


def collapse(
    entries: Sequence[MemoryEntry], scores: Sequence[float], threshold: float
) -> tuple[list[int], dict[int, int]]:
    """The spec's ``collapse`` on its own: kept indices and ``{dropped: duplicated}``."""
    order = sorted(range(len(entries)), key=lambda i: -scores[i])
    dropped: dict[str, str] = {}
    cands = Candidates(entries, order, threshold, False, dropped)
    while cands.get(len(cands.kept)) is not None:
        pass
    by_key = {e.key: i for i, e in enumerate(entries)}
    dups = {
        by_key[k]: by_key[r.removeprefix("duplicate_of:")]
        for k, r in dropped.items()
        if r.startswith("duplicate_of:")
    }
    return cands.kept, dups
