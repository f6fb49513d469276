"""A token's postings in the keyword mirror: read from the index's instances, or made
from a changed row's counts, each distinct pair kept once.

A posting is what the mirror knows of a token in a row: its weighted count
(``bm25()``'s column weights, dyadic, so any order of summing gives the same
bits) and a bit per text column it is in (what it proves for the coverage
score, :func:`present_weight`). :mod:`.keyword_index` holds them per token.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_inject.storage.sqlite.keyword_phrases import BM25_WEIGHTS, COVERAGE_WEIGHTS
from memory_inject.storage.sqlite.keyword_terms import COLUMN_NAMES

__all__ = [
    "INSTANCES_SELECT",
    "MAX_PAIRS",
    "SCOPE_COL",
    "Posting",
    "posting_of",
    "postings_of_instances",
    "present_weight",
    "shared",
]

#: The ``ctx_scope`` column's position, by the names fts5vocab reports.
SCOPE_COL = COLUMN_NAMES.index("ctx_scope")

#: One posting: (the token's weighted count in the row, a bit per text column it is in).
Posting = tuple[float, int]


#: One token's instances, one row each: ``(doc, col)`` of an ``fts5vocab`` instance table
#: (``{table}`` is filled in by the caller). Asking one token at a time, without the
#: ``term`` column, halves the read: most of its cost is the columns' values.
INSTANCES_SELECT = "SELECT doc, col FROM {table} WHERE term = ?"
#: Per column name: its bm25() weight and its bit in a posting's text-column mask.
_COLUMN_PAIR = {
    c: (BM25_WEIGHTS[i], 0 if i == SCOPE_COL else 1 << i) for i, c in enumerate(COLUMN_NAMES)
}


def postings_of_instances(
    instances: Iterable[tuple[int, str]], most: int
) -> dict[int, Posting] | None:
    """One token's postings, :func:`posting_of` per row to the bit, from the rows of
    :data:`INSTANCES_SELECT`; None once more than ``most`` instances came (the
    caller stops reading: FTS5 answers a query that common).

    The weights are dyadic, so the sum is :func:`posting_of`'s whatever the order.
    """
    out: dict[int, Posting] = {}
    pair = _COLUMN_PAIR
    for seen, (doc, col) in enumerate(instances):
        if seen >= most:
            return None
        weight, bit = pair[col]
        old = out.get(doc)
        out[doc] = (weight, bit) if old is None else (old[0] + weight, old[1] | bit)
    return out


#: Each distinct posting, kept once: a store's postings are a few dozen distinct pairs
#: (a weighted count of a few instances, a few columns), so a posting costs its dict slot
#: rather than a tuple and a float (84 bytes; ``benchmarks/keyword_kept.py``).
_PAIRS: dict[Posting, Posting] = {}
#: The most pairs kept (a row repeating a word n times makes one more).
MAX_PAIRS = 4096


def shared(pair: Posting) -> Posting:
    """``pair``, or the equal one already kept."""
    got = _PAIRS.get(pair)
    if got is not None:
        return got
    if len(_PAIRS) < MAX_PAIRS:
        _PAIRS[pair] = pair
    return pair


def posting_of(per_col: list[int]) -> Posting:
    """``(weighted count, text-column mask)`` from a token's instances per column."""
    f, mask = 0.0, 0
    for col, n in enumerate(per_col):
        if n:
            f += BM25_WEIGHTS[col] * n  # dyadic weights: the same sum as one per instance
            if col != SCOPE_COL:
                mask |= 1 << col
    return shared((f, mask))


#: What a hit in each text column proves (``COVERAGE_WEIGHTS``), per column mask.
_MASK_WEIGHTS: dict[int, float] = {}


def present_weight(posting: Posting | None) -> float:
    """The best coverage weight among the columns a posting's token is in."""
    if posting is None:
        return 0.0
    mask = posting[1]
    weight = _MASK_WEIGHTS.get(mask)
    if weight is None:
        weight = max((w for c, w in enumerate(COVERAGE_WEIGHTS) if mask >> c & 1), default=0.0)
        _MASK_WEIGHTS[mask] = weight
    return weight
