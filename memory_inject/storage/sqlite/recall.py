"""The scored half of ``SQLiteStore.recall``: keyword, vector and LIKE stages (spec 7.4).

Runs on a connection the engine has already taken, inside one read
transaction so every stage sees the same snapshot. What to run is one value,
a :class:`RecallRun` the engine builds (``SQLiteEngine._recall``); the query
vector in it is computed beforehand, outside the connection.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import attrs

from memory_inject.embedders import cosine_top_k, numpy_or_none
from memory_inject.models import MemoryEntry
from memory_inject.storage._names import asked_words, names_asked
from memory_inject.storage._substring import SubstringQuery
from memory_inject.storage._variants import distinct, with_variants
from memory_inject.storage.calibration import vector_score
from memory_inject.storage.day_vote import by_score, day_key, pick_by_day
from memory_inject.storage.fusion import (
    Fusion,
    RawScores,
    RecallInfo,
    content_words,
    fts_match,
    fuse,
)
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite.codec import (
    ENTRY_COLUMNS,
    decode_vector,
    fetch,
    fetch_entries,
    row_to_entry,
)
from memory_inject.storage.sqlite.ddl import own_match, tokens_match
from memory_inject.storage.sqlite.errors import is_locked
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.keyword_rank import keyword_hits
from memory_inject.storage.sqlite.keyword_terms import tokens_of_all
from memory_inject.storage.sqlite.term_stats import TermStats
from memory_inject.storage.sqlite.vector_load import KeywordsOnly
from memory_inject.storage.sqlite.vectors import ScopeVectors, VectorCache, VectorScope

__all__ = ["RecallRun", "scored_recall"]

_ID = ENTRY_COLUMNS.index("id")
_SESSION, _TS = ENTRY_COLUMNS.index("session_id"), ENTRY_COLUMNS.index("timestamp")


@attrs.frozen
class RecallRun:
    """One scored recall: the query, the live-row scope and the store's caches to use.

    ``scope`` (with its ``params``) is the store's live-row filter of ``namespace``;
    ``query_vec`` the query's embedding (None: keyword stages only) and ``degraded``
    what already went wrong computing it. ``narrow`` says the scope keeps few rows
    (a session or time filter), so the keyword stage filters before ranking rather
    than after. ``calibration`` is the embedder's ``(unrelated, related)`` cosine
    pair; ``stats`` the connection's cached index statistics (a fresh cache if
    None); ``vectors`` the store's cached matrices and the same scope for them
    (None scans the stored vectors); ``scope_tokens`` the session's index tokens
    for the keyword stage (``ddl.scope_tokens``); ``mirror`` the store's
    :class:`~.keyword_mirror.KeywordMirror` (keyword hits without FTS5 calls on
    small stores; None always asks FTS5).
    """

    namespace: str
    query: str
    limit: int
    scope: str
    params: Sequence[Any]
    query_vec: Sequence[float] | None
    fusion: Fusion
    degraded: str | None
    narrow: bool = False
    calibration: tuple[float, float] = (0.0, 1.0)
    stats: TermStats | None = None
    vectors: tuple[VectorCache, VectorScope] | None = None
    scope_tokens: Sequence[str] | None = None
    mirror: KeywordMirror | None = None


def scored_recall(conn: sqlite3.Connection, run: RecallRun) -> tuple[list[MemoryEntry], RecallInfo]:
    """Ranked entries and what happened for ``run`` (see :class:`RecallRun`)."""
    stats = run.stats or TermStats()
    # The vocabulary view is made outside the read transaction: made inside it, a recall
    # that failed (a damaged page) rolled it back, and every later recall on the
    # connection said "fts_failed: no such table" instead of the damage.
    stats.ready_vocab(conn)
    conn.execute("BEGIN")
    try:
        return _run(conn, run, stats)
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _run(
    conn: sqlite3.Connection, run: RecallRun, stats: TermStats
) -> tuple[list[MemoryEntry], RecallInfo]:
    namespace, scope, params, limit = run.namespace, run.scope, run.params, run.limit
    degraded = run.degraded
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    bm25: dict[str, float] = {}
    rows: dict[str, tuple[Any, ...]] = {}
    hits: ScopeVectors | None = None
    similarity: float | None = None
    loading = False
    if run.query_vec is not None:
        try:
            vector, hits, skipped, nearest_cos = _vector_stage(
                conn, namespace, scope, params, run.query_vec, limit * 2, run.vectors
            )
        except KeywordsOnly as exc:  # the vectors cannot be searched in time: keywords only
            loading, skipped, nearest_cos = True, 0, None
            degraded = f"{degraded}; {exc}" if degraded else str(exc)
        if nearest_cos is not None and any(run.query_vec):  # a zero vector says nothing
            similarity = vector_score(nearest_cos, run.calibration)
        if skipped:
            note = (
                f"nonfinite_vectors: {skipped} stored vectors of this scope are not finite "
                "numbers; those rows were searched by keyword only"
            )
            degraded = f"{degraded}; {note}" if degraded else note
        if nearest_cos is None and not loading and (other := _foreign(conn, run)):
            note = (
                f"foreign_vectors: {other} rows of this scope hold vectors of another size "
                "(another model) and none of this embedder's; searched by keyword only "
                "(embed_missing() embeds them again)"
            )
            degraded = f"{degraded}; {note}" if degraded else note
    nearest = len(vector)
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    if run.query_vec is None or loading or run.fusion.search_mode != "embedding":
        words, groups = with_variants(content_words(run.query))
        if groups is not None:
            words, groups = distinct(words, groups, tokens_of_all([w for w, _ in words]))
        if words:
            asked = asked_words(w for w, _ in words)
            named = functools.partial(names_asked, asked) if asked else None
            try:
                where = (namespace, scope, params)
                ranked = None
                tokens, mirror = run.scope_tokens, run.mirror
                # too_big true has refreshed the stats in this snapshot already.
                fresh = mirror is not None and mirror.too_big(conn, stats)
                if mirror is not None and not fresh:
                    try:
                        ranked = mirror.keyword_hits(
                            conn,
                            where,
                            words,
                            limit * 2,
                            scope_tokens=tokens,
                            rows=rows,
                            groups=groups,
                            named=named,
                        )
                    except sqlite3.OperationalError as exc:
                        if is_locked(exc) or "interrupt" in str(exc).lower():
                            raise
                        # A mirror that cannot be read backs off; FTS5 answers this recall.
                if ranked is None:
                    # A record with near context is a hit for its own words only
                    # (the mirror checks its postings instead).
                    ranked = keyword_hits(
                        conn,
                        stats,
                        where,
                        words,
                        limit * 2,
                        window=not run.narrow,
                        scope_match=None if tokens is None else tokens_match(tokens),
                        rows=rows,
                        refresh=not fresh,
                        own=own_match(fts_match(words) or '""'),
                        groups=groups,
                        named=named,
                    )
                keyword = [(i, score) for i, score, _ in ranked]
                bm25 = {i: b for i, _, b in ranked}
            except sqlite3.OperationalError as exc:
                if is_locked(exc) or "interrupt" in str(exc).lower():
                    raise  # locked: retried by the store; interrupted: the deadline passed
                degraded = degraded or f"fts_failed: {exc}"
        if not keyword and vector and (sub := SubstringQuery.of(run.query)).cjk:
            # A CJK question the word index found nothing for: the rows holding its pieces
            # are the keyword hits, so a row is not shown on its cosine alone (an English
            # model's cosines between CJK texts are high for any pair), and the memory
            # holding the question's words is found though not among the nearest rows.
            like = _like_stage(conn, namespace, scope, params, sub, limit * 2)
            keyword = [(r.id, score) for r, score in like]
            bm25 = dict(keyword)
    if similarity is not None and keyword and run.query_vec is not None:
        missing = _unembedded(conn, namespace, [i for i, _ in keyword], hits, len(run.query_vec))
        if missing:  # the nearest memory may be one of them: not known, so not told
            similarity = None
            note = (
                f"unembedded_rows: {missing} keyword hits hold no vector of this embedder "
                "(embed_missing() adds them); the prompt's similarity is not known"
            )
            degraded = f"{degraded}; {note}" if degraded else note
    vector, scores = _fusion_inputs(vector, hits, bm25, run.fusion, run.calibration)
    # The window's best, twice what is asked: the rows returned are chosen among them
    # with their day's vote (``day_vote``) where the fused order is the scores'.
    voted = by_score(run.fusion, bool(keyword), bool(vector))
    fused = fuse(keyword, vector, run.fusion, 2 * limit if voted else limit, scores)
    if fused:
        unread = [i for i, _ in fused if i not in rows]
        if unread:
            # The scope again: a hit the cached matrix let through is still never shown.
            by_id = f"{scope} AND id IN (SELECT value FROM json_each(?))"  # noqa: S608
            for row in fetch_entries(conn, namespace, by_id, (*params, json.dumps(unread))):
                rows[row[_ID]] = row
        if voted:
            fused = [p for p in fused if p[0] in rows]
            days = [day_key(rows[i][_SESSION], rows[i][_TS]) for i, _ in fused]
            fused = pick_by_day(fused, days, limit)
        entries = [row_to_entry(rows[i], s) for i, s in fused if i in rows]
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        return entries, RecallInfo(strategy, len(keyword), nearest, degraded, similarity)
    found = _like_stage(conn, namespace, scope, params, SubstringQuery.of(run.query), limit)
    strategy = "like" if found else "none"
    return [r.to_entry(s) for r, s in found], RecallInfo(strategy, 0, 0, degraded, similarity)


def _vector_stage(
    conn: sqlite3.Connection,
    namespace: str,
    scope: str,
    params: Sequence[Any],
    query_vec: Sequence[float],
    k: int,
    vectors: tuple[VectorCache, VectorScope] | None,
) -> tuple[list[tuple[str, float]], ScopeVectors | None, int, float | None]:
    """The ``k`` rows of the scope nearest ``query_vec`` as ``(id, cosine)``, cosine > 0,
    how many rows of the scope hold a vector that is not finite (never scored), and
    the nearest row's cosine (None: the scope holds no vector).

    With a :class:`VectorCache` (and numpy) the cosines come from the cached
    matrix and the whole scope's cosines are returned too; otherwise every
    vector of the scope is read and scanned.
    """
    if vectors is not None:
        found = vectors[0].scope(conn, namespace, vectors[1], query_vec)
        if found is not None:
            top = found.top(k)
            best = top[0][1] if top else None
            return [(i, c) for i, c in top if c > 0.0], found, found.skipped, best
    dim = len(query_vec)
    # Rows embedded by a model of another size are not comparable: skip them.
    sql = (
        f"SELECT id, embedding FROM memories WHERE namespace = ? AND {scope} "  # noqa: S608
        "AND embedding IS NOT NULL AND length(embedding) = ?"
    )
    rows = conn.execute(sql, (namespace, *params, 4 * dim)).fetchall()
    if not rows:
        return [], None, 0, None
    matrix: Any
    _np = numpy_or_none()
    if _np is not None:
        blob = b"".join(r[1] for r in rows)
        matrix = _np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim)
        finite = _np.isfinite(matrix).all(axis=1)
        skipped = int((~finite).sum())
        if skipped:
            rows = [r for r, ok in zip(rows, finite.tolist(), strict=True) if ok]
            matrix = matrix[finite]
            if not rows:
                return [], None, skipped, None
    else:  # pragma: no cover - exercised only without numpy
        matrix = [decode_vector(r[1]) for r in rows]
        skipped = 0
    nearest = cosine_top_k(query_vec, matrix, k)
    best = nearest[0][1] if nearest else None
    return [(str(rows[i][0]), s) for i, s in nearest if s > 0.0], None, skipped, best


def _foreign(conn: sqlite3.Connection, run: RecallRun) -> int:
    """How many live rows of the scope hold a vector of another size than the prompt's:
    asked only when the scope held none of its size (the vector stage found nothing)."""
    assert run.query_vec is not None  # noqa: S101 - asked after the vector stage only
    sql = (
        f"SELECT count(*) FROM memories WHERE namespace = ? AND {run.scope} "  # noqa: S608
        "AND embedding IS NOT NULL AND length(embedding) != ?"
    )
    found = conn.execute(sql, (run.namespace, *run.params, 4 * len(run.query_vec))).fetchone()
    return int(found[0])


def _unembedded(
    conn: sqlite3.Connection,
    namespace: str,
    ids: Sequence[str],
    hits: ScopeVectors | None,
    dim: int,
) -> int:
    """How many of the keyword hits ``ids`` hold no vector the prompt's can be compared
    with (written without the embedder, or by a model of another size): the scope's
    similarity (``min_prompt_similarity``) says nothing of them."""
    if hits is not None:
        have = hits.cosines(ids)
        ids = [i for i in ids if i not in have]
        if not ids:
            return 0
        # The cached matrix may not hold a row written since: the rows themselves say.
    sql = (
        "SELECT count(*) FROM memories WHERE namespace = ? AND id IN "
        "(SELECT value FROM json_each(?)) AND (embedding IS NULL OR length(embedding) != ?)"
    )
    return int(conn.execute(sql, (namespace, json.dumps(list(ids)), 4 * dim)).fetchone()[0])


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
    sub: SubstringQuery,
    limit: int,
) -> list[tuple[MemoryRecord, float]]:
    """Rows holding ``sub``'s words as substrings, newest first (those holding the most of
    a split CJK run's pieces first), scored (:meth:`SubstringQuery.scores`)."""
    if not sub.words:
        return []
    patterns = [p for p in sub.patterns() for _ in (0, 1)]
    arms = ["(content LIKE ? ESCAPE '\\' OR key LIKE ? ESCAPE '\\')"] * len(sub.words)
    where = f"{scope} AND ({' OR '.join(arms)}) ORDER BY "
    if sub.split:
        where += f"({' + '.join(arms)}) DESC, "
        patterns, limit_read = [*patterns, *patterns], sub.window(limit)
    else:
        limit_read = limit
    rows = fetch(
        conn,
        namespace,
        f"{where}updated_at DESC, rid DESC LIMIT ?",
        (*params, *patterns, limit_read),
    )
    return sub.best(rows, lambda r: (r.key, r.content), limit)
