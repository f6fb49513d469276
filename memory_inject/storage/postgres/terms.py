"""Calibrated keyword scores on PostgreSQL: the query's lexemes, their weights, each hit's coverage.

The score of a keyword hit is :func:`memory_inject.storage.calibration.coverage`,
as on SQLite: the query's content words (:func:`~memory_inject.storage.fusion.content_words`)
each weigh :func:`~memory_inject.storage.calibration.term_weight` of their
document frequency in the table, and count as present by the best label they
carry in the row's tsvector (:data:`~memory_inject.storage.postgres.context.PRESENCE`),
tested with weight-restricted tsqueries (:func:`probes`).

* A word's lexemes are what ``to_tsvector(config, word)`` makes of it (the
  index's own normalisation); a word the configuration drops (its stop list is
  longer than the library's) is not a term. Lexemes are cached per store.
* Document frequencies are exact counts of the namespace's live rows (as FTS5
  counts a namespace's rows on a SQLite file of several). On tables below
  :data:`EXACT_ROWS` rows (the row count is then the namespace's live rows, exact)
  nothing caps them; above, they are capped at :data:`DF_CAP` rows so a common word
  costs little, and a capped count takes ANALYZE's estimate when the lexeme is among
  the column's most common elements; the row count is the table's ``reltuples``, and
  a lexeme ANALYZE lists as common is not counted but estimated over the whole table
  (every namespace).
* The keyword stage's candidates (``rank_budget``) are selected on a small table by
  counts of the rows the recall may return (its scope), with a budget of 3% of the
  namespace's rows; on a big one by ANALYZE's estimates of the whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

from attrs import Factory, field, frozen
from psycopg import sql

from memory_inject.storage.calibration import (
    coverage,
    dated_coverage,
    named_weights,
    term_weight,
)
from memory_inject.storage.postgres.context import PRESENCE

if TYPE_CHECKING:
    from memory_inject.storage.postgres.day_numbers import DayWords

__all__ = [
    "DF_CAP",
    "EXACT_ROWS",
    "Term",
    "TermStats",
    "array_literal",
    "distinct_lexemes",
    "frequencies",
    "frequency_queries",
    "kept_plurals",
    "lexeme_stmt",
    "present",
    "probes",
    "remember",
    "score_hits",
    "terms_of",
    "to_count",
    "tsquery_literal",
]

#: On a big table (:data:`EXACT_ROWS`), document frequencies are counted up to this many rows.
DF_CAP = 1000
#: Below this many rows (by ``reltuples``) the row count is exact.
EXACT_ROWS = 10_000
#: At most this many words are looked up per store before the cache is cleared.
_CACHE_MAX = 65_536

# The keyword stage ranks roughly this share of the table at most (tuned on the
# LoCoMo dev half, where it acts like BM25's IDF: R@5 0.485 -> 0.544, R@10 0.564 -> 0.619).
_RANK_FRACTION = 0.03
_RANK_FLOOR = 50.0


@frozen
class TermStats:
    """The keyword stage's ranking budget and the table statistics its scores need.

    ``lexemes``/``rows`` are the table's common lexemes (ANALYZE's most common
    elements of ``tsv``) with their estimated row counts, kept only when they
    are big enough to matter against ``budget``. ``common`` holds all of them
    (for capped document frequencies), ``table_rows`` the namespace's live rows (counted on a
    small table; the table's ``reltuples`` on a big one)
    and ``exact`` whether it was counted on a small table (so a write makes it stale).
    """

    budget: float = 0.0
    lexemes: tuple[str, ...] = ()
    rows: tuple[float, ...] = ()
    table_rows: float = 0.0
    exact: bool = True
    common: dict[str, float] = field(factory=dict, eq=False)
    #: ``lexemes`` and ``rows`` as PostgreSQL array literals, made once: psycopg's list
    #: dumper quotes element by element, about 2 ms a recall for ANALYZE's ~1,000 lexemes
    #: (the statement casts them, ``%(clex)s::text[]``, so the server parses the text).
    lexemes_text: str = field(
        init=False, eq=False, repr=False, default=Factory(lambda s: array_literal(s.lexemes), True)
    )
    rows_text: str = field(
        init=False,
        eq=False,
        repr=False,
        default=Factory(lambda s: "{" + ",".join(repr(float(n)) for n in s.rows) + "}", True),
    )

    @property
    def df_cap(self) -> int:
        """Rows a lexeme's document frequency is counted up to: all of a small table's
        namespace (a capped count took ANALYZE's estimate of every namespace: round 34),
        :data:`DF_CAP` on a big table."""
        return EXACT_ROWS if self.exact else DF_CAP

    @classmethod
    def build(
        cls,
        lexemes: Sequence[str],
        rows: Sequence[float],
        table_rows: float | None,
        cap: int | None,
        counted: int | None = None,
    ) -> TermStats:
        """The budget is ~3% of the table (at least 50 rows, at most ``cap``; 0 without one).

        ``counted`` is the exact row count when the statement took one.
        """
        estimate = max(0.0, float(table_rows or 0.0))
        total = float(counted) if counted is not None else estimate
        # A big table counted because it was never analyzed is not recounted per write.
        exact = counted is not None and counted < EXACT_ROWS
        common = {str(w): float(n) for w, n in zip(lexemes, rows, strict=True)}
        if cap is None:
            return cls(table_rows=total, exact=exact, common=common)
        # Counted, the namespace's rows set the budget (ANALYZE's count every namespace).
        basis = total if exact else estimate
        budget = min(float(cap), max(_RANK_FLOOR, _RANK_FRACTION * basis))
        kept = [(w, n) for w, n in common.items() if n > budget / 8]
        return cls(
            budget,
            tuple(w for w, _ in kept),
            tuple(n for _, n in kept),
            total,
            exact,
            common,
        )


def array_literal(items: Iterable[str]) -> str:
    """``{"a","b"}``: a ``text[]`` literal of ``items``, each double-quoted and escaped.

    Inside double quotes an array literal treats only ``\\`` and ``"`` specially
    (braces, commas, spaces and the word NULL are plain text there), so those
    two are backslash-escaped, the backslash first.
    """
    return (
        "{" + ",".join('"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"' for x in items) + "}"
    )


def kept_plurals(word: str) -> tuple[str, ...]:
    """The other number of ``word`` where PostgreSQL's ``english`` stemmer (Snowball's
    Porter2) keeps a final "s" that SQLite's Porter stems away: after "u" ("gpus",
    "menus"), after a part with no other vowel ("kpis", "ssds") and on words with
    digits, which the parser never stems ("a100s"). Asked as a spelling of the word
    (``_variants.with_variants``), so "gpu" finds "GPUs" as it does on SQLite."""
    if len(word) < 2 or not word.isascii() or not word.isalnum():
        return ()
    digits = not word.isalpha()
    if word.endswith("s"):
        stem = word[:-1]
        keeps = digits or word.endswith("us") or not _VOWELS.intersection(stem[:-1])
        return (stem,) if keeps and not stem.endswith("s") else ()
    keeps = digits or word.endswith("u") or not _VOWELS.intersection(word[:-1])
    return (word + "s",) if keeps else ()


_VOWELS = frozenset("aeiouy")

#: One query term: its lexemes and whether it is a prefix (``word*``).
Term = tuple[tuple[str, ...], bool]


def lexeme_stmt(config: str = "'english'") -> sql.Composed:
    """Each word's lexemes under the text search configuration ``config`` (a SQL string
    literal, ``folding.config_sql``; param: a ``text[]``)."""
    return sql.SQL(
        "SELECT w.word, tsvector_to_array(to_tsvector({cfg}::regconfig, w.word)) "
        "FROM unnest(%s::text[]) AS w(word)"
    ).format(cfg=sql.SQL(config))


def terms_of(words: Sequence[tuple[str, bool]], cache: Mapping[str, tuple[str, ...]]) -> list[Term]:
    """The query's terms, in order, from cached lexemes (a word with none is dropped)."""
    out: list[Term] = []
    for word, prefix in words:
        lexemes = cache.get(word, ())
        if lexemes:
            out.append((lexemes, prefix))
    return out


