"""The day words' rule on PostgreSQL (``calibration.dated_coverage``), as SQLite scores it.

Every row's tsvector holds its day in words ("8 May 2023", label B beside its content
and tags: ``context.tsv_expression``), so "7" in a prompt is found in every row written
on a 7th and "2024" in every row of 2024. A number of the prompt that some row holds
(:func:`number_terms`) is scored by the rule, and only then, once the keyword stage has
hits, one more statement (:func:`day_stmt`) reads what the rule needs:

* each hit's day words as the tsvector parses them (``ctx_day``): whether they hold a
  query term that is not a number (the prompt names the row's month: ``dated``);
* each hit's own hold of each number outside its day words: under label A (the key), or
  under B where the day does not hold it, or, where it does, in the content or tags
  parsed again (label B holds both). Labels C and D (the neighbours) are never the day's;
* once per statement, which numbers no row holds outside its day words (``loose``), over
  the namespace's rows (forgotten ones too) as SQLite's MATCH looks, stopping
  at the first row that holds it there. The work is bounded: at most :data:`LOOSE_SCAN`
  rows holding the number are looked at (the GIN index's, in table order), each by its
  tsvector's labels and its day words, its content and tags parsed again only when they
  hold the number's digits. Where fewer rows hold it the answer is SQLite's; where more
  do and none of those looked at holds it outside its day words, it is taken as loose,
  where SQLite would have looked at every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from attrs import frozen
from psycopg import sql

from memory_inject.storage.calibration import is_number
from memory_inject.storage.postgres.context import PRESENCE
from memory_inject.storage.postgres.queries import Stmt
from memory_inject.storage.postgres.terms import Term, distinct_lexemes, tsquery_literal

if TYPE_CHECKING:
    from memory_inject.storage.postgres.queries import Queries
    from memory_inject.storage.postgres.schema import TableNames

__all__ = ["LOOSE_SCAN", "DayWords", "day_query", "day_stmt", "number_lexemes", "number_terms"]

#: At most this many rows holding a number are looked at for whether any holds it
#: outside its day words.
LOOSE_SCAN = 1000


def number_terms(terms: Sequence[Term], containing: Sequence[int]) -> list[bool]:
    """Which ``terms`` are one whole number (ASCII digits) that some row holds
    (``containing``: each term's rows), as SQLite's simple phrases of a number."""
    return [
        n > 0 and not prefix and len(lexemes) == 1 and is_number(lexemes[0])
        for (lexemes, prefix), n in zip(terms, containing, strict=True)
    ]


def _day_holds(n: str, day: str) -> sql.Composed:
    """Whether the day words ``day`` ("8 May 2023") hold the number ``n``: the parser
    keeps a number's digits as they are, so the day's first or third word is it."""
    return sql.SQL("{n} IN (split_part({d}, ' ', 1), split_part({d}, ' ', 3))").format(
        n=sql.SQL(n), d=sql.SQL(day)
    )


def day_query(names: TableNames, config: str) -> sql.Composed:
    """The statement :func:`day_stmt` runs (params ``ns``, ``ids``, ``nums``, ``nq``,
    ``aq``, ``bq``, ``oq``, ``scan``): per hit its id, its day words' lexemes and whether
    it holds each number outside them; once, which numbers are loose."""
    words, tags = names.ident("_words"), names.ident("_tags_text")
    cfg = sql.SQL(config)

    def own(r: str, x: str) -> sql.Composed:
        """Whether row ``r``'s content or tags hold ``x``'s number, parsed again only when
        they hold its digits."""
        return sql.SQL(
            "((strpos({r}.content, {x}.n) > 0 "
            "OR strpos(array_to_string({r}.tags, ' '), {x}.n) > 0) "
            "AND (to_tsvector({cfg}::regconfig, {w}({r}.content)) || "
            "to_tsvector({cfg}::regconfig, {w}({tags}({r}.tags)))) @@ {x}.q)"
        ).format(cfg=cfg, w=words, tags=tags, r=sql.SQL(r), x=sql.SQL(x))

    return sql.SQL(
        "WITH y AS (SELECT * FROM unnest(%(nums)s::text[], %(nq)s::tsquery[], "
        "%(oq)s::tsquery[]) WITH ORDINALITY AS y(n, q, o, i)), "
        # The rows holding each number, at most %(scan)s of them: a CTE is planned for all
        # its rows, so through the GIN index (a number the planner does not see, from
        # unnest), not by reading the table in search of the first; and it is read only
        # as far as the EXISTS below asks.
        "held AS MATERIALIZED (SELECT y.i, d.* FROM y CROSS JOIN LATERAL "
        "(SELECT d.tsv, d.ctx_day, d.content, d.tags FROM {t} AS d "
        "WHERE d.tsv @@ y.q AND d.namespace = %(ns)s LIMIT %(scan)s) AS d) "
        "SELECT k.id, tsvector_to_array(to_tsvector({cfg}::regconfig, {w}(k.ctx_day))), "
        "ARRAY(SELECT k.tsv @@ x.a OR CASE WHEN {k_day} THEN {own_k} "
        "ELSE k.tsv @@ x.b END "
        "FROM unnest(%(nums)s::text[], %(nq)s::tsquery[], %(aq)s::tsquery[], "
        "%(bq)s::tsquery[]) WITH ORDINALITY AS x(n, q, a, b, i) ORDER BY x.i), "
        # Uncorrelated: an InitPlan, run once.
        "ARRAY(SELECT NOT EXISTS (SELECT 1 FROM held AS d WHERE d.i = y.i "
        "AND (d.tsv @@ y.o OR NOT {d_day} OR {own_d})) FROM y ORDER BY y.i) "
        "FROM unnest(%(ids)s::text[]) AS c(id) CROSS JOIN LATERAL "
        "(SELECT r.id, r.ctx_day, r.tsv, r.content, r.tags FROM {t} AS r "
        "WHERE r.namespace = %(ns)s AND r.id = c.id OFFSET 0) AS k"
    ).format(
        cfg=cfg,
        w=words,
        t=names.ident(),
        k_day=_day_holds("x.n", "k.ctx_day"),
        d_day=_day_holds("y.n", "d.ctx_day"),
        own_k=own("k", "x"),
        own_d=own("d", "y"),
    )


def day_stmt(q: Queries, ids: Sequence[str], numbers: Sequence[str]) -> Stmt:
    """:func:`day_query` for the hits ``ids`` and the query's number lexemes ``numbers``."""

    def labelled(labels: str) -> list[str]:
        return [tsquery_literal(n, False) + labels for n in numbers]

    params: dict[str, Any] = {
        "ns": q.ns,
        "ids": list(ids),
        "nums": list(numbers),
        "nq": labelled(""),
        "aq": labelled(":A"),
        "bq": labelled(":B"),
        "oq": labelled(":ACD"),
        "scan": LOOSE_SCAN,
    }
    return Stmt(_text(q.names, q.config), params)


@lru_cache(maxsize=64)
def _text(names: TableNames, config: str) -> sql.SQL:
    """:func:`day_query`'s text, composed once per table."""
    return sql.SQL(day_query(names, config).as_string(None))


@frozen
class DayWords:
    """What :func:`~memory_inject.storage.calibration.dated_coverage` needs of each hit.

    ``numbers`` and ``loose`` are per term, ``dated`` per hit, ``own`` per hit and number
    term (whether the hit holds it at 1.0 outside its day words; ``None`` for the others).
    """

    numbers: list[bool]
    loose: list[bool]
    dated: list[bool]
    own: list[list[bool | None]]
    slots: list[int]

    @classmethod
    def of(
        cls,
        terms: Sequence[Term],
        numbers: Sequence[bool],
        ids: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> DayWords:
        """From :func:`day_stmt`'s ``rows`` for the hits ``ids``."""
        asked_ = number_lexemes(terms, numbers)
        at = {n: j for j, n in enumerate(asked_)}
        by_id = {str(r[0]): r for r in rows}
        loose_of = [bool(x) for x in rows[0][3]] if rows else [False] * len(asked_)
        words = [(lx, p) for (lx, p), n in zip(terms, numbers, strict=True) if not n]
        dated: list[bool] = []
        own: list[list[bool | None]] = []
        for rid in ids:
            row = by_id.get(rid)
            day = [str(d) for d in row[1] or ()] if row is not None else []
            month = [d for d in day if not is_number(d)]
            dated.append(any(_holds(month, lx, p) for lx, p in words))
            bits = [bool(b) for b in row[2]] if row is not None else [False] * len(asked_)
            own.append(
                [bits[at[t[0][0]]] if n else None for t, n in zip(terms, numbers, strict=True)]
            )
        loose = [n and loose_of[at[t[0][0]]] for t, n in zip(terms, numbers, strict=True)]
        index = {key: i for i, key in enumerate(distinct_lexemes(terms))}
        slots = [index[(t[0][0], t[1])] if n else -1 for t, n in zip(terms, numbers, strict=True)]
        return cls(list(numbers), loose, dated, own, slots)

    def text(self, hit: int, bits: Sequence[bool]) -> list[float]:
        """What each number term is worth in hit ``hit`` outside its day words (its probe
        answers ``bits``: labels C and D are never the day's); 0 for the other terms."""
        width = len(PRESENCE)
        out: list[float] = []
        for own, slot in zip(self.own[hit], self.slots, strict=True):
            if own is None:
                out.append(0.0)
            elif own:
                out.append(PRESENCE[0][1])
            else:
                out.append(
                    next(
                        (w for c, (_, w) in enumerate(PRESENCE) if c and bits[slot * width + c]),
                        0.0,
                    )
                )
        return out


def number_lexemes(terms: Sequence[Term], numbers: Sequence[bool]) -> list[str]:
    """The distinct number lexemes :func:`day_stmt` asks about."""
    return list(dict.fromkeys(t[0][0] for t, n in zip(terms, numbers, strict=True) if n))


def _holds(day: Sequence[str], lexemes: Sequence[str], prefix: bool) -> bool:
    return bool(lexemes) and all(
        any(d == lx or (prefix and d.startswith(lx)) for d in day) for lx in lexemes
    )
