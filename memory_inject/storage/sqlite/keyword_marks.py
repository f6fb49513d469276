"""``highlight()`` marks of the keyword stage's hits, and the rows' own-word check.

Which query phrases a hit holds, column by column, is read from FTS5's
``highlight()`` over just the hits (``+rowid IN (...)`` plus
:data:`~.keyword_phrases.ROWID_SPAN`, so FTS5 runs the query once, not once
per row); a column longer than :data:`HIGHLIGHT_MAX_BYTES` is asked of FTS5
phrase by phrase instead. :func:`add_bm25_marked` adds the scoring-only
phrases' BM25 share from those marks where FTS5 scanning their rows would
cost more. :func:`own_hits` is the batched form of ``ddl.OWN_MATCH`` for a
ranked window.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_inject.storage.calibration import fts5_idf
from memory_inject.storage.sqlite.codec import ENTRY_COLUMNS
from memory_inject.storage.sqlite.keyword_phrases import (
    BM25_WEIGHTS,
    K1,
    PREFIX_MARK,
    ROWID_SPAN,
    TEXT_COLUMN_NAMES,
    TEXT_COLUMNS,
    B,
    Hit,
    Marked,
    Phrase,
    add_bm25,
    held_in_long,
    span_of,
)
from memory_inject.storage.sqlite.keyword_terms import row_length, tokens_of
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = ["HIGHLIGHT_MAX_BYTES", "add_bm25_marked", "highlights", "marks", "own_hits"]

#: highlight() marks; control characters never survive the tokenizer as words.
_OPEN, _CLOSE = "\x01", "\x02"
_SPAN = re.compile("\x01([^\x02]*)\x02")
_ENTRY = ", ".join(f"m.{c}" for c in ENTRY_COLUMNS)
_ID = ENTRY_COLUMNS.index("id")
#: A column longer than this (bytes) is not marked with ``highlight()``,
#: whose cost grows with the column's length times its matches (it re-copies
#: its output at each mark: two 1.6 MB rows took 18 s); which phrases such a
#: column holds is asked of FTS5 instead, one phrase and column at a time,
#: in time linear in the column's matches.
HIGHLIGHT_MAX_BYTES = 16_384


def marks(limit: int) -> str:
    """The select list that highlights each text column of at most ``limit`` bytes (-1 else).

    An empty (NULL) column is highlighted (to NULL), never taken for a long
    one: asking FTS5 what it holds would cost a statement for nothing.
    """
    return ", ".join(
        f"CASE WHEN length(CAST(m.{name} AS BLOB)) > {int(limit)} "
        f"THEN -1 ELSE highlight(memories_fts, {c}, ?, ?) END"
        for c, name in enumerate(TEXT_COLUMN_NAMES)
    )


_MARKS = marks(HIGHLIGHT_MAX_BYTES)
_MARK_ARGS = (_OPEN, _CLOSE) * TEXT_COLUMNS


def own_hits(conn: sqlite3.Connection, own: str, rids: Sequence[int]) -> set[int]:
    """The ``rids`` whose own columns match ``own`` (``ddl.own_match`` of the query).

    One statement for a whole window: ``ddl.OWN_MATCH`` in a join re-opens
    the FTS5 query for every row it checks.
    """
    if not rids:
        return set()
    sql = (
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND +rowid IN "  # noqa: S608
        f"(SELECT value FROM json_each(?)) AND {ROWID_SPAN}"
    )
    found = conn.execute(sql, (own, json.dumps(list(rids)), *span_of(rids)))
    return {int(r) for (r,) in found}


def highlights(
    conn: sqlite3.Connection,
    match: str,
    rids: Sequence[int],
    phrases: Sequence[Phrase],
    rows: dict[str, tuple[Any, ...]] | None = None,
    long: set[int] | None = None,
) -> Marked:
    """``{rowid: [tokens marked in each column]}`` for the ``rids`` that ``match``.

    ``phrases`` are the phrases of ``match``. A column longer than
    :data:`HIGHLIGHT_MAX_BYTES` is not highlighted: the ``phrases`` it holds
    are found by FTS5 (:func:`held_in_long`) and marked with their tokens.
    ``long``, when given, receives the rowids that had such a column. With
    ``rows``, the same statement also reads each row's entry columns into it
    (by id).
    """
    if not rids:
        return {}
    entry = f", {_ENTRY}" if rows is not None else ""
    # +rowid: a pushed-down rowid constraint re-opens the query once per row.
    sql = (
        f"SELECT memories_fts.rowid, {_MARKS}{entry} FROM memories_fts "  # noqa: S608
        "JOIN memories AS m ON m.rid = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND +memories_fts.rowid IN "
        f"(SELECT value FROM json_each(?)) AND {ROWID_SPAN}"
    )
    out: Marked = {}
    too_long: dict[int, list[int]] = {}  # column -> rowids
    spans: dict[str, tuple[str, ...]] = {}  # the same words are marked in many rows
    for row in conn.execute(sql, (*_MARK_ARGS, match, json.dumps(list(rids)), *span_of(rids))):
        if rows is not None:
            got = row[1 + TEXT_COLUMNS :]
            rows[got[_ID]] = got
        rid = int(row[0])
        cols: list[list[str]] = []
        for c, text in enumerate(row[1 : 1 + TEXT_COLUMNS]):
            marked: list[str] = []
            if text == -1:
                too_long.setdefault(c, []).append(rid)
            elif text and _OPEN in text:
                for span in _SPAN.findall(text):
                    toks = spans.get(span)
                    if toks is None:
                        toks = spans[span] = tokens_of(span)
                    marked.extend(toks)
            cols.append(marked)
        out[rid] = cols
    if too_long:
        for rid, c, p in held_in_long(conn, too_long, phrases):
            out[rid][c].extend(t + PREFIX_MARK if p.prefix else t for t in p.tokens)
        if long is not None:
            long.update(r for rs in too_long.values() for r in rs)
    return out


def add_bm25_marked(
    conn: sqlite3.Connection,
    stats: TermStats,
    draw: Sequence[Phrase],
    extra: Sequence[Phrase],
    hits: Sequence[Hit],
) -> Marked:
    """:func:`add_bm25` for phrases in many rows: from ``highlight()`` marks of the hits.

    Every instance of a phrase is marked (overlapping instances share a span,
    so each marked token counts), weighed by its column; ``D`` is the row's
    token count, ``avgdl`` the index's mean. Returns the marks of the hits
    holding an extra phrase (all phrases marked).
    """
    match = "({}) AND ({})".format(*(" OR ".join(p.text for p in ps) for ps in (draw, extra)))
    long: set[int] = set()
    marked = highlights(conn, match, [h.rid for h in hits], [*draw, *extra], long=long)
    if not marked:
        return marked
    if long:  # their marks hold no counts: FTS5 scores the share of those few rows
        add_bm25(conn, extra, [h for h in hits if h.rid in long])
    sizes = {
        int(i): row_length(bytes(sz))
        for i, sz in conn.execute(
            "SELECT id, sz FROM memories_fts_docsize WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(marked)),),
        )
    }
    idf = [fts5_idf(stats.rows, p.df) for p in extra]
    avgdl = stats.avgdl or 1.0
    for h in hits:
        cols = marked.get(h.rid)
        if cols is None or h.rid in long:
            continue
        norm = K1 * (1.0 - B + B * sizes.get(h.rid, 0) / avgdl)
        for p, w in zip(extra, idf, strict=True):
            token = p.tokens[0]
            f = sum(c * toks.count(token) for toks, c in zip(cols, BM25_WEIGHTS, strict=False))
            if f > 0.0:
                h.score += w * (f * (K1 + 1.0)) / (f + norm)
    return marked
