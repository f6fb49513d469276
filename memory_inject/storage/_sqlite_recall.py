"""The scored half of ``SQLiteStore.recall``: keyword, vector and LIKE stages (spec 7.4).

Runs on a connection the store has already locked, inside one read
transaction so every stage sees the same snapshot. The query vector is
computed by the store beforehand, outside the lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_inject.embedders import cosine_top_k, numpy_or_none
from memory_inject.models import MemoryEntry
from memory_inject.storage._lexical import tokenize
from memory_inject.storage._sqlite_schema import decode_vector, fetch, is_locked
from memory_inject.storage.fusion import Fusion, RecallInfo, build_fts_query, fuse
from memory_inject.storage.records import MemoryRecord

__all__ = ["scored_recall"]

#: bm25() column weights for key, content, tags: a hit in the key counts double.
_BM25_WEIGHTS = "2.0, 1.0, 1.0"
#: How many FTS hits are ranked before the scope filter (see ``_keyword_stage``).
_WINDOW = 64
#: The LIKE fallback looks for at most this many words (zeroclaw's limit).
_LIKE_TERMS = 8


def scored_recall(
    conn: sqlite3.Connection,
    *,
    namespace: str,
    query: str,
    limit: int,
    scope: str,
    params: Sequence[Any],
    query_vec: Sequence[float] | None,
    fusion: Fusion,
    degraded: str | None,
    narrow: bool = False,
) -> tuple[list[MemoryEntry], RecallInfo]:
    """Ranked entries and what happened; ``scope`` is the store's live-row filter.

    ``narrow`` says the scope keeps few rows (a session or time filter), so
    the keyword stage filters before ranking rather than after.
    """
    conn.execute("BEGIN")
    try:
        return _run(
            conn, namespace, query, limit, scope, params, query_vec, fusion, degraded, narrow
        )
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _run(
    conn: sqlite3.Connection,
    namespace: str,
    query: str,
    limit: int,
    scope: str,
    params: Sequence[Any],
    query_vec: Sequence[float] | None,
    fusion: Fusion,
    degraded: str | None,
    narrow: bool,
) -> tuple[list[MemoryEntry], RecallInfo]:
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    if query_vec is not None:
        vector = _vector_stage(conn, namespace, scope, params, query_vec, limit * 2)
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    if query_vec is None or fusion.search_mode != "embedding":
        match = build_fts_query(query)
        if match is not None:
            try:
                keyword = _keyword_stage(
                    conn, namespace, scope, params, match, limit * 2, window=not narrow
                )
            except sqlite3.OperationalError as exc:
                if is_locked(exc):
                    raise
                degraded = degraded or f"fts_failed: {exc}"
    fused = fuse(keyword, vector, fusion, limit)
    if fused:
        ids = json.dumps([i for i, _ in fused])
        rows = fetch(conn, namespace, "id IN (SELECT value FROM json_each(?))", (ids,))
        by_id = {r.id: r for r in rows}
        entries = [by_id[i].to_entry(s) for i, s in fused if i in by_id]
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        return entries, RecallInfo(strategy, len(keyword), len(vector), degraded)
    found = _like_stage(conn, namespace, scope, params, query, limit)
    strategy = "like" if found else "none"
    return [r.to_entry(1.0) for r in found], RecallInfo(strategy, 0, 0, degraded)


def _keyword_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    match: str,
    k: int,
    *,
    window: bool = True,
) -> list[tuple[str, float]]:
    """The ``k`` best live rows by BM25 (higher is better), ties by id.

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
        f"SELECT m.id, -bm25(memories_fts, {_BM25_WEIGHTS}) AS score "  # noqa: S608 - our fragments
        "FROM memories_fts JOIN memories AS m ON m.rid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.namespace = ? AND {scope} "
        "ORDER BY score DESC, m.id LIMIT ?"
    )
    rows = conn.execute(sql, (match, namespace, *params, k)).fetchall()
    return [(str(i), float(s)) for i, s in rows]


def _windowed(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    match: str,
    k: int,
) -> list[tuple[str, float]] | None:
    """Rank the best ``_WINDOW`` FTS hits, then filter them; None when that may be inexact.

    Exact when every hit fit in the window, or when ``k`` hits survive the
    filter and the ``k``-th scores strictly above the window's last (so no
    hit outside the window could rank or tie with it).
    """
    size = max(_WINDOW, 4 * k)
    top = conn.execute(
        f"SELECT rowid, -bm25(memories_fts, {_BM25_WEIGHTS}) AS score FROM memories_fts "  # noqa: S608
        "WHERE memories_fts MATCH ? ORDER BY score DESC LIMIT ?",
        (match, size),
    ).fetchall()
    if not top:
        return []
    score_of = {int(rid): float(score) for rid, score in top}
    # The unary + keeps the planner on the rowid lookups: left to itself it
    # walks the whole namespace index and tests each row against the list.
    live = conn.execute(
        "SELECT rid, id FROM memories WHERE rid IN (SELECT value FROM json_each(?)) "  # noqa: S608
        f"AND +namespace = ? AND {scope}",
        (json.dumps(list(score_of)), namespace, *params),
    ).fetchall()
    ranked = sorted(((str(i), score_of[int(r)]) for r, i in live), key=lambda p: (-p[1], p[0]))
    if len(top) < size or (len(ranked) >= k and ranked[k - 1][1] > float(top[-1][1])):
        return ranked[:k]
    return None


def _vector_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    query_vec: Sequence[float],
    k: int,
) -> list[tuple[str, float]]:
    dim = len(query_vec)
    # Rows embedded by a model of another size are not comparable: skip them.
    sql = (
        f"SELECT id, embedding FROM memories WHERE namespace = ? AND {scope} "  # noqa: S608
        "AND embedding IS NOT NULL AND length(embedding) = ?"
    )
    rows = conn.execute(sql, (namespace, *params, 4 * dim)).fetchall()
    if not rows:
        return []
    matrix: Any
    _np = numpy_or_none()
    if _np is not None:
        blob = b"".join(r[1] for r in rows)
        matrix = _np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim)
    else:  # pragma: no cover - exercised only without numpy
        matrix = [decode_vector(r[1]) for r in rows]
    top = cosine_top_k(query_vec, matrix, k)
    return [(str(rows[i][0]), s) for i, s in top if s > 0.0]


def _like_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    query: str,
    limit: int,
) -> list[MemoryRecord]:
    words = [w for w in dict.fromkeys(tokenize(query, drop_stopwords=True)) if len(w) >= 2]
    words = words[:_LIKE_TERMS]
    if not words:
        return []
    patterns: list[str] = []
    for w in words:
        escaped = w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        patterns += [f"%{escaped}%", f"%{escaped}%"]
    cond = " OR ".join(["content LIKE ? ESCAPE '\\' OR key LIKE ? ESCAPE '\\'"] * len(words))
    where = f"{scope} AND ({cond}) ORDER BY updated_at DESC, rid DESC LIMIT ?"
    return fetch(conn, namespace, where, (*params, *patterns, limit))
