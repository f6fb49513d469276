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
by their idf among all rows (among the namespace's own rows on a file of several:
:mod:`.space_counts`; the draw and BM25 still count the file's). The phrases,
the column weights and what a row's marks prove live in :mod:`.keyword_phrases`;
this module owns the draw, the ranking statements and the ``highlight()`` marks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memory_inject.storage.calibration import named_weights, term_weight
from memory_inject.storage.sqlite.codec import ENTRY_COLUMNS
from memory_inject.storage.sqlite.ddl_context import OWN_MATCH
from memory_inject.storage.sqlite.keyword_marks import add_bm25_marked, highlights, own_hits
from memory_inject.storage.sqlite.keyword_phrases import (
    BM25_ARGS,
    Hit,
    Marked,
    Phrase,
    add_bm25,
    coverage_of,
    dates_only,
)
from memory_inject.storage.sqlite.keyword_terms import tokens_of_all
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = [
    "DRAW_ROWS",
    "RANK_BUDGET",
    "SHARE_SCAN_ROWS",
    "WINDOW",
    "keyword_hits",
]

_CONTENT = ENTRY_COLUMNS.index("content")

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
    own: str | None = None,
    groups: Sequence[int] | None = None,
    named: Callable[[str], bool] | None = None,
) -> list[tuple[str, float, float]]:
    """The ``k`` best live rows by BM25 (ties by id) as ``(id, coverage score, BM25)``.

    ``where`` is ``(namespace, scope, params)``, the store's live-row filter;
    ``window`` false (a narrow scope) filters before ranking. ``scope_match``
    (``ddl.scope_match``) is ANDed to every ranking MATCH, so FTS5
    only ranks rows whose scope token fits; ``where`` still decides.
    ``rows``, when given, receives the :data:`~.codec.ENTRY_COLUMNS`
    of hits read on the way (by id), so the caller need not read them again.
    ``refresh`` false says ``stats`` were refreshed in this read transaction already.
    ``own`` (``ddl.own_match`` of the query) keeps a record with near context
    (``ctx_near``) only when its own columns match it, as ``ddl.OWN_MATCH`` does.
    ``groups`` (``_variants.with_variants``) names the word each of ``words`` spells,
    ``named`` which contents name a word of the prompt (``_names``: a term no row
    holds weighs ``calibration.NAMED_ABSENT_WEIGHT`` in their scores).
    """
    if refresh:
        stats.refresh(conn)
    phrases = [
        Phrase(f'"{w}"*' if star else f'"{w}"', ts, star, 0, g)
        for (w, star), ts, g in zip(
            words, tokens_of_all([w for w, _ in words]), groups or range(len(words)), strict=True
        )
        if ts
    ]
    if not phrases:
        return []
    df = stats.document_frequencies(conn, [t for p in phrases for t in p.tokens])
    for p in phrases:
        p.df = min(df.get(t, 0) for t in p.tokens)
    hits, draw, marked = _ranked(conn, stats, where, phrases, k, window, scope_match, own)
    # Every hit holds a drawing phrase, so this never walks the common words' rows.
    extra = [p for p in phrases if p not in draw]
    match = f"({_match(draw)}) AND ({_match(phrases)})" if extra else _match(draw)
    missing = [h.rid for h in hits if h.rid not in marked]
    marked.update(highlights(conn, match, missing, phrases, rows))
    # The score weighs the words by the namespace's own rows, not the file's.
    rows_of, space = _own_counts(conn, stats, where[0], phrases)
    weights = [term_weight(rows_of, p.df) for p in phrases]
    by_word = None if groups is None else [p.word for p in phrases]
    dfs = [p.df for p in phrases]
    names = _naming(conn, hits, named, rows or {}) if named is not None and 0 in dfs else set()
    heavier = named_weights(weights, dfs) if names else weights
    only_days = dates_only(conn, phrases, space) if hits else set()
    return [
        (
            h.key,
            coverage_of(
                phrases,
                heavier if h.rid in names else weights,
                marked.get(h.rid, []),
                by_word,
                only_days,
            ),
            h.score,
        )
        for h in hits
    ]


def _own_counts(
    conn: sqlite3.Connection, stats: TermStats, namespace: str, phrases: Sequence[Phrase]
) -> tuple[int, str | None]:
    """The rows the coverage weights count, and the namespace that holds them (None: the
    file holds one, and its counts are the namespace's): on a file of several, each
    phrase's ``df`` becomes its rows of ``namespace`` (after the draw, which is the file's)."""
    counted = stats.namespace_counts(conn, namespace, [t for p in phrases for t in p.tokens])
    if counted is None:
        return stats.rows, None
    rows, df = counted
    for p in phrases:
        p.df = min(df.get(t, 0) for t in p.tokens)
    return rows, namespace


