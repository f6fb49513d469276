"""The mirror's ranking of one query: bm25() of the rows holding a query token, best first.

:func:`ranking` adds up each token's cached bm25() terms
(:meth:`~.keyword_index.MirrorIndex.shares`) and hands out the best rows in
FTS5's order, score then id, as many as the caller asks for. With numpy the
terms are summed over arrays of row slots (a few microseconds a token,
whatever its number of rows) and the best rows found by a partition; without
it, or on an index of fewer than :data:`ARRAY_MIN_ROWS` rows, over dicts.
Both add the same terms in the same order, so the scores are the same to the
bit (a test holds the two, and FTS5, together).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, Protocol

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.sqlite.keyword_index import MirrorIndex, bm25_scores

__all__ = ["ARRAY_MIN_ROWS", "Ranking", "ranking"]

#: Indexes of fewer rows rank over dicts: numpy's fixed cost (tens of microseconds a
#: query) is more than the dict walks it saves (``benchmarks/keyword_sizes.py``).
ARRAY_MIN_ROWS = 200


class Ranking(Protocol):
    """The rows holding one of a query's tokens (in the scope), with their bm25()."""

    def __len__(self) -> int:
        """How many rows hold one of the tokens."""
        ...

    def best(self, m: int) -> list[int]:
        """The ``m`` best rids (or all), by score then id."""
        ...

    def score(self, rid: int) -> float:
        """The bm25() of a rid :meth:`best` returned."""
        ...


def ranking(
    index: MirrorIndex,
    phrases: Sequence[str],
    scope_tokens: tuple[str, ...] | None,
) -> Ranking:
    """The :class:`Ranking` of ``phrases`` over ``index`` (only the rows of the session
    ``scope_tokens`` name, when given: what ANDing the scope's MATCH does)."""
    np = numpy_or_none() if len(index.ids) >= ARRAY_MIN_ROWS else None
    if np is None:
        allowed = None if scope_tokens is None else index.in_scope(scope_tokens)
        return _DictRanking(bm25_scores(index, phrases, allowed), index.ids)
    return _ArrayRanking(index, phrases, scope_tokens, np)


class _DictRanking:
    __slots__ = ("_ids", "_scores")

    def __init__(self, scores: dict[int, float], ids: dict[int, str]) -> None:
        self._scores = scores
        self._ids = ids

    def __len__(self) -> int:
        return len(self._scores)

    def best(self, m: int) -> list[int]:
        scores, ids = self._scores, self._ids
        if len(scores) > 2 * m:
            cut = heapq.nlargest(m, scores.values())[-1]
            pool = [r for r, sc in scores.items() if sc >= cut]
        else:
            pool = list(scores)
        pool.sort(key=lambda r: (-scores[r], ids[r]))
        return pool[:m]

    def score(self, rid: int) -> float:
        return self._scores[rid]


class _ArrayRanking:
    __slots__ = ("_ids", "_rid", "_scores", "_slots", "_values")

    def __init__(
        self, index: MirrorIndex, phrases: Sequence[str], scope: tuple[str, ...] | None, np: Any
    ) -> None:
        size = len(index.slot_rid)
        total = np.zeros(size, dtype=np.float64)
        held = np.zeros(size, dtype=bool)
        for token in phrases:  # in order, as bm25_scores adds them: the same sums
            slots, terms = index.share_arrays(token, np)
            total[slots] += terms
            held[slots] = True
        if scope is not None:
            held &= index.scope_mask(scope, np)
        self._slots = np.flatnonzero(held)
        self._values = total[self._slots]
        self._rid = index.slot_rid
        self._ids = index.ids
        self._scores: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def best(self, m: int) -> list[int]:
        values, slots = self._values, self._slots
        n = len(values)
        if n > 2 * m:
            cut = values[values.argpartition(n - m)[n - m]]
            keep = values >= cut
            values, slots = values[keep], slots[keep]
        rid, ids = self._rid, self._ids
        pairs = [(rid[s], v) for s, v in zip(slots.tolist(), values.tolist(), strict=True)]
        pairs.sort(key=lambda p: (-p[1], ids[p[0]]))
        pairs = pairs[:m]
        self._scores.update(pairs)
        return [r for r, _ in pairs]

    def score(self, rid: int) -> float:
        return self._scores[rid]
