"""The keyword stage as it was before the rarest-word draw (ad1dd79), kept as a test oracle.

Ranks the whole OR query inside FTS5 and scores coverage with ``highlight()``
over all of it; ``keyword_hits`` must give the same ids and scores.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_inject.storage.calibration import coverage, term_weight
from memory_inject.storage.sqlite.keyword_terms import (
    corpus_size,
    document_frequencies,
    ensure_vocab,
    tokens_of,
)

_BM25_WEIGHTS = "2.0, 1.0, 1.0, 0.5, 0.25, 1.0"
_WINDOW = 64


def reference_hits(
    conn: sqlite3.Connection,
    where: tuple[str, str, Sequence[Any]],
    words: Sequence[tuple[str, bool]],
    match: str,
    k: int,
    *,
    window: bool = True,
) -> list[tuple[str, float, float]]:
    """The old stage's ``(id, coverage, bm25)`` list, in its BM25 order."""
    namespace, scope, params = where
    raw = _keyword_stage(conn, namespace, scope, params, match, k, window=window)
    scored = _calibrated(conn, words, match, raw) if raw else []
    return [(key, score, bm25) for (key, score), (_, bm25, _) in zip(scored, raw, strict=True)]


#: highlight() marks; control characters never survive the tokenizer as words.
_OPEN, _CLOSE = "\x01", "\x02"
_SPAN = re.compile("\x01([^\x02]*)\x02")
#: What a hit in each indexed column proves: key, content, tags, the previous
#: record, the one before it, the day words.
_COLUMN_WEIGHTS = (1.0, 1.0, 1.0, 0.5, 0.25, 1.0)


def _calibrated(
    conn: sqlite3.Connection,
    words: Sequence[tuple[str, bool]],
    match: str,
    raw: Sequence[tuple[str, float, int]],
) -> list[tuple[str, float]]:
    """Each hit's :func:`coverage` of the query, in BM25 order (ties keep it).

    The query's terms are weighed by :func:`term_weight` from the index's own
    statistics; which terms a row holds, and in which column, comes from
    FTS5's ``highlight()`` on just these rows.
    """
    ensure_vocab(conn)
    terms = [(tokens_of(w), star) for w, star in words]
    terms = [(ts, star) for ts, star in terms if ts]
    df = document_frequencies(conn, [t for ts, _ in terms for t in ts])
    rows = corpus_size(conn)
    weights = [term_weight(rows, min(df.get(t, 0) for t in ts)) for ts, _ in terms]
    marks = ", ".join(f"highlight(memories_fts, {c}, ?, ?)" for c in range(len(_COLUMN_WEIGHTS)))
    sql = (
        f"SELECT rowid, {marks} FROM memories_fts "
        "WHERE memories_fts MATCH ? AND rowid IN (SELECT value FROM json_each(?))"
    )
    args = [_OPEN, _CLOSE] * len(_COLUMN_WEIGHTS)
    found = {
        int(r[0]): r[1:]
        for r in conn.execute(sql, (*args, match, json.dumps([rid for _, _, rid in raw])))
    }
    out = []
    for key, _, rid in raw:
        shown = found.get(rid)
        present = [0.0] * len(terms)
        if shown is not None:
            for text, weight in zip(shown, _COLUMN_WEIGHTS, strict=True):
                if not text or _OPEN not in text:
                    continue
                toks = {t for span in _SPAN.findall(text) for t in tokens_of(span)}
                for i, (ts, star) in enumerate(terms):
                    if present[i] < weight and _holds(toks, ts, star):
                        present[i] = weight
        out.append((key, coverage(weights, present)))
    return out


def _holds(tokens: set[str], term: tuple[str, ...], prefix: bool) -> bool:
    if prefix:
        return all(any(t.startswith(p) for t in tokens) for p in term)
    return all(t in tokens for t in term)


def _keyword_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    match: str,
    k: int,
    *,
    window: bool = True,
) -> list[tuple[str, float, int]]:
    """The ``k`` best live rows by BM25 (higher is better), ties by id: ``(id, bm25, rid)``.

    Joining every FTS hit to its row to apply the scope costs as much as the
    ranking itself, so by default the best hits are ranked on the index alone
    and only those are filtered (:func:`_windowed`). When that cannot be
    exact, or ``window`` is false, the full join runs.
    """
    if window:
        found = _windowed(conn, namespace, scope, params, match, k)
        if found is not None:
            return found
    sql = (
        f"SELECT m.id, -bm25(memories_fts, {_BM25_WEIGHTS}) AS score, m.rid "
        "FROM memories_fts JOIN memories AS m ON m.rid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.namespace = ? AND {scope} "
        "ORDER BY score DESC, m.id LIMIT ?"
    )
    rows = conn.execute(sql, (match, namespace, *params, k)).fetchall()
    return [(str(i), float(s), int(r)) for i, s, r in rows]


def _windowed(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    match: str,
    k: int,
) -> list[tuple[str, float, int]] | None:
    """Rank the best ``_WINDOW`` FTS hits, then filter them; None when that may be inexact.

    Exact when every hit fit in the window, or when ``k`` hits survive the
    filter and the ``k``-th scores strictly above the window's last (so no
    hit outside the window could rank or tie with it).
    """
    size = max(_WINDOW, 4 * k)
    top = conn.execute(
        f"SELECT rowid, -bm25(memories_fts, {_BM25_WEIGHTS}) AS score FROM memories_fts "
        "WHERE memories_fts MATCH ? ORDER BY score DESC LIMIT ?",
        (match, size),
    ).fetchall()
    if not top:
        return []
    score_of = {int(rid): float(score) for rid, score in top}
    # The unary + keeps the planner on the rowid lookups: left to itself it
    # walks the whole namespace index and tests each row against the list.
    live = conn.execute(
        "SELECT rid, id FROM memories WHERE rid IN (SELECT value FROM json_each(?)) "
        f"AND +namespace = ? AND {scope}",
        (json.dumps(list(score_of)), namespace, *params),
    ).fetchall()
    ranked = sorted(
        ((str(i), score_of[int(r)], int(r)) for r, i in live), key=lambda p: (-p[1], p[0])
    )
    if len(top) < size or (len(ranked) >= k and ranked[k - 1][1] > float(top[-1][1])):
        return ranked[:k]
    return None
