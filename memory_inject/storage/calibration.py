"""Calibrated relevance: one 0..1 scale for every recall path of every store.

A score means the same thing from query to query: the same memory and prompt
score the same whether or not other memories were found, so the renderer's
floor (``min_relevance_score``) reads as "relevant enough to show".

**Keyword** (:func:`coverage`): the weighted share of the query's content
terms the row holds, mapped so that the measured operating point reads as
the default floor (:data:`OPERATING_POINT`). Each term weighs
:func:`term_weight`, its idf among the store's rows (at least 1), so a rare
word counts more than a common one and a prompt about something the store
never mentions scores low even when one common word matches. A term no row
holds weighs :data:`ABSENT_WEIGHT` times more: the store cannot answer a
question about something it never mentions ("where do production deploys
go?" against "Bob likes to go hiking on weekends": "go" weighs 1, the two
absent words 1.5 each, a share and score of 0.25). A term found in the row's key, content, tags
or day words counts fully; found only in the record written just before it
in its session, half; two records back, a quarter. A hit that holds none of the
query's words itself, found through its neighbours' words alone, scores
:data:`CONTEXT_ONLY` of that share, so at the default floor it is never shown.
The stores still *rank* keyword hits by BM25 (ties in coverage keep that order): coverage says
whether a hit is relevant enough to show, BM25 which of several is best.

**Vector** (:func:`vector_score`): cosine similarity mapped linearly from the
embedder's ``calibration = (unrelated, related)`` pair to 0..1, clamped. An
embedder without that attribute is read as ``(0.0, 1.0)``: raw cosine.

**Hybrid** (:func:`hybrid_score`): the weighted mean of both, a modality that
did not find the row counting 0 (its evidence is that the row is not among
its best), so rows both stages find rank first.

**Substring fallback** (:func:`substring_score`): ``SUBSTRING_WEIGHT`` times
the share of query words found inside the row, for scripts the word
tokenizer cannot split (CJK). Words shorter than ``MIN_SUBSTRING_CHARS`` are
never searched this way ("hi" is inside "hiking"), nor words of a script written with
spaces shorter than ``MIN_WORD_SUBSTRING_CHARS`` ("car" is inside "Oscar").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "ABSENT_WEIGHT",
    "CONTEXT_ONLY",
    "MAX_SUBSTRING_CHARS",
    "MIN_SUBSTRING_CHARS",
    "MIN_WORD_SUBSTRING_CHARS",
    "NAMED_ABSENT_WEIGHT",
    "OPERATING_POINT",
    "SUBSTRING_WEIGHT",
    "coverage",
    "dated_coverage",
    "fts5_idf",
    "grouped",
    "hybrid_score",
    "is_number",
    "named_weights",
    "smoothed_idf",
    "substring_score",
    "term_weight",
    "vector_score",
]

#: A substring hit counts this much of a whole-word hit.
SUBSTRING_WEIGHT = 0.6
#: Query words shorter than this are not searched as substrings.
MIN_SUBSTRING_CHARS = 3
#: Nor are words of a script written with spaces shorter than this. The fallback runs when
#: no row holds any query word as a word; then a short word found inside a longer one is
#: mostly chance ("car" in "Oscar" and "cardiologist" put a block under "what colour is my
#: car?", benchmarks/facts.py), while a longer one is a compound or an identifier
#: ("versicherung" in "Hausratversicherung", "serv" in "server"). Runs of CJK, Thai, Lao,
#: Khmer or Myanmar letters, which the tokenizer cannot split, keep the shorter bound.
MIN_WORD_SUBSTRING_CHARS = 4
#: Longer words are not searched as substrings (a pasted blob would cost O(n*m)).
MAX_SUBSTRING_CHARS = 64

# FTS5 floors a non-positive idf (a term in more than half of the rows) at 1e-6.
_IDF_FLOOR = 1e-6


def fts5_idf(rows: int, containing: int) -> float:
    """FTS5's idf: ``ln((N - n + 0.5) / (n + 0.5))``, floored at 1e-6 like ``bm25()``."""
    value = math.log((rows - containing + 0.5) / (containing + 0.5)) if rows > 0 else 0.0
    return value if value > 0.0 else _IDF_FLOOR