def remember(
    cache: MutableMapping[str, tuple[str, ...]], rows: Sequence[tuple[str, Sequence[str]]]
) -> None:
    """Store looked-up lexemes in ``cache`` (cleared first when it is full)."""
    if len(cache) + len(rows) > _CACHE_MAX:
        cache.clear()
    for word, lexemes in rows:
        cache[str(word)] = tuple(sorted(str(x) for x in lexemes))


def tsquery_literal(lexeme: str, prefix: bool) -> str:
    """``'lexeme'`` (or ``'lexeme':*``) in tsquery syntax: already normalised, quoted."""
    quoted = "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
    return quoted + (":*" if prefix else "")


def distinct_lexemes(terms: Sequence[Term]) -> list[tuple[str, bool]]:
    """The distinct ``(lexeme, prefix)`` of ``terms``, in order: :func:`probes` asks of each."""
    return list(dict.fromkeys((lx, p) for lexemes, p in terms for lx in lexemes))


def to_count(terms: Sequence[Term], stats: TermStats) -> list[tuple[str, bool]]:
    """The distinct ``(lexeme, prefix)`` of ``terms`` whose rows must be counted.

    All of them on a small table; on a big one, those ANALYZE does not list as
    common (rare ones, cheap to count through the GIN index).
    """
    small = stats.table_rows < EXACT_ROWS
    return [(lx, p) for lx, p in distinct_lexemes(terms) if small or p or lx not in stats.common]


