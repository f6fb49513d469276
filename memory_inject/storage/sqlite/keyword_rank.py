"""The keyword stage of SQLite recall: candidates from the rarest words, BM25 order, coverage.

FTS5 scores every row that holds any word of an OR query before it knows the
best ten, and a word found in most rows makes that most of the table (the
context columns make every word about three times as common). So the stage
splits the query's phrases by document frequency (``fts5vocab``, cached):

* **drawing** phrases pick and rank the candidates inside FTS5 (``bm25()``
  over just them): the rarest single words while their rows add up to at most
  :data:`RANK_BUDGET`, and every prefix or multi-word phrase;
* **scoring-only** phrases (the other single words) still count in each
  candidate's BM25: FTS5 scores each of them alone over just the candidates
  (the same idf, weights and lengths as in the whole query) and the shares
  are added up.

A word in at least half of the rows never draws and is not added: FTS5
floors its idf at 1e-6, so leaving it out changes nothing but near-exact ties
(it still counts in the coverage score). When the
whole query's words fit the budget (small stores, and the usual prompt of a
large one) the order is FTS5's; otherwise a row holding only scoring-only
words can be missed, as on the PostgreSQL store's ``rank_budget``. When the
draw finds fewer than k rows, every word but the floored ones draws, and
then the whole query.

Scores are :func:`~memory_inject.storage.calibration.coverage` of the query,
unchanged: which phrases a returned row holds, from ``highlight()``, weighed
by their idf among all rows. The phrases, the column weights and what a row's
marks prove live in :mod:`.keyword_phrases`; this module owns the draw, the
ranking statements and the ``highlight()`` marks.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_inject.storage.calibration import fts5_idf, term_weight
from memory_inject.storage.sqlite.codec import ENTRY_COLUMNS
from memory_inject.storage.sqlite.keyword_phrases import (
    BM25_ARGS,
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
    coverage_of,
    held_in_long,
    span_of,
)
from memory_inject.storage.sqlite.keyword_terms import TermStats, tokens_of, tokens_of_all, varints

__all__ = [
    "DRAW_ROWS",
    "HIGHLIGHT_MAX_BYTES",
    "RANK_BUDGET",
    "SHARE_SCAN_ROWS",
    "WINDOW",
    "keyword_hits",
    "marks",
]

#: How many FTS hits are ranked before the scope filter.
WINDOW = 64
#: The drawing phrases may hold about this many rows between them.
RANK_BUDGET = 1000
#: Past this many rows between them, only the drawing phrases' newest
#: ``DRAW_ROWS`` matches (by rowid: write order) are ranked, at about a
#: microsecond each: a bound for the tail (a rarest word in 100,000 rows of a
#: 1M store took 100 ms), not the median: 2,000 would halve the 1M median but
#: loses old evidence where it binds (docs/performance.md).
DRAW_ROWS = 20_000
#: Up to this many rows between them, FTS5 scores the scoring-only phrases'
#: share itself (one scan of each phrase's rows); past it, marking the
#: candidates with ``highlight()`` and adding the share in Python is cheaper.
SHARE_SCAN_ROWS = 20_000

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


def keyword_hits(
    conn: sqlite3.Connection,
    stats: TermStats,
    where: tuple[str, str, Sequence[Any]],
    words: Sequence[tuple[str, bool]],
    k: int,
    *,
    window: bool = True,
    scope_match: str | None = None,
    rows: dict[str, tuple[Any, ...]] | None = None,
    refresh: bool = True,
) -> list[tuple[str, float, float]]:
    """The ``k`` best live rows by BM25 (ties by id) as ``(id, coverage score, BM25)``.

    ``where`` is ``(namespace, scope, params)``, the store's live-row filter;
    ``window`` false (a narrow scope) filters before ranking. ``scope_match``
    (``ddl.scope_match``) is ANDed to every ranking MATCH, so FTS5
    only ranks rows whose scope token fits; ``where`` still decides.
    ``rows``, when given, receives the :data:`~.codec.ENTRY_COLUMNS`
    of hits read on the way (by id), so the caller need not read them again.
    ``refresh`` false says ``stats`` were refreshed in this read transaction already.
    """
    if refresh:
        stats.refresh(conn)
    phrases = [
        Phrase(f'"{w}"*' if star else f'"{w}"', ts, star, 0)
        for (w, star), ts in zip(words, tokens_of_all([w for w, _ in words]), strict=True)
        if ts
    ]
    if not phrases:
        return []
    df = stats.document_frequencies(conn, [t for p in phrases for t in p.tokens])
    for p in phrases:
        p.df = min(df.get(t, 0) for t in p.tokens)
    hits, draw, marked = _ranked(conn, stats, where, phrases, k, window, scope_match)
    # Every hit holds a drawing phrase, so this never walks the common words' rows.
    extra = [p for p in phrases if p not in draw]
    match = f"({_match(draw)}) AND ({_match(phrases)})" if extra else _match(draw)
    missing = [h.rid for h in hits if h.rid not in marked]
    marked.update(_highlights(conn, match, missing, phrases, rows))
    weights = [term_weight(stats.rows, p.df) for p in phrases]
    return [(h.key, coverage_of(phrases, weights, marked.get(h.rid, [])), h.score) for h in hits]


def _match(phrases: Sequence[Phrase]) -> str:
    return " OR ".join(p.text for p in phrases)


def _split(phrases: Sequence[Phrase], rows: int) -> tuple[list[Phrase], list[Phrase]]:
    """``(drawing, scoring-only)``: see the module docstring."""
    draw = [p for p in phrases if not p.simple]
    rest = sorted((p for p in phrases if p.simple), key=lambda p: p.df)
    total = 0
    while rest and 2 * rest[0].df < rows and (not draw or total + rest[0].df <= RANK_BUDGET):
        total += rest[0].df
        draw.append(rest.pop(0))
    if not draw:  # every word is in half the rows: nothing is rare
        return list(phrases), []
    return draw, rest


def _ranked(
    conn: sqlite3.Connection,
    stats: TermStats,
    where: tuple[str, str, Sequence[Any]],
    phrases: Sequence[Phrase],
    k: int,
    window: bool,
    scope_match: str | None,
) -> tuple[list[Hit], list[Phrase], Marked]:
    """The ``k`` best hits, the drawing phrases used, and the hits' marks found on the way."""

    def ranking(chosen: Sequence[Phrase]) -> str:
        return f"({_match(chosen)}) AND {scope_match}" if scope_match else _match(chosen)

    def held(chosen: Sequence[Phrase]) -> int:  # at most (a prefix: its word's rows alone)
        return min(stats.rows, sum(p.df for p in chosen))

    draw, extra = _split(phrases, stats.rows)
    while True:
        hits, last = _candidates(conn, where, ranking(draw), k, window=window, matches=held(draw))
        enough = len(hits) >= k
        if last is None:
            done = enough or not extra
        else:
            # Without scoring-only words this is exact: nothing left out can tie.
            done = enough and (bool(extra) or hits[k - 1].score > last)
        if done:
            marked = _add_shares(conn, stats, draw, extra, hits)
            hits.sort(key=lambda h: (-h.score, h.key))
            return hits[:k], draw, marked
        movable = sorted((p for p in extra if 2 * p.df < stats.rows), key=lambda p: p.df)
        if last is not None or not movable:
            break
        # The drawn words found too few rows: the next rarest draw too, about a
        # budget's worth of rows at a time (at least one word), so a prompt of
        # one rare and several common words never ranks all the common rows.
        added, total = [movable[0]], movable[0].df
        for p in movable[1:]:
            if total + p.df > RANK_BUDGET:
                break
            added.append(p)
            total += p.df
        draw += added
        extra = [p for p in extra if p not in added]
    # Too few hits even so (or a window the scope emptied): rank the whole query.
    every = list(phrases)
    if window:
        hits, last = _candidates(conn, where, ranking(every), k, window=True, matches=held(every))
        hits.sort(key=lambda h: (-h.score, h.key))
        if last is None or (len(hits) >= k and hits[k - 1].score > last):
            return hits[:k], every, {}
    hits, _ = _candidates(conn, where, ranking(every), k, window=False, exact=True)
    return hits, every, {}