def smoothed_idf(rows: int, containing: int) -> float:
    """Okapi's idf with +1 inside the log (never negative), for in-process BM25."""
    return math.log(1.0 + (rows - containing + 0.5) / (containing + 0.5))


#: How much more a query term that no row holds counts than one a single row holds.
#: A word the store never mentions ("dentist" against someone's chats) says the
#: store cannot answer the question, so a hit on the prompt's other words scores
#: lower (benchmarks/relevance.py: near-miss and off-topic injections fall, block
#: recall holds; docs/performance.md).
ABSENT_WEIGHT = 1.5


#: What a term no row holds weighs in the score of a row that names a word of the
#: prompt (``_names``: "who controls the budget at lumora?" against "Lumora: economic
#: buyer = COO Ray Kimura"): about a word in one row of eight, so the name and the
#: prompt's other held words decide (benchmarks/facts.py, docs/performance.md).
NAMED_ABSENT_WEIGHT = 2.0


def named_weights(weights: Sequence[float], containing: Sequence[float]) -> list[float]:
    """``weights`` for a row that names a word of the prompt: a term no row holds
    (``containing`` 0) weighs :data:`NAMED_ABSENT_WEIGHT`, never more than elsewhere
    (in a store of a few rows every weight is small)."""
    return [
        min(w, NAMED_ABSENT_WEIGHT) if n <= 0 else w
        for w, n in zip(weights, containing, strict=True)
    ]


def term_weight(rows: int, containing: int) -> float:
    """How much a query term counts: its idf among ``rows``, at least 1.

    A term no row holds weighs :data:`ABSENT_WEIGHT` times the weight of a
    term one row holds; the floor of 1 keeps a term that most rows of a small
    store share (a project's name) from counting for nothing.
    """
    weight = max(1.0, smoothed_idf(rows, max(containing, 1)))
    return weight * ABSENT_WEIGHT if containing <= 0 else weight


#: What a keyword hit holding no query word in its own key, content, tags or day words
#: scores, times its share: its neighbours' words (the context columns) hold the match,
#: not the row. Its best share (every word in the record just before it) is 0.5, which
#: this puts just under the default floor (0.395 < 0.4): a block shows a row for a word it
#: holds, never for the next row's. LoCoMo dev (relevance.py, chat streams): block recall
#: 0.568 -> 0.567, R@5 / R@10 0.691 / 0.799 -> 0.688 / 0.798; facts written in one chat
#: session (facts.py --layout session) stop bringing the facts written after them into
#: the block: precision 0.47 -> 0.71, answers unchanged (docs/performance.md).
CONTEXT_ONLY = 0.79

#: The measured operating point: a weighted share of 0.40 of the query's terms
#: is where showing a hit starts to pay (benchmarks/relevance.py, docs/performance.md),
#: and it reads as 0.4, the spec's default floor, so the default config keeps
#: zeroclaw's floor for stores whose scores are given (the exponent is 1: the
#: score is the share itself).
OPERATING_POINT = (0.40, 0.40)
_EXPONENT = math.log(OPERATING_POINT[1]) / math.log(OPERATING_POINT[0])
#: A share is rounded to this many decimals: far below any difference that matters, far
#: above the error of summing a few float weights.
_DIGITS = 12


def coverage(
    weights: Sequence[float], present: Sequence[float], groups: Sequence[int] | None = None
) -> float:
    """The calibrated score of a keyword hit: the weighted share of the query it holds.

    The share is ``sum(weight * present) / sum(weight)``; ``present`` is 1 for a
    term in the row's own text, less for a term only in its context (see the
    module docstring), 0 for a missing term. The share is then raised to the
    power that maps :data:`OPERATING_POINT` onto the default floor (1 at
    the shipped point): monotone, 0 stays 0 and a hit holding the whole query scores 1.
    A hit with no term present at 1 (in its own text) scores :data:`CONTEXT_ONLY` of that.
    ``groups`` (``_variants.with_variants``) names each term's word: a word's spellings
    count once (:func:`grouped`).
    """
    if groups is not None:
        weights, present = grouped(weights, present, groups)
    total = sum(weights)
    if total <= 0.0:
        return 0.0
    held = sum(w * p for w, p in zip(weights, present, strict=True))
    return calibrated(held, total, own=any(p >= 1.0 for p in present))


