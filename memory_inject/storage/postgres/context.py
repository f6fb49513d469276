"""Context expansion on PostgreSQL: the schema-2 migration and the statements that fill it.

A record written in a session also indexes, at low weight, the content of the
two live records written just before it in that namespace and session
(``ctx_prev``, ``ctx_prev2``, by ``rid``), and every record its UTC date as
words (``ctx_day``, "8 May 2023"), as the SQLite store does (its schema 3).
The neighbours are set once, when the row is inserted (an update of the row
keeps them, and no older row is ever rewritten); the day is a generated column
and follows the timestamp.

The tsvector gives each part a weight label, chosen so that ``ts_rank``
with :data:`RANK_WEIGHTS` weighs key : content, tags, day : prev : prev2 as
2 : 1 : 0.5 : 0.25 (SQLite's bm25 column weights), and so that the label
alone says what a hit proves for the calibrated score (:data:`PRESENCE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

if TYPE_CHECKING:
    import psycopg

    from memory_inject.storage.postgres.schema import TableNames

__all__ = [
    "PRESENCE",
    "RANK_WEIGHTS",
    "add_context",
    "context_values",
    "merge_with_context",
]

#: ``ts_rank`` weights for labels D, C, B, A: prev2, prev, content/tags/day, key.
RANK_WEIGHTS = "{0.125, 0.25, 0.5, 1.0}"
#: What a query term found under these labels counts for ``coverage()``, best first.
PRESENCE: tuple[tuple[str, float], ...] = (("AB", 1.0), ("C", 0.5), ("D", 0.25))

_MONTHS = ", ".join(
    f"'{m}'"
    for m in (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    )
)


def _tsv(names: TableNames) -> sql.Composed:
    """The generated tsvector of schema 2."""
    return sql.SQL(
        "setweight(to_tsvector('english'::regconfig, {key}), 'A') || "
        "setweight(to_tsvector('english'::regconfig, content), 'B') || "
        "setweight(to_tsvector('english'::regconfig, {tags_fn}(tags)), 'B') || "
        "setweight(to_tsvector('english'::regconfig, {day_fn}({ts})), 'B') || "
        "setweight(to_tsvector('english'::regconfig, coalesce(ctx_prev, '')), 'C') || "
        "setweight(to_tsvector('english'::regconfig, coalesce(ctx_prev2, '')), 'D')"
    ).format(
        key=sql.Identifier("key"),
        ts=sql.Identifier("timestamp"),
        tags_fn=names.ident("_tags_text"),
        day_fn=names.ident("_day_words"),
    )


def _numbered(source: sql.Composable) -> sql.Composed:
    """Neighbours over ``source`` rows ``(k, s, ord, content, live)``: ``(k, prev, prev2)``.

    ``s`` is the stream (namespace and session), ``ord`` the write order; a
    row's neighbours are the last two *live* rows of its stream before it
    (``upto`` counts the live rows up to and including a row).
    """
    return sql.SQL(
        "numbered AS (SELECT src.*, count(*) FILTER (WHERE src.live) OVER "
        "(PARTITION BY src.s ORDER BY src.ord) AS upto FROM ({source}) AS src), "
        "ctx AS (SELECT n.k, p1.content AS prev, p2.content AS prev2 FROM numbered AS n "
        "LEFT JOIN numbered AS p1 ON p1.s = n.s AND p1.live "
        "AND p1.upto = n.upto - n.live::int "
        "LEFT JOIN numbered AS p2 ON p2.s = n.s AND p2.live "
        "AND p2.upto = n.upto - n.live::int - 1)"
    ).format(source=source)


def add_context(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 2: the context columns, filled for existing rows, and the tsvector over them."""
    t = names.ident()
    fill_source = sql.SQL(
        "SELECT rid AS k, ROW(namespace, session_id)::text AS s, rid AS ord, content, "
        "deleted_at IS NULL AS live FROM {t} WHERE session_id IS NOT NULL"
    ).format(t=t)
    statements = [
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {fn}(timestamptz) RETURNS text LANGUAGE sql "
            "IMMUTABLE PARALLEL SAFE AS $$ SELECT "
            "extract(day FROM $1 AT TIME ZONE 'UTC')::int::text || ' ' || "
            "(ARRAY[{months}])[extract(month FROM $1 AT TIME ZONE 'UTC')::int] || ' ' || "
            "extract(year FROM $1 AT TIME ZONE 'UTC')::int::text $$"
        ).format(fn=names.ident("_day_words"), months=sql.SQL(_MONTHS)),
        # Dropped first so the fill below does not recompute the old tsvector
        # (its GIN index goes with it and is built again at the end). The
        # generated columns come after the fill: the table is rewritten once
        # for them, and the fill rewrites only rows of sessions.
        sql.SQL("ALTER TABLE {t} DROP COLUMN tsv").format(t=t),
        sql.SQL("ALTER TABLE {t} ADD COLUMN ctx_prev text, ADD COLUMN ctx_prev2 text").format(t=t),
        sql.SQL("CREATE INDEX {idx} ON {t} (namespace, session_id, rid)").format(
            idx=names.ident("_stream_idx"), t=t
        ),
        sql.SQL(
            "WITH {numbered} UPDATE {t} SET ctx_prev = ctx.prev, ctx_prev2 = ctx.prev2 "
            "FROM ctx WHERE {t}.rid = ctx.k AND ctx.prev IS NOT NULL"
        ).format(numbered=_numbered(fill_source), t=t),
        sql.SQL(
            "ALTER TABLE {t} ADD COLUMN ctx_day text GENERATED ALWAYS AS ({fn}({ts})) STORED, "
            "ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({tsv}) STORED"
        ).format(
            t=t, fn=names.ident("_day_words"), ts=sql.Identifier("timestamp"), tsv=_tsv(names)
        ),
        sql.SQL("CREATE INDEX {idx} ON {t} USING gin (tsv)").format(
            idx=names.ident("_tsv_idx"), t=t
        ),
    ]
    for stmt in statements:
        conn.execute(stmt)