def _add_shares(
    conn: sqlite3.Connection,
    stats: TermStats,
    draw: Sequence[Phrase],
    extra: Sequence[Phrase],
    hits: Sequence[Hit],
) -> Marked:
    """Add the scoring-only phrases' BM25 share to ``hits``; the marks found on the way."""
    # Floored words would add about 1e-6: they are left to break ties.
    counted = [p for p in extra if 2 * p.df < stats.rows]
    if not counted:
        return {}
    if sum(p.df for p in counted) <= SHARE_SCAN_ROWS:
        add_bm25(conn, counted, hits)
        return {}
    marked = _add_bm25_marked(conn, stats, draw, counted, hits)
    return marked if len(counted) == len(extra) else {}  # else their marks lack the floored words


def _candidates(
    conn: sqlite3.Connection,
    where: tuple[str, str, Sequence[Any]],
    match: str,
    k: int,
    *,
    window: bool,
    exact: bool = False,
    matches: int = 0,
) -> tuple[list[Hit], float | None]:
    """Live rows by BM25 over ``match``, and the best score a live match left out may have.

    The bound is None when no live match was left out. With ``window``, the
    best FTS hits are ranked on the index alone and only those are joined to
    their rows (joining every hit costs as much as ranking it); otherwise
    the join comes first. ``exact`` asks for the ``k`` best, complete.
    ``matches`` (what ``match``'s phrases hold between them) past
    :data:`DRAW_ROWS` ranks, with ``window``, only the newest ``DRAW_ROWS``
    matches, and the older ones count as not left out (bound None).
    """
    namespace, scope, params = where
    size = k if exact else max(WINDOW, 4 * k)
    if window:
        capped = matches > DRAW_ROWS
        ranked = (
            f"SELECT rowid AS rid, -bm25(memories_fts, {BM25_ARGS}) AS score "  # noqa: S608
            "FROM memories_fts WHERE memories_fts MATCH ?"
        )
        if capped:  # the newest matches first; bm25() runs on just those
            ranked = f"SELECT rid, score FROM ({ranked} ORDER BY rowid DESC LIMIT {DRAW_ROWS})"  # noqa: S608
        # One statement: the best hits on the index alone, then each joined to
        # its row (None when the row is out of scope). The unary + keeps the
        # planner on the rowid lookups.
        top = conn.execute(
            f"SELECT t.rid, t.score, m.id FROM ({ranked} ORDER BY score DESC LIMIT ?) AS t "  # noqa: S608
            f"LEFT JOIN memories AS m ON m.rid = t.rid AND +m.namespace = ? AND {scope}",
            (match, size, namespace, *params),
        ).fetchall()
        hits = [Hit(str(i), int(r), float(sc)) for r, sc, i in top if i is not None]
        full = len(top) == size and not capped
        return hits, (min(float(sc) for _, sc, _ in top) if full else None)
    sql = (
        f"SELECT m.id, -bm25(memories_fts, {BM25_ARGS}) AS score, m.rid "  # noqa: S608
        "FROM memories_fts JOIN memories AS m ON m.rid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.namespace = ? AND {scope} "
        "ORDER BY score DESC, m.id LIMIT ?"
    )
    rows = conn.execute(sql, (match, namespace, *params, size)).fetchall()
    hits = [Hit(str(i), int(r), float(s)) for i, s, r in rows]
    return hits, (hits[-1].score if len(hits) == size and not exact else None)


def _highlights(
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


def _add_bm25_marked(
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
    match = f"({_match(draw)}) AND ({_match(extra)})"
    long: set[int] = set()
    marked = _highlights(conn, match, [h.rid for h in hits], [*draw, *extra], long=long)
    if not marked:
        return marked
    if long:  # their marks hold no counts: FTS5 scores the share of those few rows
        add_bm25(conn, extra, [h for h in hits if h.rid in long])
    sizes = {
        int(i): sum(varints(bytes(sz)))
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
