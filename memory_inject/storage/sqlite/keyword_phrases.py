"""The phrases of a keyword query and what FTS5 says a row holds of them.

Shared by the keyword stage (:mod:`.keyword_rank`) and the in-process mirror
(:mod:`.keyword_mirror`): the ``bm25()`` column weights, the coverage weights
of the text columns, a query's phrases and hits, each phrase's share of a
hit's ``bm25()`` asked of FTS5, which phrases a column too long to highlight
holds, and a row's coverage from its marked tokens.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

from attrs import define

from memory_inject.storage.calibration import coverage, dated_coverage, is_number
from memory_inject.storage.sqlite.ddl import FTS_COLUMNS, OWN_COLUMNS

__all__ = [
    "BM25_ARGS",
    "BM25_WEIGHTS",
    "COVERAGE_WEIGHTS",
    "DAY_COLUMN",
    "K1",
    "OWN_MASK",
    "PREFIX_MARK",
    "ROWID_SPAN",
    "TEXT_COLUMNS",
    "TEXT_COLUMN_NAMES",
    "B",
    "Hit",
    "Marked",
    "MarkedRow",
    "Phrase",
    "add_bm25",
    "coverage_of",
    "dated_coverage",
    "dates_only",
    "held_in_long",
    "holds",
    "is_number",
    "span_of",
]

#: bm25() column weights for key, content, tags, the two previous records of
#: the session, the day words and the scope token: a key hit counts double,
#: context hits less, the scope (a filter, never a query word) nothing.
BM25_WEIGHTS = (2.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0)
BM25_ARGS = ", ".join(str(w) for w in BM25_WEIGHTS)
#: What a hit in each indexed column proves for :func:`coverage`.
COVERAGE_WEIGHTS = (1.0, 1.0, 1.0, 0.5, 0.25, 1.0)
#: FTS5's bm25() constants.
K1, B = 1.2, 0.75
#: The columns a query word can be found in (the scope token never is one).
TEXT_COLUMNS = len(COVERAGE_WEIGHTS)
TEXT_COLUMN_NAMES = tuple(FTS_COLUMNS.replace(" ", "").split(","))[:TEXT_COLUMNS]
#: The day words' column (``ddl_context.DAY_WORDS``: "8 May 2023"). Every row written on
#: a 7th holds "7" there and every row of 2024 "2024", so a number of the query that a row
#: holds only there says nothing of the row unless the query names the row's month too
#: (:func:`dated_coverage`).
DAY_COLUMN = TEXT_COLUMN_NAMES.index("ctx_day")
#: The text columns but the day words.
_NOT_DAY = tuple(n for c, n in enumerate(TEXT_COLUMN_NAMES) if c != DAY_COLUMN)
#: The column bits (a mirror posting's mask) of a record's own columns (``ddl.OWN_COLUMNS``).
OWN_MASK = sum(1 << c for c, name in enumerate(TEXT_COLUMN_NAMES) if name in OWN_COLUMNS)
#: Marks a prefix phrase found in a long column: ``holds`` sees a token that
#: starts with the prefix, and no whole word equals it.
PREFIX_MARK = "\x00"


@define
class Phrase:
    """One phrase of the query as MATCH reads it, its index tokens, and how many rows hold it."""

    text: str  # as written in MATCH
    tokens: tuple[str, ...]
    prefix: bool
    df: int  # rows holding it (single words; the rarest token's otherwise)
    word: int = 0  # the query word it spells (``_variants.with_variants``)

    @property
    def simple(self) -> bool:
        """True for one whole word (no prefix, one token)."""
        return len(self.tokens) == 1 and not self.prefix


@define
class Hit:
    """A candidate row: its id, its rowid and its BM25 so far."""

    key: str
    rid: int
    score: float  # BM25 (higher is better) over the phrases counted so far


MarkedRow = list[list[str]]
Marked = dict[int, MarkedRow]


#: ANDed to a statement that reads a few known rows of a MATCH: FTS5 seeks to
#: the first of them and stops after the last, instead of walking every
#: phrase's whole doclist (the rows a recall reads are often close together:
#: at 1M rows, 6 ms became 0.4). It filters nothing the rowid list keeps.
ROWID_SPAN = "memories_fts.rowid BETWEEN ? AND ?"


def span_of(rids: Sequence[int]) -> tuple[int, int]:
    """The :data:`ROWID_SPAN` arguments for ``rids`` (not empty)."""
    return min(rids), max(rids)


def held_in_long(
    conn: sqlite3.Connection, too_long: dict[int, list[int]], phrases: Sequence[Phrase]
) -> list[tuple[int, int, Phrase]]:
    """``(rowid, column, phrase)`` for each phrase each long column holds.

    One statement, a branch per phrase and column, each a column-filtered
    MATCH over just those rows: FTS5 walks the phrase's matches, never
    copying the text.
    """
    arms: list[str] = []
    args: list[str | int] = []
    who: list[tuple[int, Phrase]] = []
    for c, rids in sorted(too_long.items()):
        listed = json.dumps(rids)
        for p in phrases:
            arms.append(
                f"SELECT rowid, {len(who)} FROM memories_fts WHERE memories_fts MATCH ? "  # noqa: S608
                f"AND +rowid IN (SELECT value FROM json_each(?)) AND {ROWID_SPAN}"
            )
            args += [f"{TEXT_COLUMN_NAMES[c]} : {p.text}", listed, *span_of(rids)]
            who.append((c, p))
    found = conn.execute(" UNION ALL ".join(arms), args).fetchall()
    return [(int(rid), who[i][0], who[i][1]) for rid, i in found]


def add_bm25(conn: sqlite3.Connection, extra: Sequence[Phrase], hits: Sequence[Hit]) -> None:
    """Add the ``extra`` phrases' share of FTS5's bm25() to each hit's score, in place.

    A phrase's share of a row's bm25() is what bm25() gives the phrase alone
    (the same idf, column weights, row length and average), so FTS5 computes
    it: one statement, a branch per phrase, each scanning its phrase's rows
    once and scoring only the hits (``+rowid``: a pushed-down rowid would
    re-open the query, and recount the idf, once per hit).
    """
    if not hits:
        return
    by_rid = {h.rid: h for h in hits}
    rids = json.dumps(list(by_rid))
    arm = (
        f"SELECT rowid, -bm25(memories_fts, {BM25_ARGS}) FROM memories_fts "  # noqa: S608
        "WHERE memories_fts MATCH ? AND +rowid IN (SELECT value FROM json_each(?)) "
        f"AND {ROWID_SPAN}"
    )
    sql = " UNION ALL ".join([arm] * len(extra))
    span = span_of(list(by_rid))
    for rid, share in conn.execute(sql, [x for p in extra for x in (p.text, rids, *span)]):
        by_rid[int(rid)].score += float(share)


def coverage_of(
    phrases: Sequence[Phrase],
    weights: Sequence[float],
    cols: MarkedRow,
    groups: Sequence[int] | None = None,
    dates_only: Collection[str] = (),
) -> float:
    """The row's :func:`coverage` of the query from its marked tokens per column
    (``groups``: each phrase's word, when some are spellings of another), by the day words'
    rule (:func:`dated_coverage`; ``dates_only``: the query's numbers that no row holds
    outside its day words, :func:`dates_only`)."""
    best: dict[str, float] = {}  # each marked token's best column weight
    for toks, weight in zip(cols, COVERAGE_WEIGHTS, strict=False):
        for t in toks:
            if best.get(t, 0.0) < weight:
                best[t] = weight
    present = [0.0] * len(phrases)
    for i, p in enumerate(phrases):
        if p.simple:
            present[i] = best.get(p.tokens[0], 0.0)
            continue
        for toks, weight in zip(cols, COVERAGE_WEIGHTS, strict=False):
            if toks and present[i] < weight and holds(set(toks), p.tokens, p.prefix):
                present[i] = weight
    numbers = [p.simple and p.df > 0 and is_number(p.tokens[0]) for p in phrases]
    if not any(numbers):
        return coverage(weights, present, groups)
    day = cols[DAY_COLUMN] if len(cols) > DAY_COLUMN and cols[DAY_COLUMN] else ()
    text = [0.0] * len(phrases)  # each number's best weight outside the day words
    for i, p in enumerate(phrases):
        if numbers[i]:
            t = p.tokens[0]
            text[i] = max(
                (
                    w
                    for c, (toks, w) in enumerate(zip(cols, COVERAGE_WEIGHTS, strict=False))
                    if c != DAY_COLUMN and toks and t in toks
                ),
                default=0.0,
            )
    loose = [n and p.tokens[0] in dates_only for n, p in zip(numbers, phrases, strict=True)]
    dated = any(not is_number(t) for t in day)
    return dated_coverage(weights, present, numbers, text, loose, dated, groups)


def dates_only(
    conn: sqlite3.Connection, phrases: Sequence[Phrase], namespace: str | None = None
) -> set[str]:
    """The tokens of the query's numbers some row holds (``df``) that no row holds
    outside its day words: one column-filtered MATCH each, stopping at the first row
    (of ``namespace`` when given: a file of several namespaces, whose ``df`` are its own)."""
    asked = [p.tokens[0] for p in phrases if p.simple and p.df > 0 and is_number(p.tokens[0])]
    if not asked:
        return set()
    arm = (
        "SELECT ? WHERE NOT EXISTS (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT 1)"
    )
    if namespace is not None:
        arm = (
            "SELECT ? WHERE NOT EXISTS (SELECT 1 FROM memories_fts CROSS JOIN memories AS m "
            "ON m.rid = memories_fts.rowid WHERE memories_fts MATCH ? AND m.namespace = ? "
            "LIMIT 1)"
        )
    args: list[str] = []
    for t in dict.fromkeys(asked):
        args += [t, f'{{{" ".join(_NOT_DAY)}}} : "{t}"']
        if namespace is not None:
            args.append(namespace)
    arms = len(dict.fromkeys(asked))
    found = conn.execute(" UNION ALL ".join([arm] * arms), args).fetchall()
    return {str(t) for (t,) in found}


def holds(tokens: set[str], term: tuple[str, ...], prefix: bool) -> bool:
    """True when ``tokens`` hold every token of ``term`` (as a prefix when ``prefix``)."""
    if prefix:
        return all(any(t.startswith(p) for t in tokens) for p in term)
    return all(t in tokens for t in term)
