"""The I/O-free recall core of :class:`~memory_inject.storage.postgres.PostgresStore`.

:func:`recall_steps` is a generator: it yields statements
(:class:`~memory_inject.storage._pg_queries.Stmt`) and is sent back their rows,
so the sync and the async store drive the very same logic.
User text never reaches ``to_tsquery`` syntax: the prompt is reduced to
``\\w+`` tokens, each single-quoted, OR-ed (``'tok1' | 'tok2'``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Generator, Sequence
from typing import Any

from attrs import define

from memory_inject.models import MemoryEntry
from memory_inject.storage._lexical import STOPWORDS, tokenize
from memory_inject.storage._pg_queries import Queries, Scope, Stmt, TermStats
from memory_inject.storage._pg_schema import RECALL_COLUMNS, row_to_record
from memory_inject.storage.fusion import Fusion, RecallInfo, fuse
from memory_inject.storage.records import MemoryRecord

__all__ = ["Plan", "like_patterns", "recall_steps", "tsquery_text"]

_TOKEN = re.compile(r"(\w+)(\*?)")
_MAX_TERMS = 32
_MAX_LIKE_WORDS = 8


@define
class Plan:
    """One recall's inputs; ``query=None`` is a time-only recall.

    ``rank_budget`` caps the keyword stage's ranking work (see
    :meth:`Queries.keyword`); ``terms`` are the statistics it needs, or None
    to read them first (the store caches them between recalls).
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


def _query_terms(query: str) -> list[tuple[str, str]]:
    """``(word, "*" or "")`` for each token; function words go unless nothing else is left."""
    found = _TOKEN.findall(query.lower())
    return [(w, p) for w, p in found if w not in STOPWORDS] or found


def tsquery_text(query: str) -> str | None:
    """``'tok1' | 'tok2':* ...`` from the query's word tokens, or None when it has none.

    The commonest function words are dropped unless nothing else is left; a
    trailing ``*`` makes a prefix term. Only ``\\w`` characters are ever quoted.
    """
    terms = dict.fromkeys(f"'{w}'{':*' if p else ''}" for w, p in _query_terms(query))
    return " | ".join(list(terms)[:_MAX_TERMS]) or None


def like_patterns(query: str) -> list[str]:
    """``%word%`` ILIKE patterns (wildcards escaped) for up to 8 words, as the SQLite store."""
    words = [w for w in dict.fromkeys(tokenize(query, drop_stopwords=True)) if len(w) >= 2]
    return [
        "%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for w in words[:_MAX_LIKE_WORDS]
    ]


def vector_literal(vector: Sequence[float]) -> str:
    """``vector`` in pgvector's text form, ``[x,y,...]``, for a ``::vector`` parameter."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


Outcome = tuple[list[MemoryEntry], RecallInfo]


def recall_steps(plan: Plan) -> Generator[Stmt, Any, Outcome]:
    """The recall contract, statement by statement (see the module docstring)."""
    q = plan.q
    if plan.query is None:
        rows = yield q.recent(plan.scope, plan.limit)
        entries = [row_to_record(r, RECALL_COLUMNS).to_entry(None) for r in rows]
        return entries, RecallInfo(strategy="recent")

    fetch = plan.limit * 2
    records: dict[str, MemoryRecord] = {}
    keyword: list[tuple[str, float]] = []
    vector: list[tuple[str, float]] = []
    if plan.vector is not None and any(plan.vector):
        for row in (yield q.nearest(plan.scope, vector_literal(plan.vector), fetch)):
            sim = row[-1]
            if sim is None or not math.isfinite(sim) or sim <= 0.0:
                continue
            rec = row_to_record(row[:-1], RECALL_COLUMNS)
            records[rec.id] = rec
            vector.append((rec.id, float(sim)))
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    tsq = tsquery_text(plan.query)
    if tsq is not None and (plan.vector is None or plan.fusion.search_mode != "embedding"):
        words = None
        if plan.rank_budget is not None and ":*" not in tsq:
            if plan.terms is None:
                [(lexemes, rows, table_rows)] = yield q.term_stats()
                plan.terms = TermStats.build(lexemes, rows, table_rows, plan.rank_budget)
                plan.terms_read = True
            if plan.terms.lexemes:
                words = " ".join(w for w, _ in _query_terms(plan.query)[:_MAX_TERMS])
        stmt = q.keyword(plan.scope, tsq, fetch, words, plan.terms)
        for row in (yield stmt):
            rec = row_to_record(row[:-1], RECALL_COLUMNS)
            records[rec.id] = rec
            keyword.append((rec.id, float(row[-1])))
    fused = fuse(keyword, vector, plan.fusion, plan.limit)
    if fused:
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        entries = [records[i].to_entry(min(1.0, max(0.0, float(s)))) for i, s in fused]
        return entries, RecallInfo(strategy, len(keyword), len(vector), plan.degraded)
    patterns = like_patterns(plan.query)
    rows = (yield q.like(plan.scope, patterns, plan.limit)) if patterns else []
    entries = [row_to_record(r, RECALL_COLUMNS).to_entry(1.0) for r in rows]
    return entries, RecallInfo("like" if entries else "none", 0, 0, plan.degraded)