def grouped(
    weights: Sequence[float], present: Sequence[float], groups: Sequence[int]
) -> tuple[list[float], list[float]]:
    """One weight and presence a word from its spellings' (``groups[i]``: term i's word):
    the lightest weight (its commonest spelling: one no row holds never makes the word
    weigh more) and the best presence (held when any spelling is)."""
    weight: dict[int, float] = {}
    held: dict[int, float] = {}
    for w, p, g in zip(weights, present, groups, strict=True):
        weight[g] = min(weight.get(g, w), w)
        held[g] = max(held.get(g, p), p)
    return list(weight.values()), [held[g] for g in weight]


def calibrated(held: float, total: float, *, own: bool = True) -> float:
    """:func:`coverage` from its sums: ``held`` (the weights of what a row holds, times how
    much) over ``total`` (every weight, > 0), for callers that sum each row themselves;
    ``own`` false says the row holds no term itself (:data:`CONTEXT_ONLY`)."""
    # Rounded first, so a share the weights make exactly the floor (a held word of one row
    # beside an absent one: 1 / 2.5) is the floor, not 0.39999999999999997 at some
    # store sizes and 0.4 at others.
    score = float(round(min(1.0, held / total), _DIGITS) ** _EXPONENT)
    return score if own else score * CONTEXT_ONLY


def vector_score(cosine: float, calibration: tuple[float, float] = (0.0, 1.0)) -> float:
    """``cosine`` mapped from the embedder's ``(unrelated, related)`` pair to 0..1."""
    lo, hi = calibration
    if hi <= lo:
        return min(1.0, max(0.0, cosine))
    return min(1.0, max(0.0, (cosine - lo) / (hi - lo)))


def hybrid_score(
    keyword: float | None, vector: float | None, keyword_weight: float, vector_weight: float
) -> float:
    """Weighted mean of the calibrated modalities; a modality that missed the row counts 0."""
    total = keyword_weight + vector_weight
    if total <= 0.0:
        return 0.0
    return (keyword_weight * (keyword or 0.0) + vector_weight * (vector or 0.0)) / total


def substring_score(found: float, words: int) -> float:
    """``SUBSTRING_WEIGHT`` times the share of the query's words found inside the row
    (``found`` may be fractional: a CJK run counts the share of its pieces)."""
    if words <= 0:
        return 0.0
    return SUBSTRING_WEIGHT * min(1.0, found / words)


def dated_coverage(
    weights: Sequence[float],
    present: Sequence[float],
    numbers: Sequence[bool],
    text: Sequence[float],
    loose: Sequence[bool],
    dated: bool,
    groups: Sequence[int] | None = None,
) -> float:
    """:func:`coverage` by the day words' rule for a row.

    Every row indexes its day in words ("8 May 2023": SQLite's ``ctx_day`` column,
    PostgreSQL's day words under label B), so every row written on a 7th holds "7" and
    every row of 2024 "2024"; a number of the query a row holds only there says nothing
    of the row unless the query names the row's month too.

    ``numbers`` says which terms are a number some row holds, ``text`` what each is
    worth in the row outside its day words, ``loose`` which of them no row holds outside
    its day words, ``dated`` whether the row's day words hold a query term that is not a
    number (the query names the row's month). A ``dated`` row is scored as any. Otherwise
    a number counts only where the row's text holds it, and a ``loose`` one the row's text
    does not hold is left out of the row's query: "7" in "who is my dentist? (asking as
    7)" is evidence for no row written on a 7th, and against no row written on the 8th,
    while "8080" in "what runs on port 8080?", written in a row, still weighs against the
    rows that do not hold it. A number no row holds (``numbers`` false) is an absent term
    as any other.
    """
    if dated:
        return coverage(weights, present, groups)
    held = [t if n else p for p, n, t in zip(present, numbers, text, strict=True)]
    kept = [0.0 if x and t <= 0.0 else w for w, x, t in zip(weights, loose, text, strict=True)]
    return coverage(kept, held, groups)


def is_number(token: str) -> bool:
    """True for an index token of ASCII digits alone ("7", "2024"): the day words' numbers."""
    return token.isascii() and token.isdigit()
