"""The scored half of ``SQLiteStore.recall``: keyword, vector and LIKE stages (spec 7.4).

Runs on a connection the store has already locked, inside one read
transaction so every stage sees the same snapshot. The query vector is
computed by the store beforehand, outside the lock.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_inject.embedders import cosine_top_k, numpy_or_none
from memory_inject.models import MemoryEntry
from memory_inject.storage._fts_terms import (
    corpus_size,
    document_frequencies,
    ensure_vocab,
    tokens_of,
)
from memory_inject.storage._lexical import tokenize
from memory_inject.storage._sqlite_schema import decode_vector, fetch, is_locked
from memory_inject.storage._vector_cache import ScopeVectors, VectorCache, VectorScope
from memory_inject.storage.calibration import (
    MAX_SUBSTRING_CHARS,
    MIN_SUBSTRING_CHARS,
    coverage,
    substring_score,
    term_weight,
    vector_score,
)
from memory_inject.storage.fusion import (
    Fusion,
    RawScores,
    RecallInfo,
    content_words,
    fts_match,
    fuse,
)
from memory_inject.storage.records import MemoryRecord

__all__ = ["scored_recall"]

#: bm25() column weights for key, content, tags, the two previous records of
#: the session and the day words: a key hit counts double, context hits less.
_BM25_WEIGHTS = "2.0, 1.0, 1.0, 0.5, 0.25, 1.0"
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
    calibration: tuple[float, float] = (0.0, 1.0),
    vectors: tuple[VectorCache, VectorScope] | None = None,
) -> tuple[list[MemoryEntry], RecallInfo]:
    """Ranked entries and what happened; ``scope`` is the store's live-row filter.

    ``narrow`` says the scope keeps few rows (a session or time filter), so
    the keyword stage filters before ranking rather than after.
    ``calibration`` is the embedder's ``(unrelated, related)`` cosine pair;
    ``vectors`` the store's cached matrices and the same scope for them
    (None scans the stored vectors).
    """
    conn.execute("BEGIN")
    try:
        return _run(
            conn,
            namespace,
            query,
            limit,
            scope,
            params,
            query_vec,
            fusion,
            degraded,
            narrow,
            calibration,
            vectors,
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
    calibration: tuple[float, float],
    vectors: tuple[VectorCache, VectorScope] | None,
) -> tuple[list[MemoryEntry], RecallInfo]:
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    bm25: dict[str, float] = {}
    hits: ScopeVectors | None = None
    if query_vec is not None:
        vector, hits = _vector_stage(conn, namespace, scope, params, query_vec, limit * 2, vectors)
    nearest = len(vector)
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    if query_vec is None or fusion.search_mode != "embedding":
        words = content_words(query)
        match = fts_match(words)
        if match is not None:
            try:
                raw = _keyword_stage(
                    conn, namespace, scope, params, match, limit * 2, window=not narrow
                )
                if raw:
                    keyword = _calibrated(conn, words, match, raw)
                    bm25 = {i: b for i, b, _ in raw}
            except sqlite3.OperationalError as exc:
                if is_locked(exc):
                    raise
                degraded = degraded or f"fts_failed: {exc}"
    vector, scores = _fusion_inputs(vector, hits, bm25, fusion, calibration)
    fused = fuse(keyword, vector, fusion, limit, scores)
    if fused:
        ids = json.dumps([i for i, _ in fused])
        rows = fetch(conn, namespace, "id IN (SELECT value FROM json_each(?))", (ids,))
        by_id = {r.id: r for r in rows}
        entries = [by_id[i].to_entry(s) for i, s in fused if i in by_id]
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        return entries, RecallInfo(strategy, len(keyword), nearest, degraded)
    found = _like_stage(conn, namespace, scope, params, query, limit)
    strategy = "like" if found else "none"
    return [r.to_entry(s) for r, s in found], RecallInfo(strategy, 0, 0, degraded)


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
        f"SELECT rowid, {marks} FROM memories_fts "  # noqa: S608 - our fragments
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
        f"SELECT m.id, -bm25(memories_fts, {_BM25_WEIGHTS}) AS score, m.rid "  # noqa: S608
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
    ranked = sorted(
        ((str(i), score_of[int(r)], int(r)) for r, i in live), key=lambda p: (-p[1], p[0])
    )
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
    vectors: tuple[VectorCache, VectorScope] | None,
) -> tuple[list[tuple[str, float]], ScopeVectors | None]:
    """The ``k`` rows of the scope nearest ``query_vec`` as ``(id, cosine)``, cosine > 0.

    With a :class:`VectorCache` (and numpy) the cosines come from the cached
    matrix and the whole scope's cosines are returned too; otherwise every
    vector of the scope is read and scanned.
    """
    if vectors is not None:
        found = vectors[0].scope(conn, namespace, vectors[1], query_vec)
        if found is not None:
            return [(i, c) for i, c in found.top(k) if c > 0.0], found
    dim = len(query_vec)
    # Rows embedded by a model of another size are not comparable: skip them.
    sql = (
        f"SELECT id, embedding FROM memories WHERE namespace = ? AND {scope} "  # noqa: S608
        "AND embedding IS NOT NULL AND length(embedding) = ?"
    )
    rows = conn.execute(sql, (namespace, *params, 4 * dim)).fetchall()
    if not rows:
        return [], None
    matrix: Any
    _np = numpy_or_none()
    if _np is not None:
        blob = b"".join(r[1] for r in rows)
        matrix = _np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim)
    else:  # pragma: no cover - exercised only without numpy
        matrix = [decode_vector(r[1]) for r in rows]
    top = cosine_top_k(query_vec, matrix, k)
    return [(str(rows[i][0]), s) for i, s in top if s > 0.0], None


def _fusion_inputs(
    vector: list[tuple[str, float]],
    hits: ScopeVectors | None,
    bm25: dict[str, float],
    fusion: Fusion,
    calibration: tuple[float, float],
) -> tuple[list[tuple[str, float]], RawScores | None]:
    """Calibrated vector scores for :func:`fuse`, and the raw scores ``"minmax"`` ranks by.

    For ``"minmax"`` the keyword hits' own cosines join the vector list, so a
    hit both stages support reports both, whether or not it was among the
    nearest rows.
    """
    raw: RawScores | None = None
    if fusion.mode == "minmax" and hits is not None and vector:
        cos = dict(vector)
        extra = hits.cosines(k for k in bm25 if k not in cos)
        cos.update(extra)
        vector = [*vector, *extra.items()]
        raw = RawScores(bm25=bm25, cosine=cos, low=hits.low, high=hits.high)
    return [(i, vector_score(c, calibration)) for i, c in vector], raw


def _like_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    query: str,
    limit: int,
) -> list[tuple[MemoryRecord, float]]:
    """Rows holding query words as substrings, scored by :func:`substring_score`.

    Only words of ``MIN_SUBSTRING_CHARS`` to ``MAX_SUBSTRING_CHARS`` characters
    are searched (at most ``_LIKE_TERMS`` of them); every content word of the
    query counts in the share, so a hit on one word of four scores low.
    """
    every = list(dict.fromkeys(tokenize(query, drop_stopwords=True)))
    words = [w for w in every if MIN_SUBSTRING_CHARS <= len(w) <= MAX_SUBSTRING_CHARS]
    words = words[:_LIKE_TERMS]
    if not words:
        return []
    patterns: list[str] = []
    for w in words:
        escaped = w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        patterns += [f"%{escaped}%", f"%{escaped}%"]
    cond = " OR ".join(["content LIKE ? ESCAPE '\\' OR key LIKE ? ESCAPE '\\'"] * len(words))
    where = f"{scope} AND ({cond}) ORDER BY updated_at DESC, rid DESC LIMIT ?"
    rows = fetch(conn, namespace, where, (*params, *patterns, limit))
    scored = []
    for r in rows:
        text = f"{r.key}\n{r.content}".lower()
        found = sum(1 for w in words if w in text)
        scored.append((r, substring_score(found, len(every))))
    scored.sort(key=lambda p: -p[1])
    return scored
