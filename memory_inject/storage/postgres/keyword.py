"""The keyword stage's SQL on PostgreSQL: ``ts_rank`` ranking and the word statistics read.

:func:`keyword_query` is the text of the keyword statement, in its two forms:
every match of the prompt's tsquery ranked, or (``selective``) candidates
selected by the query's rarest lexemes within a row budget, every query word
still counting in the rank. Each row also says which query lexemes it holds
and, once per statement, how many live rows of the namespace match each query word.
:func:`term_stats_query` reads ANALYZE's common lexemes for that budget
(``terms``). Building the text does no I/O; :class:`~memory_inject.storage.postgres.queries.Queries`
caches it and adds the parameters. :func:`excluded` is the live-row filter's part for a
refill's :class:`~memory_inject.contract.RecallExclusion`.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from memory_inject._skip_keys import SQL_TRIMMED
from memory_inject.contract import RecallExclusion
from memory_inject.storage._exclusion import kept_sql, key_rules_sql
from memory_inject.storage.postgres.context import RANK_WEIGHTS
from memory_inject.storage.postgres.schema import RECALL_COLUMNS
from memory_inject.storage.postgres.terms import EXACT_ROWS

__all__ = ["excluded", "keyword_query", "like_query", "term_stats_query"]


#: A row with near context (``ctx_near``) is a hit only when its own parts (key,
#: content, tags and day: labels A and B) hold a query word, as SQLite's
#: ``ddl.OWN_MATCH`` says.
_OWN = sql.SQL("(ctx_near IS NULL OR ts_filter(tsv, '{a,b}') @@ tq.q)")


def keyword_query(
    t: sql.Identifier,
    cols: sql.Composable,
    where: sql.Composable,
    *,
    selective: bool,
    cosine: bool = False,
    config: str = "'english'",
    counted: bool = False,
) -> sql.Composed:
    """The keyword statement on table ``t``, selecting ``cols`` of the live rows ``where`` says.

    ``config`` is the text search configuration, as a SQL string literal. Its
    parameters: ``tsq``, ``lim``, ``probe``, ``dfq`` and ``cap``; with
    ``selective`` also ``words``, ``clex``, ``crows`` and ``budget``; with
    ``cosine`` also ``vec``, and each row ends with its cosine to it (NULL
    without a vector). ``counted`` (with ``selective``) selects by the statement's own
    counts of the lexemes in ``dlex`` (``dfq``'s, in its order) in the rows ``where``
    says, instead of ANALYZE's estimates (``words``, ``clex``, ``crows``); both take
    ``over``, the budget plus one: see
    :meth:`~memory_inject.storage.postgres.queries.Queries.keyword`.
    """
    vec = sql.SQL(", embedding_vec" if cosine else "")
    cfg = sql.SQL(config)  # a string literal naming the configuration (``folding.config_sql``)
    # ts_rank, not ts_rank_cd: half the cost a row (about 3.5 against 7 µs at 100k rows)
    # and the same recall on LoCoMo dev (docs/performance.md, issue 29, fifth round).
    # Normalization 1 divides by 1 + log(the row's length), as BM25 weighs long rows down
    # on SQLite: the two engines' top 5 share 94% of their rows on LoCoMo dev, 91% without.
    rank = sql.SQL("ts_rank({w}::float4[], tsv, tq.q, 1)").format(w=sql.Literal(RANK_WEIGHTS))
    if not selective:
        head: sql.Composable = sql.SQL("")
        inner = sql.SQL(
            "SELECT {cols}, tsv{vec}, {rank} AS rank "
            "FROM {t}, to_tsquery({cfg}::regconfig, %(tsq)s) AS tq(q) "
            "WHERE {where} AND tsv @@ tq.q AND {own} ORDER BY rank DESC, id LIMIT %(lim)s"
        ).format(cols=cols, vec=vec, rank=rank, t=t, where=where, own=_OWN, cfg=cfg)
    else:
        made = _counted_head if counted else _estimated_head
        head = made(t, cfg, where)
        inner = sql.SQL(
            "SELECT {cols}, tsv{vec}, {rank} AS rank FROM {t}, tq "
            "WHERE {where} AND tsv @@ tq.f AND {own} ORDER BY rank DESC, id LIMIT %(lim)s"
        ).format(cols=cols, vec=vec, rank=rank, t=t, where=where, own=_OWN)
    # An uncorrelated subquery: an InitPlan, run once, and only if a row comes back.
    extra = (
        sql.SQL(", ARRAY(SELECT df.n FROM df ORDER BY df.i)")
        if counted
        else sql.SQL(
            ", ARRAY(SELECT (SELECT count(*) FROM (SELECT 1 FROM {t} AS d "
            "WHERE d.tsv @@ x.q AND d.deleted_at IS NULL AND d.namespace = %(ns)s "
            "LIMIT %(cap)s) AS c) "
            "FROM unnest(%(dfq)s::tsquery[]) WITH ORDINALITY AS x(q, i) ORDER BY x.i)"
        ).format(t=t)
    )
    if cosine:
        extra += sql.SQL(", 1 - (k.embedding_vec <=> %(vec)s::vector)")
    return sql.SQL(
        "{head}SELECT {kcols}, k.rank, ARRAY(SELECT k.tsv @@ x.q "
        "FROM unnest(%(probe)s::tsquery[]) WITH ORDINALITY AS x(q, i) ORDER BY x.i){extra} "
        "FROM ({inner}) AS k ORDER BY k.rank DESC, k.id"
    ).format(
        head=head,
        kcols=sql.SQL(", ").join(sql.Identifier("k", c) for c in RECALL_COLUMNS),
        extra=extra,
        inner=inner,
    )


#: The keyword stage's candidates: the rows of the scope holding one of the ``kept``
#: lexemes, or, when the prompt's matches in the scope are ``budget`` rows at most
#: (``m``), every match (``tq.f`` is then the prompt's own tsquery).
_TQ = (
    "), m AS ("
    " SELECT count(*) AS m FROM (SELECT 1 FROM {t} WHERE {where}"
    " AND tsv @@ to_tsquery({cfg}::regconfig, %(tsq)s) LIMIT %(over)s) AS c"
    "), tq AS ("
    " SELECT to_tsquery({cfg}::regconfig, %(tsq)s) AS q, CASE WHEN (SELECT m FROM m) <= %(budget)s"
    " THEN to_tsquery({cfg}::regconfig, %(tsq)s) ELSE coalesce("
    "(SELECT string_agg(quote_literal(l), ' | ') FROM kept)::tsquery,"
    " to_tsquery({cfg}::regconfig, %(tsq)s)) END AS f"
    ") "
)
#: Lexemes in ascending rows ``e`` while their sum stays within the budget; the rarest
#: of those some row of the scope holds is always kept.
_KEPT = (
    "), kept AS ("
    " SELECT l FROM (SELECT l, sum(e) OVER (ORDER BY {order}) AS cum,"
    " row_number() OVER (ORDER BY {order}) AS rn FROM {lex}) AS r"
    " WHERE r.cum <= %(budget)s OR r.rn = 1"
)


def _estimated_head(t: sql.Identifier, cfg: sql.Composable, where: sql.Composable) -> sql.Composed:
    """The selective statement's head on a big table: ANALYZE's estimated rows of the
    table's common lexemes; a lexeme it does not list counts as none, and one that no row
    of the scope holds is left out (else, the rarest, it was the only one kept: a plural
    or a synonym no row holds left the prompt no candidates)."""
    return sql.SQL(
        "WITH lex AS ("  # noqa: S608 - constants
        " SELECT l, coalesce(c.n, 0) AS e"
        " FROM unnest(tsvector_to_array(to_tsvector({cfg}::regconfig, %(words)s))) AS l"
        " LEFT JOIN unnest(%(clex)s::text[], %(crows)s::float8[]) AS c(lexeme, n)"
        " ON c.lexeme = l"
        " WHERE c.n IS NOT NULL OR EXISTS (SELECT 1 FROM {t} AS d WHERE {where}"
        " AND d.tsv @@ quote_literal(l)::tsquery)" + _KEPT.format(lex="lex", order="e, l") + _TQ
    ).format(t=t, cfg=cfg, where=where)


def _counted_head(t: sql.Identifier, cfg: sql.Composable, where: sql.Composable) -> sql.Composed:
    """The selective statement's head on a small table: each query lexeme's rows counted
    once (``df``, up to ``cap``): ``n`` in the namespace's live rows (the calibrated
    score's document frequency, returned), ``s`` in the scope's (what selects).

    Counted, not read from ANALYZE: its estimates count every namespace of the table and
    change when autovacuum runs, so which rows a namespace's recall saw depended on
    other namespaces' rows and on the time of the last ANALYZE (issue 29, round 33). As
    with ANALYZE's list of common lexemes, a lexeme in at most ``budget / 8`` rows counts
    as none. ``s`` stops at ``over`` rows (more never fit the budget); among lexemes past
    it, the one with the fewest rows in the namespace is the rarest.
    """
    count = (
        "(SELECT count(*) FROM (SELECT 1 FROM {t} AS d WHERE {cond} AND d.tsv @@ x.q"
        " LIMIT %({cap})s) AS c)"
    )
    live = "d.deleted_at IS NULL AND d.namespace = %(ns)s"
    return sql.SQL(
        "WITH df AS MATERIALIZED ("  # noqa: S608 - constants
        " SELECT x.i, x.l, "
        + count.format(t="{t}", cond=live, cap="cap")
        + " AS n, "
        + count.format(t="{t}", cond="{where}", cap="over")
        + " AS s"
        " FROM unnest(%(dfq)s::tsquery[], %(dlex)s::text[]) WITH ORDINALITY AS x(q, l, i)"
        + _KEPT.format(
            lex="(SELECT l, n, CASE WHEN s * 8 > %(budget)s THEN s ELSE 0 END AS e"
            " FROM df WHERE s > 0) AS c",
            order="e, n, l",
        )
        + _TQ
    ).format(t=t, cfg=cfg, where=where)


def term_stats_query(t: sql.Identifier) -> sql.Composed:
    """ANALYZE's common lexemes of ``t``'s ``tsv`` with their row estimates, and its rows.

    The last column is the exact count of the namespace's live rows when the table is
    small (or was never analyzed), else NULL. Its parameters: ``rel``, the table's name,
    and ``ns``, the namespace.
    """
    return sql.SQL(
        "SELECT coalesce(array_agg(m.e ORDER BY m.e) FILTER (WHERE m.e IS NOT NULL), '{{}}'),"
        " coalesce(array_agg(m.f * c.reltuples ORDER BY m.e)"
        " FILTER (WHERE m.e IS NOT NULL), '{{}}'),"
        " max(c.reltuples),"
        " CASE WHEN coalesce(max(c.reltuples), -1) < {exact}"
        " THEN (SELECT count(*) FROM {t} WHERE namespace = %(ns)s AND deleted_at IS NULL) END"
        " FROM pg_class AS c"
        " JOIN pg_namespace AS ns ON ns.oid = c.relnamespace"
        " LEFT JOIN pg_stats AS s ON s.schemaname = ns.nspname AND s.tablename = c.relname"
        " AND s.attname = 'tsv'"
        " LEFT JOIN LATERAL unnest(s.most_common_elems::text::text[],"
        " s.most_common_elem_freqs) AS m(e, f) ON true"
        " WHERE c.oid = to_regclass(%(rel)s)"
    ).format(exact=sql.Literal(EXACT_ROWS), t=t)


def like_query(
    t: sql.Identifier,
    cols: sql.Composable,
    where: sql.Composable,
    *,
    most_first: bool,
    cosine: bool,
) -> sql.Composed:
    """Live rows ``where`` says whose key or content ILIKE-matches any of ``pats``, newest
    first, at most ``lim``: the fallback when ranking finds nothing.

    ``most_first``: the rows matching the most patterns first (a CJK run searched as its
    pieces, ``storage._substring``); ``cosine``: each row ends with its cosine
    similarity to ``vec``.
    """
    most = (
        "(SELECT count(*) FROM unnest(%(pats)s::text[]) AS p(pat) "
        'WHERE "key" ILIKE p.pat OR content ILIKE p.pat) DESC, '
    )
    return sql.SQL(
        "SELECT {cols}{cos} FROM {t} WHERE {where} "
        'AND ("key" ILIKE ANY(%(pats)s) OR content ILIKE ANY(%(pats)s)) '
        "ORDER BY {most}updated_at DESC, rid DESC LIMIT %(lim)s"
    ).format(
        cols=cols,
        cos=sql.SQL(", 1 - (embedding_vec <=> %(vec)s::vector)" if cosine else ""),
        t=t,
        where=where,
        most=sql.SQL(most if most_first else ""),
    )


#: :data:`~memory_inject._skip_keys.SQL_TRIMMED` trimmed, then ASCII letters lowered (not
#: ``lower()``, which follows the collation): the key as the skip set reads it.
_KEY = (
    "translate(btrim(\"key\", %(ex_ws)s), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', "
    "'abcdefghijklmnopqrstuvwxyz')"
)


def excluded(exclude: RecallExclusion, params: dict[str, Any]) -> list[str]:
    """The live-row clauses ``exclude`` adds (``storage._exclusion``), its values bound in
    ``params`` (``%(exN)s``)."""

    def mark(value: object) -> str:
        name = f"ex{len(params)}"
        params[name] = value
        return f"%({name})s"

    def key_rules() -> str:
        params["ex_ws"] = SQL_TRIMMED
        return key_rules_sql(lambda: _KEY, mark)

    return kept_sql(exclude, mark, key_rules)
