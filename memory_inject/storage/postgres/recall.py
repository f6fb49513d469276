"""The I/O-free recall core of :class:`~memory_inject.storage.postgres.PostgresStore`.

:func:`recall_steps` is a generator: it yields statements
(:class:`~memory_inject.storage.postgres.queries.Stmt`) and is sent back their rows,
so the engine's sync and async drivers run the very same logic.
User text never reaches ``to_tsquery`` syntax: the prompt is reduced to
``\\w+`` tokens, each single-quoted, OR-ed (``'tok1' | 'tok2'``).

Every path scores on the calibrated scale of
:mod:`memory_inject.storage.calibration`, as the SQLite store does: keyword
hits are ranked by ``ts_rank`` and scored by their coverage of the query
(``terms``), vector hits by :func:`vector_score`, both fused by
:func:`fuse`, and LIKE hits by :func:`substring_score`. ``"minmax"`` fusion
(:data:`~memory_inject.storage.fusion.MODEL_FUSION`, a model embedder's default
on both engines) ranks by raw scores gathered in :class:`Raw` on the way.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import Any

from attrs import define, field
from psycopg import sql

from memory_inject.models import MemoryEntry
from memory_inject.storage._names import asked_words, names_asked
from memory_inject.storage._substring import SubstringQuery
from memory_inject.storage._variants import distinct, with_variants
from memory_inject.storage.calibration import vector_score
from memory_inject.storage.day_vote import by_score, day_key, pick_by_day
from memory_inject.storage.fusion import Fusion, RawScores, RecallInfo, content_words, fuse
from memory_inject.storage.postgres.day_numbers import (
    DayWords,
    day_stmt,
    number_lexemes,
    number_terms,
)
from memory_inject.storage.postgres.queries import Queries, Scope, Stmt, TermStats
from memory_inject.storage.postgres.schema import RECALL_COLUMNS, row_to_record
from memory_inject.storage.postgres.terms import (
    frequencies,
    frequency_queries,
    kept_plurals,
    lexeme_stmt,
    probes,
    remember,
    score_hits,
    terms_of,
    to_count,
)

__all__ = ["Raw", "RecallRun", "like_patterns", "recall_steps", "tsquery_text"]

_MAX_TERMS = 64
#: The keyword stage ranks at least this many hits by ts_rank before they
#: are ordered by their calibrated score (ts_rank knows no idf).
_KEYWORD_WINDOW = 64
_ID = RECALL_COLUMNS.index("id")
_CONTENT, _KEY = RECALL_COLUMNS.index("content"), RECALL_COLUMNS.index("key")
_SESSION, _TS = RECALL_COLUMNS.index("session_id"), RECALL_COLUMNS.index("timestamp")


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
    #: The engine's ``epoch`` when the run began: statistics read by a run that a write
    #: of the engine's overtook are not cached.
    epoch: int = 0
    calibration: tuple[float, float] = (0.0, 1.0)
    lexemes: dict[str, tuple[str, ...]] = field(factory=dict)


def tsquery_text(query: str) -> str | None:
    """``'tok1' | 'tok2':* ...`` from the query's content words, or None when it has none.

    The words are :func:`~memory_inject.storage.fusion.content_words` (the
    SQLite store's terms); a trailing ``*`` makes a prefix term. Only ``\\w``
    characters are ever quoted.
    """
    return _tsquery(with_variants(content_words(query, max_terms=_MAX_TERMS), kept_plurals)[0])


def _tsquery(words: Sequence[tuple[str, bool]]) -> str | None:
    return " | ".join(f"'{w}'{':*' if p else ''}" for w, p in words) or None


def like_patterns(query: str) -> list[str]:
    """``%word%`` ILIKE patterns (wildcards escaped) for the words of :class:`SubstringQuery`."""
    return SubstringQuery.of(query).patterns()


def vector_literal(vector: Sequence[float]) -> str:
    """``vector`` in pgvector's text form, ``[x,y,...]``, for a ``::vector`` parameter."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


Outcome = tuple[list[MemoryEntry], RecallInfo]


@define
class Raw:
    """What ``"minmax"`` fusion ranks by, gathered while the stages run (:class:`RawScores`).

    ``low``/``high`` start from the scope's farthest row and nearest rows
    (pgvector's index, as SQLite's graph finds them) and widen to every
    cosine seen, so no candidate falls outside them.
    """

    cosine: dict[str, float] = field(factory=dict)
    keyword: dict[str, float] = field(factory=dict)
    hit_cosine: dict[str, float] = field(factory=dict)
    low: float = math.inf
    high: float = -math.inf

    def span(self, *cosines: float | None) -> None:
        """Widen ``low``/``high`` to the finite ``cosines``."""
        for c in cosines:
            if c is not None and math.isfinite(c):
                self.low, self.high = min(self.low, float(c)), max(self.high, float(c))

    def window(
        self, found: list[tuple[Sequence[Any], float]], width: int, size: int
    ) -> list[tuple[Sequence[Any], float]]:
        """The ``size`` best keyword hits by score (ties in rank order), their raw scores noted.

        SQLite's window is the ``size`` best by BM25, and BM25 is its raw keyword
        score. PostgreSQL has no BM25 and ``ts_rank`` knows no idf, so the raw
        score here is the hit's coverage of the query: it weighs each query word
        by its idf as BM25 does, and is the same number on both engines.
        """
        kept = sorted(found, key=lambda p: -p[1])[:size]
        for row, score in kept:
            rid = str(row[_ID])
            self.keyword[rid] = score
            cos = row[width + 3]
            if cos is not None and math.isfinite(cos):
                self.hit_cosine[rid] = float(cos)
                self.span(cos)
        return kept

    def unseen(self, keyword: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """The cosines of keyword hits the vector stage did not return (they join its list)."""
        out = [(i, self.hit_cosine[i]) for i, _ in keyword if i in self.hit_cosine]
        out = [(i, c) for i, c in out if i not in self.cosine]
        self.cosine.update(out)
        return out

    def scores(self) -> RawScores:
        """The raw scores for :func:`fuse`."""
        low, high = (self.low, self.high) if self.low <= self.high else (0.0, 0.0)
        return RawScores(bm25=self.keyword, cosine=self.cosine, low=low, high=high)


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
    live = run.vector is not None and any(run.vector)
    raw = Raw() if live and run.fusion.mode == "minmax" else None
    nearest: float | None = None  # the scope's greatest cosine (RecallAnswer.similarity)
    if run.vector is not None and live:
        far = None if raw is None else vector_literal([-x for x in run.vector])
        rows = yield q.nearest(run.scope, vector_literal(run.vector), fetch, far)
        width = len(RECALL_COLUMNS)
        for row in rows:
            sim = row[width]
            if raw is not None:
                raw.span(sim, row[width + 1])
            if sim is None or not math.isfinite(sim):
                continue
            nearest = float(sim) if nearest is None else max(nearest, float(sim))
            if sim <= 0.0:
                continue
            rid = str(row[_ID])
            records[rid] = row[:width]
            vector.append((rid, vector_score(float(sim), run.calibration)))
            if raw is not None:
                raw.cosine[rid] = float(sim)
    # "embedding" mode skips the keyword stage only while the vector stage is live.
    if run.vector is None or run.fusion.search_mode != "embedding":
        found = yield from _keyword_steps(run, max(fetch, _KEYWORD_WINDOW), raw)
        for row, score in found:
            rid = str(row[_ID])
            records[rid] = row
            keyword.append((rid, score))
        if not keyword and vector:
            keyword = yield from _pieces_as_keywords(run, fetch, raw, records)
    similarity = None if nearest is None else vector_score(nearest, run.calibration)
    degraded = run.degraded
    if similarity is not None and keyword:
        got = yield _unembedded(q, [i for i, _ in keyword])
        if got and got[0][0]:  # the nearest memory may be one of them: not known, not told
            similarity = None
            note = (
                f"unembedded_rows: {got[0][0]} keyword hits hold no vector of this embedder "
                "(embed_missing() adds them); the prompt's similarity is not known"
            )
            degraded = f"{degraded}; {note}" if degraded else note
    if raw is not None and vector:
        vector += [(i, vector_score(c, run.calibration)) for i, c in raw.unseen(keyword)]
    # As on SQLite: the rows returned are chosen among twice as many with their day's vote.
    voted = by_score(run.fusion, bool(keyword), bool(vector))
    wanted = 2 * run.limit if voted else run.limit
    fused = fuse(keyword, vector, run.fusion, wanted, None if raw is None else raw.scores())
    if voted:
        days = [day_key(records[i][_SESSION], records[i][_TS]) for i, _ in fused]
        fused = pick_by_day(fused, days, run.limit)
    if fused:
        strategy = "hybrid" if keyword and vector else "vector" if vector else "keyword"
        entries = [
            row_to_record(records[i], RECALL_COLUMNS).to_entry(min(1.0, max(0.0, float(s))))
            for i, s in fused
        ]
        return entries, RecallInfo(strategy, len(keyword), len(vector), degraded, similarity)
    sub = SubstringQuery.of(run.query)
    patterns = sub.patterns()
    wanted = sub.window(run.limit) if sub.split else run.limit
    rows = (
        (yield q.like(run.scope, patterns, wanted, most_first=sub.split, vector=None))
        if patterns
        else []
    )
    like_hits = [row_to_record(r, RECALL_COLUMNS) for r in rows]
    best = sub.best(like_hits, lambda r: (r.key, r.content), run.limit)
    entries = [rec.to_entry(score) for rec, score in best]
    return entries, RecallInfo("like" if entries else "none", 0, 0, degraded, similarity)


def _pieces_as_keywords(
    run: RecallRun, fetch: int, raw: Raw | None, records: dict[str, Sequence[Any]]
) -> Generator[Stmt, Any, list[tuple[str, float]]]:
    """A CJK question the word index found nothing for, beside live vectors: the rows
    holding its pieces (``storage._substring``) as the keyword hits, so a row is not
    shown on its cosine alone (an English model's cosines between CJK texts are high
    for any pair), and the memory holding the question's words is found though it is
    not among the nearest rows. SQLite's ``recall._run`` does the same."""
    sub = SubstringQuery.of(run.query or "")
    if not sub.cjk or run.vector is None:
        return []
    rows = yield run.q.like(
        run.scope,
        sub.patterns(),
        sub.window(fetch),
        most_first=True,
        vector=vector_literal(run.vector),
    )
    width = len(RECALL_COLUMNS)
    out: list[tuple[str, float]] = []
    for row, score in sub.best(rows, lambda r: (str(r[_KEY]), str(r[_CONTENT])), fetch):
        rid = str(row[_ID])
        records[rid] = row[:width]
        out.append((rid, score))
        if raw is not None:
            raw.keyword[rid] = score
            if (cos := row[width]) is not None and math.isfinite(cos):
                raw.hit_cosine[rid] = float(cos)
                raw.span(cos)
    return out


def _keyword_steps(
    run: RecallRun, fetch: int, raw: Raw | None = None
) -> Generator[Stmt, Any, list[tuple[Sequence[Any], float]]]:
    """The keyword hits' rows in ts_rank order, each with its calibrated score.

    With ``raw`` (``"minmax"``), only the ``2 * limit`` best by that score, as
    SQLite's window holds the ``2 * limit`` best by BM25; their raw scores and
    cosines are noted in ``raw``.
    """
    q = run.q
    words, groups = with_variants(
        content_words(run.query or "", max_terms=_MAX_TERMS), kept_plurals
    )
    if not words:
        return []
    missing = [w for w, _ in words if w not in run.lexemes]
    if missing:
        remember(run.lexemes, (yield Stmt(lexeme_stmt(q.config), (missing,))))
    if groups is not None:
        words, groups = distinct(words, groups, [run.lexemes.get(w, ()) for w, _ in words])
    terms = terms_of(words, run.lexemes)
    if not terms:
        return []
    # Each term's word (terms_of leaves out the words without lexemes).
    by_word = groups and [g for (w, _), g in zip(words, groups, strict=True) if run.lexemes.get(w)]
    if run.terms is None:
        [(lexemes, rows, table_rows, counted)] = yield q.term_stats()
        run.terms = TermStats.build(lexemes, rows, table_rows, run.rank_budget, counted)
        run.terms_read = True
    tsq = _tsquery([w for w in words if run.lexemes.get(w[0])]) or ""
    ranked = None
    wanted = to_count(terms, run.terms)
    by_count = None
    if run.rank_budget is not None and ":*" not in tsq:
        if run.terms.exact:
            # A small table: candidates selected by the scope's own counts, not by
            # ANALYZE's of every namespace (issue 29, round 33).
            by_count = [lx for lx, _ in wanted]
        elif run.terms.lexemes:
            ranked = " ".join(w for w, _ in words)
    stmt = q.keyword(
        run.scope,
        tsq,
        fetch,
        ranked,
        run.terms,
        probes=probes(terms),
        frequencies=frequency_queries(wanted),
        counted=by_count,
        # Never below the rows asked for: a filter-first caller (PI's profiles) asks for
        # deeper windows and reads a short answer as "no more rows".
        budget=min(run.limit, run.rank_budget or 0),
        vector=None if raw is None or run.vector is None else vector_literal(run.vector),
    )
    rows = list((yield stmt))
    if not rows:
        return []
    width = len(RECALL_COLUMNS)
    counted = {w: int(c) for w, c in zip(wanted, rows[0][width + 2], strict=True)}
    asked = asked_words(w for w, _ in words)

    def named(i: int) -> bool:
        return names_asked(asked, str(rows[i][_CONTENT] or ""))

    bits = [r[width + 1] for r in rows]
    numbers = number_terms(terms, frequencies(terms, counted, run.terms)[1])
    days = None
    if any(numbers):  # the day words' rule (``day_numbers``)
        ids = [str(r[_ID]) for r in rows]
        day_rows = yield day_stmt(q, ids, number_lexemes(terms, numbers))
        days = DayWords.of(terms, numbers, ids, day_rows)
    scores = score_hits(terms, counted, run.terms, bits, by_word, named, days)
    found = list(zip(rows, scores, strict=True))
    if raw is not None:
        found = raw.window(found, width, run.limit * 2)
    return [(r[:width], score) for r, score in found]


def _unembedded(q: Queries, ids: Sequence[str]) -> Stmt:
    """How many of the keyword hits ``ids`` hold no vector (a process without the embedder
    wrote them): the scope's similarity (``min_prompt_similarity``) says nothing of them."""
    query = sql.SQL(
        "SELECT count(*) FROM {t} WHERE namespace = %s AND id = ANY(%s) AND embedding IS NULL"
    ).format(t=q.t)
    return Stmt(query, (q.ns, list(ids)))
