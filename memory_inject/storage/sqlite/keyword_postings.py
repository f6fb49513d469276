"""A token's postings in the keyword mirror: read from the index's instances, or made
from a changed row's counts, each distinct pair kept once.

A posting is what the mirror knows of a token in a row: its weighted count
(``bm25()``'s column weights, dyadic, so any order of summing gives the same
bits) and a bit per text column it is in (what it proves for the coverage
score, :func:`present_weight`). :mod:`.keyword_index` holds them per token.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Iterable
from typing import Any

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.sqlite.keyword_phrases import (
    BM25_WEIGHTS,
    COVERAGE_WEIGHTS,
    DAY_COLUMN,
)
from memory_inject.storage.sqlite.keyword_terms import COLUMN_NAMES

__all__ = [
    "DAY_BIT",
    "INSTANCES_SELECT",
    "MAX_PAIRS",
    "SCOPE_COL",
    "STREAMED",
    "Posting",
    "posting_of",
    "postings_of_instances",
    "present_weight",
    "read_postings",
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


#: A token's first this many instances are read as rows (see :func:`read_postings`).
STREAMED = 1024
#: The same instances as one string of ``doc * 8 + column`` codes, at most ``?`` of them
#: after the first ``?`` (those were read as rows):
#: numpy parses it in C, where a row each costs the sqlite3 module about 0.5 us.
_CODES_SELECT = (
    "SELECT group_concat(x) FROM (SELECT doc * 8 + CASE col "  # noqa: S608 - our column names
    + " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(COLUMN_NAMES))
    + " END AS x FROM {table} WHERE term = ? LIMIT ? OFFSET ?)"
)


def read_postings(
    conn: sqlite3.Connection, table: str, token: str, most: int
) -> dict[int, Posting] | None:
    """:func:`postings_of_instances` of ``token``'s instances in the ``fts5vocab`` instance
    ``table``, the same pairs to the bit; None past ``most`` instances.

    The first :data:`STREAMED` instances come as rows, and with numpy the rest of a
    common token's as one string, summed per row in arrays: about 0.4 us an instance
    against 0.6 as rows (a common word's first read is inside a turn), for a fixed
    cost that a few hundred rows repay. Without numpy, all come as rows.
    """
    rows = conn.execute(INSTANCES_SELECT.format(table=table), (token,))
    first = rows.fetchmany(STREAMED)  # a list: cheaper than a row at a time
    if len(first) < STREAMED:
        return postings_of_instances(first, most)
    np = numpy_or_none()
    if np is None:
        return postings_of_instances(itertools.chain(first, rows), most)
    rows.close()
    head = postings_of_instances(first, most)
    if head is None:
        return None
    sql = _CODES_SELECT.format(table=table)
    text = conn.execute(sql, (token, most + 1 - len(first), len(first))).fetchone()[0]
    codes = np.fromstring(text or "", dtype=np.int64, sep=",")
    if len(codes) + len(first) > most:
        return None
    if not len(codes):
        return head
    docs, cols = codes >> 3, codes & 7
    # Each run of one row's instances (a doclist is in row order, so one run a row).
    starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
    weights, bits = _column_arrays()
    f = np.add.reduceat(weights[cols], starts)  # dyadic: the same sum in any order
    mask = np.bitwise_or.reduceat(bits[cols], starts)
    # Plain pairs, as the rows give: ``MirrorIndex.load`` shares them as it keeps them.
    get = head.get
    for d, w, m in zip(docs[starts].tolist(), f.tolist(), mask.tolist(), strict=True):
        old = get(d)  # a row the first instances began (or an earlier run of it)
        head[d] = (w, m) if old is None else (old[0] + w, old[1] | m)
    return head


@functools.cache
def _column_arrays() -> tuple[Any, Any]:
    """Each column's bm25() weight and mask bit, by column number, as numpy arrays."""
    np = numpy_or_none()
    pairs = [_COLUMN_PAIR[c] for c in COLUMN_NAMES]
    weights = np.array([w for w, _ in pairs], dtype=np.float64)
    return weights, np.array([b for _, b in pairs], dtype=np.int64)


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


#: A posting's bit for the day words (``keyword_phrases.DAY_COLUMN``).
DAY_BIT = 1 << DAY_COLUMN

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
