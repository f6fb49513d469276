"""How ``InMemoryStore`` ranks: Okapi BM25 under the persistent stores' coverage score.

This module owns the in-memory store's recall arithmetic, pure and without
locks: the stemmed terms of a text and of a query (``word*`` a prefix), which
records are live and in a turn's scope, and :func:`ranked`: each record's
score is the idf-weighted share of the query's content terms it holds
(:func:`~memory_inject.storage.calibration.coverage`, as on SQLite and
PostgreSQL), BM25 breaking ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory_inject.models import MemoryEntry
from memory_inject.storage._lexical import fold, stem, tokenize
from memory_inject.storage._names import asked_words, names_asked
from memory_inject.storage._substring import SubstringQuery
from memory_inject.storage._variants import with_variants
from memory_inject.storage.calibration import coverage, named_weights, smoothed_idf, term_weight
from memory_inject.storage.day_vote import day_key, pick_by_day
from memory_inject.storage.fusion import content_words
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "bm25",
    "holds",
    "in_scope",
    "is_live",
    "query_terms",
    "query_words",
    "ranked",
    "spoken",
    "substring_hits",
    "terms_of",
]


def terms_of(text: str) -> list[str]:
    """The stemmed tokens of ``text``, as stored and searched."""
    return [stem(w) for w in tokenize(text)]


def query_terms(query: str) -> list[tuple[str, bool]]:
    """The query's content words, stemmed like the stored text; ``True`` marks a ``word*``."""
    return query_words(query)[0]


def query_words(query: str) -> tuple[list[tuple[str, bool]], list[int] | None]:
    """:func:`query_terms` with the words' other spellings (``_variants.with_variants``)
    after them, and each term's word (``None`` when none was added)."""
    words, groups = with_variants(content_words(query))
    out: dict[tuple[str, bool], int] = {}
    for (word, star), g in zip(words, groups or range(len(words)), strict=True):
        folded = fold(word)
        out.setdefault((folded if star else stem(folded), star), g)
    return list(out), None if groups is None else list(out.values())


def spoken(query: str) -> frozenset[str]:
    """The query's words as ``_names`` compares them (with their other spellings)."""
    return asked_words(w for w, _ in with_variants(content_words(query))[0])


def holds(tokens: frozenset[str], term: str, prefix: bool) -> bool:
    """True when ``tokens`` hold ``term`` (any token starting with it when ``prefix``)."""
    if prefix:
        return any(t.startswith(term) for t in tokens)
    return term in tokens


def bm25(
    tokens: Sequence[str],
    terms: Sequence[tuple[str, bool]],
    present: Sequence[float],
    idf: Sequence[float],
    avgdl: float,
    k1: float = 1.2,
    b: float = 0.75,
) -> float:
    """Okapi BM25 of one record over the query's whole-word terms it holds."""
    norm = k1 * (1.0 - b + b * len(tokens) / (avgdl or 1.0))
    score = 0.0
    for (term, star), held, w in zip(terms, present, idf, strict=True):
        if held and not star:
            tf = tokens.count(term)
            score += w * tf * (k1 + 1.0) / (tf + norm)
    return score


def ranked(
    found: Sequence[tuple[MemoryRecord, frozenset[str], Sequence[str]]],
    terms: Sequence[tuple[str, bool]],
    df: Sequence[int],
    rows: int,
    avgdl: float,
    limit: int,
    groups: Sequence[int] | None = None,
    asked: frozenset[str] = frozenset(),
) -> list[MemoryEntry]:
    """The ``limit`` best of ``found`` (record, its token set, its tokens) for ``terms``,
    scored by coverage (records holding none dropped), BM25 then id breaking ties;
    ``df`` is each term's document frequency over the ``rows`` records of the store;
    in a record that names one of the ``asked`` words (:func:`spoken`, ``_names``) a term
    no record holds weighs ``calibration.NAMED_ABSENT_WEIGHT``."""
    weights = [term_weight(rows, n) for n in df]
    heavier = named_weights(weights, df) if asked and 0 in df else None
    idf = [smoothed_idf(rows, n) for n in df]
    hits = []
    for r, held, tokens in found:
        present = [1.0 if holds(held, t, star) else 0.0 for t, star in terms]
        if 1.0 not in present:
            continue  # holds no term: no score (a record is read for names only if it has one)
        named = heavier is not None and names_asked(asked, r.content)
        cov = coverage(heavier if named and heavier else weights, present, groups)
        if cov > 0.0:
            hits.append((r, cov, bm25(tokens, terms, present, idf, avgdl)))
    hits.sort(key=lambda h: (-h[1], -h[2], h[0].id))
    # As the SQL stores: the rows returned are chosen among twice as many with their
    # day's vote (``day_vote``).
    window = hits[: 2 * limit]
    by_id = {r.id: r for r, _, _ in window}
    days = [day_key(r.session_id, r.timestamp) for r, _, _ in window]
    chosen = pick_by_day([(r.id, cov) for r, cov, _ in window], days, limit)
    return [by_id[i].to_entry(cov) for i, cov in chosen]


def substring_hits(pool: Sequence[MemoryRecord], query: str, limit: int) -> list[MemoryEntry]:
    """The substring fallback of the SQL stores, for a recall the words found nothing for
    (a CJK run the tokenizer keeps whole): the records of ``pool`` (newest first) holding
    any of :class:`SubstringQuery`'s words, those holding the most of a split run's pieces
    first, scored as there."""
    sub = SubstringQuery.of(query)
    if not sub.words:
        return []
    # Most prompts that get here hold no word anywhere: one lowering of every row at once
    # (a word has no line break, so none is found across two rows).
    every = "\n".join(f"{r.key}\n{r.content}" for r in pool).lower()
    if not any(w in every for w in sub.words):
        return []
    texts = [f"{r.key}\n{r.content}".lower() for r in pool]
    counts = [(r, sum(w in t for w in sub.words)) for r, t in zip(pool, texts, strict=True)]
    found = [(r, n) for r, n in counts if n]
    # As the SQL: the rows holding the most pieces of a split run first, else the newest.
    read = sorted(found, key=lambda p: -p[1])[: sub.window(limit)] if sub.split else found[:limit]
    best = sub.best([r for r, _ in read], lambda r: (r.key, r.content), limit)
    return [r.to_entry(score) for r, score in best]


def is_live(r: MemoryRecord, now: datetime) -> bool:
    """Not forgotten, not superseded and not expired at ``now``."""
    return (
        r.deleted_at is None
        and r.superseded_by is None
        and (r.expires_at is None or r.expires_at > now)
    )


def in_scope(
    r: MemoryRecord,
    session_id: str | None,
    since: datetime | None,
    until: datetime | None,
    shared: frozenset[str],
) -> bool:
    """Visible to a recall of ``session_id`` (its rows and the shared categories'
    sessionless ones) and within ``since``..``until``."""
    if (
        session_id is not None
        and r.session_id != session_id
        and not (r.session_id is None and r.category in shared)
    ):
        return False
    if since is not None and r.timestamp < since:
        return False
    return not (until is not None and r.timestamp > until)
