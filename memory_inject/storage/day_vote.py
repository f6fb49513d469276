"""Which of a recall's candidates to return: the day where its matches gather counts.

A store's keyword stage ranks a window of candidates (twice the rows asked for) by their
calibrated scores and returned the best of them. A question's evidence is often several
turns of one conversation on one day ("What did Melanie's kids like at the museum?"),
each turn holding a few of its words, while single rows elsewhere hold the same few
words by chance. :func:`pick_by_day` chooses the rows to return by their score plus
:data:`DAY_VOTE` times their day's share of the window's scores (the day of the row's
session: ``(session_id, date)``; rows without a session group by date), so a row of the
day where the matches gather wins a close call against a lone row of another day.

Only *which* rows are returned changes, and only in their lower half: the best half
(rounded up) stand on their own scores, every row keeps its calibrated score, and they
come in the order the store ranked them (best first). So the best row is always
returned and whether a prompt injects anything, at any floor, is as before. It is the
query-time form of a per-session digest: the day's evidence summed over the window
instead of a digest row written and kept current at write time.

LoCoMo dev (``benchmarks/relevance.py``, docs/performance.md, issue 29, eleventh round):
R@10 0.771 -> 0.800 on SQLite, R@5 and block recall unchanged; weights 0.1 to 0.5 were
measured (0.790, 0.800, 0.802, 0.802).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

# The core owns these (its relevance filter reads them); storage re-exports them here.
from memory_inject.models import STANDALONE_SOURCES, day_key
from memory_inject.storage.fusion import Fusion

__all__ = [
    "DAY_VOTE",
    "NEAR_MINUTES",
    "STANDALONE_SOURCES",
    "by_score",
    "day_key",
    "pick_by_day",
    "standalone_sql",
]

#: How much a row's day weighs against its own score when the rows are chosen: the day's
#: summed score over the best day's, times this.
DAY_VOTE = 0.2
#: How far back a sessionless record written alone (no session, no event)
#: takes its *near* neighbours as context, on both engines (SQLite's
#: ``ddl._NEAR_NEIGHBOUR``, PostgreSQL's ``context.fill_near``): the records
#: of its namespace, category and profile written in the 30 minutes before it.
#: A session's two records before a record are its context only when written
#: within this of it, either way (SQLite's ``ddl_context._NEIGHBOUR``, PostgreSQL's
#: ``context._WITHIN``): a long-lived session's facts days apart are not.
NEAR_MINUTES = 30


def standalone_sql(row: str) -> str:
    """SQL that is true for a row (``row``: its alias) one of :data:`STANDALONE_SOURCES` wrote."""
    return f"coalesce({row}.source, '') IN ({', '.join(repr(s) for s in STANDALONE_SOURCES)})"


def by_score(fusion: Fusion, keyword: bool, vector: bool) -> bool:
    """Whether ``fuse`` orders these hits by their scores (so :func:`pick_by_day` may
    choose among them): one modality, or both with ``"weighted"`` or ``"max"`` fusion
    (``"rrf"`` and ``"minmax"`` order by ranks and raw scores, and are left as they are)."""
    return not (keyword and vector) or fusion.mode not in ("rrf", "minmax")


def pick_by_day(
    ranked: Sequence[tuple[str, float]],
    days: Sequence[Hashable],
    limit: int,
    weight: float | None = None,
) -> list[tuple[str, float]]:
    """``limit`` of ``ranked`` (``(id, score)``, best first), chosen with their day's vote.

    Returns them in ``ranked``'s order with their own scores. ``days`` is each row's day
    (:func:`day_key`), in ``ranked``'s order; ``weight`` defaults to :data:`DAY_VOTE`.
    Fewer than ``limit + 1`` candidates, no weight, one day or no positive score: the
    first ``limit``, as before.
    """
    if limit <= 0:
        return []
    weight = DAY_VOTE if weight is None else weight
    if len(ranked) <= limit or weight <= 0.0:
        return list(ranked[:limit])
    total: dict[Hashable, float] = {}
    for day, (_, score) in zip(days, ranked, strict=True):
        total[day] = total.get(day, 0.0) + (score if score > 0.0 else 0.0)
    best = max(total.values())
    if best <= 0.0 or len(total) == 1:  # one day: every vote is the same
        return list(ranked[:limit])
    keep = (limit + 1) // 2  # the best half stand on their own scores
    scale = weight / best
    voted = [-(score + scale * total[day]) for (_, score), day in zip(ranked, days, strict=True)]
    # sorted() is stable: equal votes keep the store's order.
    chosen = set(sorted(range(keep, len(ranked)), key=voted.__getitem__)[: limit - keep])
    return [*ranked[:keep], *(ranked[j] for j in range(keep, len(ranked)) if j in chosen)]