def context_values(t: sql.Identifier) -> sql.Composed:
    """``ctx_prev, ctx_prev2`` subqueries for an INSERT's VALUES; 4 params: ns, session twice."""
    one = (
        "(SELECT p.content FROM {t} AS p WHERE p.namespace = %s AND p.session_id = %s::text "
        "AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
    )
    return sql.SQL(", ").join(sql.SQL(one).format(t=t, n=sql.Literal(n)) for n in (0, 1))


def merge_with_context(
    t: sql.Identifier, stage: sql.Identifier, columns: Sequence[str], assign: sql.Composed
) -> sql.Composed:
    """Upsert the staged rows in file order, new rows with their neighbours (param: ``ns``).

    A staged row whose key the table holds is an update and keeps its
    neighbours; the new ones follow the last two live rows of their session
    already in the table, and each other in file order.
    """
    source = sql.SQL(
        "SELECT NULL::bigint AS k, m.s, -1 AS grp, m.rid AS ord, m.content, true AS live "
        "FROM (SELECT DISTINCT f.session_id, ROW(%(ns)s::text, f.session_id)::text AS s "
        "FROM fresh AS f) AS fs "
        "CROSS JOIN LATERAL (SELECT fs.s, p.rid, p.content FROM {t} AS p "
        "WHERE p.namespace = %(ns)s AND p.session_id = fs.session_id "
        "AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 2) AS m "
        "UNION ALL SELECT f._seq, ROW(%(ns)s::text, f.session_id)::text, 0, f._seq, "
        "f.content, f.deleted_at IS NULL FROM fresh AS f"
    ).format(t=t)
    # (grp, ord) is the write order: the table's rows first, then the file's.
    numbered = _numbered(
        sql.SQL(
            "SELECT k, s, row_number() OVER (ORDER BY grp, ord) AS ord, content, live "
            "FROM ({}) AS u"
        ).format(source)
    )
    return sql.SQL(
        'WITH last AS (SELECT DISTINCT ON ("key") * FROM {s} ORDER BY "key", _seq DESC), '
        "fresh AS (SELECT l.* FROM last AS l WHERE l.session_id IS NOT NULL AND NOT EXISTS "
        '(SELECT 1 FROM {t} AS e WHERE e.namespace = %(ns)s AND e."key" = l."key")), '
        "{numbered} "
        "INSERT INTO {t} ({cols}, ctx_prev, ctx_prev2) "
        "SELECT {lcols}, ctx.prev, ctx.prev2 FROM last LEFT JOIN ctx ON ctx.k = last._seq "
        "ORDER BY last._seq "
        'ON CONFLICT (namespace, "key") DO UPDATE SET {assign}'
    ).format(
        s=stage,
        t=t,
        numbered=numbered,
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        lcols=sql.SQL(", ").join(sql.Identifier("last", c) for c in columns),
        assign=assign,
    )