def frequency_queries(wanted: Sequence[tuple[str, bool]]) -> list[str]:
    """The tsquery of each ``(lexeme, prefix)`` whose rows :meth:`Queries.keyword` counts."""
    return [tsquery_literal(lx, p) for lx, p in wanted]


def probes(terms: Sequence[Term]) -> list[str]:
    """Weight-restricted tsqueries: one per distinct lexeme of ``terms`` and :data:`PRESENCE` class.

    ``tsv @@ 'deploy':AB`` says whether the row holds the lexeme in its own
    text; a few such tests per row cost less than reading its whole tsvector.
    """
    return [
        tsquery_literal(lx, p) + ("" if p else ":") + labels
        for lx, p in distinct_lexemes(terms)
        for labels, _ in PRESENCE
    ]


def present(terms: Sequence[Term], bits: Sequence[bool]) -> list[float]:
    """How much of each term a row holds, from its answers to :func:`probes`."""
    return _presence(terms)(bits)


def _presence(terms: Sequence[Term]) -> Callable[[Sequence[bool]], list[float]]:
    """:func:`present` for many rows of one query: the probe positions are worked out once."""
    index = {key: i for i, key in enumerate(distinct_lexemes(terms))}
    width = len(PRESENCE)
    slots = [
        [[index[(lx, prefix)] * width + c for lx in lexemes] for c in range(width)]
        for lexemes, prefix in terms
    ]
    weights = [w for _, w in PRESENCE]
    # Per term, per class in order: its weight and the probes that must all hold. Most
    # terms are one lexeme, so one probe: tested by index, without a generator.
    plans = [
        [
            (weights[c], where[0] if len(where) == 1 else -1, tuple(where))
            for c, where in enumerate(by_class)
        ]
        for by_class in slots
    ]

    def row(bits: Sequence[bool]) -> list[float]:
        out: list[float] = []
        for plan in plans:
            best = 0.0
            for weight, one, every in plan:
                if bits[one] if one >= 0 else all(bits[j] for j in every):
                    best = weight
                    break
            out.append(best)
        return out

    return row


def frequencies(
    terms: Sequence[Term], counted: Mapping[tuple[str, bool], int], stats: TermStats
) -> tuple[float, list[int]]:
    """The table's rows and each term's (its rarest lexeme's), from the rows ``counted``
    (:func:`to_count`) or ANALYZE's estimate of a common lexeme."""
    df: dict[tuple[str, bool], float] = {}
    for lx, p in distinct_lexemes(terms):
        n = counted.get((lx, p))
        common = 0.0 if p else stats.common.get(lx, 0.0)
        capped = n is not None and n >= stats.df_cap
        df[(lx, p)] = common if n is None else max(float(n), common if capped else 0.0)
    rows = max([stats.table_rows, *df.values()])
    return rows, [round(min(df[(lx, p)] for lx in lexemes)) for lexemes, p in terms]


def score_hits(
    terms: Sequence[Term],
    counted: Mapping[tuple[str, bool], int],
    stats: TermStats,
    hits: Sequence[Sequence[bool]],
    groups: Sequence[int] | None = None,
    named: Callable[[int], bool] | None = None,
    days: DayWords | None = None,
) -> list[float]:
    """Each hit's coverage of the query; ``counted`` holds the rows counted (:func:`to_count`),
    ``groups`` each term's word when some spell one (``_variants.with_variants``),
    ``named(i)`` whether hit ``i`` names a word of the prompt (``_names``: a term no row holds
    weighs ``calibration.NAMED_ABSENT_WEIGHT`` in their scores), ``days`` the hits' day
    words when the query holds a number some row holds (``day_numbers``: scored by
    ``calibration.dated_coverage``)."""
    rows, containing = frequencies(terms, counted, stats)
    weights = [term_weight(round(rows), n) for n in containing]
    heavier = named_weights(weights, containing) if named and 0 in containing else None
    held = _presence(terms)
    out: list[float] = []
    for i, found in enumerate(hits):
        w = heavier if heavier and named and named(i) else weights
        if days is None:
            out.append(coverage(w, held(found), groups))
            continue
        text = days.text(i, found)
        n, loose = days.numbers, days.loose
        out.append(dated_coverage(w, held(found), n, text, loose, days.dated[i], groups))
    return out
