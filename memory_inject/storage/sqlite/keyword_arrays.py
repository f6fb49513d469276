"""The mirror's ranking of one query: bm25() of the rows holding a query token, best first.

:func:`ranking` adds up each token's bm25() terms and hands out the best rows
in FTS5's order, score then id, as many as the caller asks for. With numpy
(:class:`IndexArrays`) each row has a slot, each loaded token its slots and
weighted counts as arrays kept current through writes, and its terms are
computed over them (a few microseconds a token after a write, whatever its
number of rows), summed, and the best rows found by a partition; without
numpy, or on an index of fewer than :data:`ARRAY_MIN_ROWS` rows, the terms are
:meth:`~.keyword_index.MirrorIndex.shares` dicts. Both compute the same
terms with the same operations in the same order, so the scores are the same
to the bit (a test holds the two, and FTS5, together).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.calibration import fts5_idf
from memory_inject.storage.sqlite.keyword_index import MirrorIndex, bm25_scores, bm25_term

__all__ = ["ARRAY_MIN_ROWS", "IndexArrays", "Ranking", "ranking"]

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
    if index.arrays is None:
        index.arrays = IndexArrays(index, np)
    return _ArrayRanking(index, index.arrays, phrases, scope_tokens, np)


class IndexArrays:
    """A :class:`~.keyword_index.MirrorIndex` as numpy arrays, told of its every change.

    A row keeps its slot while it is held (renumbered when dropped rows
    outnumber the held ones); ``_sizes`` holds each slot's length. A token's
    ``(slots, weighted counts)`` are built from its postings once and then
    follow the rows added and dropped; its terms, which move with every row
    (the idf, the average length), are recomputed from them after a change.
    """

    __slots__ = ("_masks", "_np", "_postings", "_sizes", "_terms", "slot", "slot_rid")

    def __init__(self, index: MirrorIndex, np: Any) -> None:
        """Slots for every row ``index`` holds; no token's arrays yet."""
        self._np = np
        # A token's (slots, weighted counts, how many): arrays with room to append into.
        self._postings: dict[str, list[Any]] = {}
        self._terms: dict[str, tuple[Any, Any]] = {}
        self._masks: dict[tuple[str, ...], Any] = {}
        self._renumber(index)

    def _renumber(self, index: MirrorIndex) -> None:
        self.slot = {r: i for i, r in enumerate(index.ids)}
        self.slot_rid = list(index.ids)
        self._sizes = self._np.zeros(max(64, 2 * len(self.slot_rid)), dtype=self._np.float64)
        for i, rid in enumerate(self.slot_rid):
            self._sizes[i] = index.size[rid]
        self._postings.clear()
        self._terms.clear()
        self._masks.clear()

    # -- told by the index -------------------------------------------------

    def row_set(self, index: MirrorIndex, rid: int, size: int) -> None:
        """Row ``rid`` was (re)written with length ``size``."""
        self._terms.clear()
        if rid not in self.slot:
            if len(self.slot_rid) > 2 * len(index.ids) + 1024:  # mostly dropped rows
                self._renumber(index)  # (it holds ``rid`` already)
                return
            self.slot[rid] = len(self.slot_rid)
            self.slot_rid.append(rid)
            if len(self.slot_rid) > len(self._sizes):
                grown = self._np.zeros(2 * len(self._sizes), dtype=self._np.float64)
                grown[: len(self._sizes)] = self._sizes
                self._sizes = grown
        self._sizes[self.slot[rid]] = size
        self._mark(index, self.slot[rid], rid)

    def row_removed(self, rid: int, tokens: Iterable[str]) -> None:
        """Row ``rid`` was dropped from the postings of ``tokens``."""
        self._terms.clear()
        at = self.slot.get(rid)  # its masks' bits stay: no posting ranks it now
        for token in tokens:
            cached = self._postings.get(token)
            if cached is not None:
                slots, f, n = cached
                keep = slots[:n] != at
                cached[0], cached[1], cached[2] = slots[:n][keep], f[:n][keep], int(keep.sum())

    def posting_set(self, token: str, rid: int, weighted: float, new: bool) -> None:
        """``token``'s posting of row ``rid`` is now ``weighted`` (``new``: it had none)."""
        cached = self._postings.get(token)
        if cached is None:
            return
        if not new:
            del self._postings[token]  # read again from the postings when asked
            return
        slots, f, n = cached
        if n == len(slots):  # full: twice the room (np.append copied the arrays every write)
            slots, f = self._np.resize(slots, 2 * n + 8), self._np.resize(f, 2 * n + 8)
            cached[0], cached[1] = slots, f
        slots[n], f[n] = self.slot[rid], weighted
        cached[2] = n + 1

    def _mark(self, index: MirrorIndex, slot: int, rid: int) -> None:
        """Keep each scope mask current for the row written at ``slot``, rather than build
        them all again after every write (a session's rows, each time)."""
        for key in self._masks:
            mask = self._masks[key]
            if slot >= len(mask):
                grown = self._np.zeros(max(64, 2 * len(mask), slot + 1), dtype=bool)
                grown[: len(mask)] = mask
                self._masks[key] = mask = grown
            mask[slot] = rid in index.in_scope(key)

    def token_changed(self, token: str) -> None:
        """``token``'s postings were read anew or dropped: its arrays go."""
        self._postings.pop(token, None)
        self._terms.pop(token, None)

    # -- asked by the ranking ----------------------------------------------

    def terms(self, index: MirrorIndex, token: str) -> tuple[Any, Any]:
        """``token``'s slots and bm25() terms: :meth:`~.keyword_index.MirrorIndex.shares`
        as arrays, computed with the same operations in the same order."""
        cached = self._terms.get(token)
        if cached is None:
            np = self._np
            held = self._postings.get(token)
            if held is None:
                posting = index.postings.get(token) or {}
                slot = self.slot
                held = self._postings[token] = [
                    np.fromiter((slot[r] for r in posting), np.intp, len(posting)),
                    np.fromiter((p[0] for p in posting.values()), np.float64, len(posting)),
                    len(posting),
                ]
            slots, f = held[0][: held[2]], held[1][: held[2]]
            n = len(index.ids)
            avgdl = index.total / n if n else 1.0
            idf = fts5_idf(n, len(slots))
            lengths = self._sizes[slots]
            cached = (slots, bm25_term(idf, f, lengths, avgdl))
            self._terms[token] = cached
        return cached

    def scope_mask(self, index: MirrorIndex, scope_tokens: tuple[str, ...]) -> Any:
        """:meth:`~.keyword_index.MirrorIndex.in_scope` as a boolean array over the slots."""
        mask = self._masks.get(scope_tokens)
        if mask is None:
            np = self._np
            mask = np.zeros(len(self.slot_rid), dtype=bool)
            rows = index.in_scope(scope_tokens)
            slot = self.slot
            mask[np.fromiter((slot[r] for r in rows), np.intp, len(rows))] = True
            if len(self._masks) >= 64:
                self._masks.clear()
            self._masks[scope_tokens] = mask
        return mask[: len(self.slot_rid)]


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
        self,
        index: MirrorIndex,
        arrays: IndexArrays,
        phrases: Sequence[str],
        scope: tuple[str, ...] | None,
        np: Any,
    ) -> None:
        size = len(arrays.slot_rid)
        total = np.zeros(size, dtype=np.float64)
        held = np.zeros(size, dtype=bool)
        for token in phrases:  # in order, as bm25_scores adds them: the same sums
            slots, terms = arrays.terms(index, token)
            total[slots] += terms
            held[slots] = True
        if scope is not None:
            held &= arrays.scope_mask(index, scope)
        self._slots = np.flatnonzero(held)
        self._values = total[self._slots]
        self._rid = arrays.slot_rid
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