def _naming(
    conn: sqlite3.Connection,
    hits: Sequence[Hit],
    named: Callable[[str], bool],
    rows: dict[str, tuple[Any, ...]],
) -> set[int]:
    """The rowids of the ``hits`` whose content names a word of the prompt (``_names``);
    the content of a hit already in ``rows`` (read with its marks) is not read again."""
    contents = [(h.rid, rows[h.key][_CONTENT]) for h in hits if h.key in rows]
    unread = [h.rid for h in hits if h.key not in rows]
    if unread:
        contents += conn.execute(
            "SELECT rid, content FROM memories WHERE rid IN (SELECT value FROM json_each(?))",
            (json.dumps(unread),),
        ).fetchall()
    return {int(rid) for rid, content in contents if named(str(content or ""))}


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
    own: str | None = None,
) -> tuple[list[Hit], list[Phrase], Marked]:
    """The ``k`` best hits, the drawing phrases used, and the hits' marks found on the way."""

    def ranking(chosen: Sequence[Phrase]) -> str:
        return f"({_match(chosen)}) AND {scope_match}" if scope_match else _match(chosen)

    def held(chosen: Sequence[Phrase]) -> int:  # at most (a prefix: its word's rows alone)
        return min(stats.rows, sum(p.df for p in chosen))

    draw, extra = _split(phrases, stats.rows)
    while True:
        hits, last = _candidates(
            conn, where, ranking(draw), k, window=window, matches=held(draw), own=own
        )
        enough = len(hits) >= k
        if last is None:
            # A window of the newest DRAW_ROWS matches the scope left short (a small
            # tenant's rows, or an old session's, under a big tenant's newer ones) is not
            # all there is: rank on, and at last the joined query below.
            done = enough or (not extra and not (window and held(draw) > DRAW_ROWS))
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
        hits, last = _candidates(
            conn, where, ranking(every), k, window=True, matches=held(every), own=own
        )
        hits.sort(key=lambda h: (-h.score, h.key))
        if last is None:
            if len(hits) >= k or held(every) <= DRAW_ROWS:
                return hits[:k], every, {}
        elif len(hits) >= k and hits[k - 1].score > last:
            return hits[:k], every, {}
    hits, _ = _candidates(conn, where, ranking(every), k, window=False, exact=True, own=own)
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
    marked = add_bm25_marked(conn, stats, draw, counted, hits)
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
    own: str | None = None,
) -> tuple[list[Hit], float | None]:
    """Live rows by BM25 over ``match``, and the best score a live match left out may have.

    The bound is None when no live match was left out. With ``window``, the
    best FTS hits are ranked on the index alone and only those are joined to
    their rows (joining every hit costs as much as ranking it); otherwise
    the join comes first. ``exact`` asks for the ``k`` best, complete.
    ``matches`` (what ``match``'s phrases hold between them) past
    :data:`DRAW_ROWS` ranks, with ``window``, only the newest ``DRAW_ROWS``
    matches, and the older ones count as not left out (bound None). ``own``:
    see :func:`keyword_hits`; a window's near rows are checked in one statement
    (:func:`~.keyword_marks.own_hits`) and the refused ones dropped as rows
    out of scope are.
    """
    namespace, scope, params = where
    size = k if exact else max(WINDOW, 4 * k)
    if window:
        capped = matches > DRAW_ROWS
        ranked = (
            f"SELECT rowid AS hit, -bm25(memories_fts, {BM25_ARGS}) AS score "  # noqa: S608
            "FROM memories_fts WHERE memories_fts MATCH ?"
        )
        if capped:  # the newest matches first; bm25() runs on just those
            ranked = f"SELECT hit, score FROM ({ranked} ORDER BY rowid DESC LIMIT {DRAW_ROWS})"  # noqa: S608
        # One statement: the best hits on the index alone, then each joined to
        # its row (None when the row is out of scope). The unary + keeps the
        # planner on the rowid lookups. (Not ``rid``: the scope may name the row's.)
        top = conn.execute(
            f"SELECT t.hit, t.score, m.id, m.ctx_near FROM ({ranked} ORDER BY score DESC "  # noqa: S608
            f"LIMIT ?) AS t LEFT JOIN memories AS m ON m.rid = t.hit AND +m.namespace = ? "
            f"AND {scope}",
            (match, size, namespace, *params),
        ).fetchall()
        refused: set[int] = set()
        if own is not None:
            near = [int(r) for r, _, i, n in top if i is not None and n]
            refused = set(near) - own_hits(conn, own, near)
        hits = [
            Hit(str(i), int(r), float(sc))
            for r, sc, i, _ in top
            if i is not None and int(r) not in refused
        ]
        full = len(top) == size and not capped
        return hits, (min(float(sc) for _, sc, _, _ in top) if full else None)
    if own is not None:  # joined first: the scope's own few rows, each checked
        scope, params = f"{scope} AND {OWN_MATCH}", (*params, own)
    sql = (
        f"SELECT m.id, -bm25(memories_fts, {BM25_ARGS}) AS score, m.rid "  # noqa: S608
        "FROM memories_fts JOIN memories AS m ON m.rid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.namespace = ? AND {scope} "
        "ORDER BY score DESC, m.id LIMIT ?"
    )
    rows = conn.execute(sql, (match, namespace, *params, size)).fetchall()
    hits = [Hit(str(i), int(r), float(s)) for i, s, r in rows]
    return hits, (hits[-1].score if len(hits) == size and not exact else None)
