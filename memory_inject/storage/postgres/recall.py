"""The I/O-free recall core of :class:`~memory_inject.storage.postgres.PostgresStore`.

:func:`recall_steps` is a generator: it yields statements
(:class:`~memory_inject.storage.postgres.queries.Stmt`) and is sent back their rows,
so the engine's sync and async drivers run the very same logic.
User text never reaches ``to_tsquery`` syntax: the prompt is reduced to
``\\w+`` tokens, each single-quoted, OR-ed (``'tok1' | 'tok2'``).

Every path scores on the calibrated scale of
:mod:`memory_inject.storage.calibration`, as the SQLite store does: keyword
hits are ranked by ``ts_rank_cd`` and scored by their coverage of the query
(``terms``), vector hits by :func:`vector_score`, both fused by
:func:`fuse`, and LIKE hits by :func:`substring_score`.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import Any

from attrs import define, field

from memory_inject.models import MemoryEntry
from memory_inject.storage._substring import SubstringQuery
from memory_inject.storage.calibration import vector_score
from memory_inject.storage.fusion import Fusion, RecallInfo, content_words, fuse
from memory_inject.storage.postgres.queries import Queries, Scope, Stmt, TermStats
from memory_inject.storage.postgres.schema import RECALL_COLUMNS, row_to_record
from memory_inject.storage.postgres.terms import (
    frequency_queries,
    lexeme_stmt,
    probes,
    remember,
    score_hits,
    terms_of,
    to_count,
)

__all__ = ["RecallRun", "like_patterns", "recall_steps", "tsquery_text"]

_MAX_TERMS = 64
#: The keyword stage ranks at least this many hits by ts_rank_cd before they
#: are ordered by their calibrated score (ts_rank_cd knows no idf).
_KEYWORD_WINDOW = 64
_ID = RECALL_COLUMNS.index("id")


@define
class RecallRun:
    """One recall's inputs; ``query=None`` is a time-only recall.

    ``rank_budget`` caps the keyword stage's ranking work (see
    :meth:`Queries.keyword`); ``terms`` are the statistics it needs, or None
    to read them first (the engine caches them between recalls).
    ``calibration`` is the embedder's ``(unrelated, related)`` cosine pair and
    ``lexemes`` the engine's cache of query words' lexemes (``terms``).
    """

    q: Queries
    scope: Scope
    limit: int
    fusion: Fusion
    query: str | None = None
    vector: Sequence[float] | None = None
    degraded: str | None = None
    rank_budget: int | None = None
    terms: TermStats | None = None
    terms_read: bool = False
    calibration: tuple[float, float] = (0.0, 1.0)
    lexemes: dict[str, tuple[str, ...]] = field(factory=dict)


def tsquery_text(query: str) -> str | None:
    """``'tok1' | 'tok2':* ...`` from the query's content words, or None when it has none.

    The words are :func:`~memory_inject.storage.fusion.content_words` (the
    SQLite store's terms); a trailing ``*`` makes a prefix term. Only ``\\w``
    characters are ever quoted.
    """
    return _tsquery(content_words(query, max_terms=_MAX_TERMS))


def _tsquery(words: Sequence[tuple[str, bool]]) -> str | None:
    return " | ".join(f"'{w}'{':*' if p else ''}" for w, p in words) or None


def like_patterns(query: str) -> list[str]:
    """``%word%`` ILIKE patterns (wildcards escaped) for the words of :class:`SubstringQuery`."""
    return SubstringQuery.of(query).patterns()


def vector_literal(vector: Sequence[float]) -> str:
    """``vector`` in pgvector's text form, ``[x,y,...]``, for a ``::vector`` parameter."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


Outcome = tuple[list[MemoryEntry], RecallInfo]


def recall_steps(run: RecallRun) -> Generator[Stmt, Any, Outcome]:
    """The recall contract, statement by statement (see the module docstring)."""
    q = run.q
    if run.query is None:
        rows = yield q.recent(run.scope, run.limit)
        entries = [row_to_record(r, RECALL_COLUMNS).to_entry(None) for r in rows]
        return entries, RecallInfo(strategy="recent")

    fetch = run.limit * 2
    # Rows become records only once fused: building one costs more than its SQL.
    records: dict[str, Sequence[Any]] = {}
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    if run.vector is not None and any(run.vector):
        for row in (yield q.nearest(run.scope, vector_literal(run.vector), fetch)):
            sim = row[-1]
            if sim is None or not math.isfinite(sim) or sim <= 0.0:
                continue
            rid = str(row[_ID])
            records[rid] = row[:-1]
            vector.append((rid, vector_score(float(sim), run.calibration)))
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    if run.vector is None or run.fusion.search_mode != "embedding":
        found = yield from _keyword_steps(run, max(fetch, _KEYWORD_WINDOW))
        for row, score in found:
            rid = str(row[_ID])
            records[rid] = row
            keyword.append((rid, score))
    fused = fuse(keyword, vector, run.fusion, run.limit)
    if fused:
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        entries = [
            row_to_record(records[i], RECALL_COLUMNS).to_entry(min(1.0, max(0.0, float(s))))
            for i, s in fused
        ]
        return entries, RecallInfo(strategy, len(keyword), len(vector), run.degraded)
    sub = SubstringQuery.of(run.query)
    patterns = sub.patterns()
    rows = (yield q.like(run.scope, patterns, run.limit)) if patterns else []
    like_hits = [row_to_record(r, RECALL_COLUMNS) for r in rows]
    scored = sorted(((r, sub.score(r.key, r.content)) for r in like_hits), key=lambda p: -p[1])
    entries = [rec.to_entry(score) for rec, score in scored]
    return entries, RecallInfo("like" if entries else "none", 0, 0, run.degraded)


def _keyword_steps(
    run: RecallRun, fetch: int
) -> Generator[Stmt, Any, list[tuple[Sequence[Any], float]]]:
    """The keyword hits' rows in ts_rank_cd order, each with its calibrated score."""
    q = run.q
    words = content_words(run.query or "", max_terms=_MAX_TERMS)
    if not words:
        return []
    missing = [w for w, _ in words if w not in run.lexemes]
    if missing:
        remember(run.lexemes, (yield Stmt(lexeme_stmt(), (missing,))))
    terms = terms_of(words, run.lexemes)
    if not terms:
        return []
    if run.terms is None:
        [(lexemes, rows, table_rows, counted)] = yield q.term_stats()
        run.terms = TermStats.build(lexemes, rows, table_rows, run.rank_budget, counted)
        run.terms_read = True
    tsq = _tsquery([w for w in words if run.lexemes.get(w[0])]) or ""
    ranked = None
    if run.rank_budget is not None and ":*" not in tsq and run.terms.lexemes:
        ranked = " ".join(w for w, _ in words)
    wanted = to_count(terms, run.terms)
    stmt = q.keyword(
        run.scope,
        tsq,
        fetch,
        ranked,
        run.terms,
        probes=probes(terms),
        frequencies=frequency_queries(wanted),
    )
    rows = list((yield stmt))
    if not rows:
        return []
    width = len(RECALL_COLUMNS)
    counted = {w: int(c) for w, c in zip(wanted, rows[0][width + 2], strict=True)}
    scores = score_hits(terms, counted, run.terms, [r[width + 1] for r in rows])
    return [(r[:width], score) for r, score in zip(rows, scores, strict=True)]
