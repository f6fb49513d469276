"""Context expansion on PostgreSQL: the schema-2 migration and the statements that fill it.

A record written in a session also indexes, at low weight, the content of the
two live records written just before it in that namespace and session
(``ctx_prev``, ``ctx_prev2``, by ``rid``), and every record its UTC date as
words (``ctx_day``, "8 May 2023"), as the SQLite store does (its schema 3).
The neighbours are set when the row is inserted, and computed again
(:mod:`.neighbours`) when it is written again or a row they came from is
forgotten or rewritten; the day is a generated column and follows the timestamp.

Sessionless records of one *event* (schema 5: one namespace, category and
profile, none and blank alike, stamped with one timestamp, no PI ``layer``)
are each other's context the same way, as in SQLite's schema 8 (where the
reasons are).

The tsvector gives each part a weight label, chosen so that ``ts_rank``
with :data:`RANK_WEIGHTS` weighs key : content, tags, day : prev : prev2 as
2 : 1 : 0.5 : 0.25 (SQLite's bm25 column weights), and so that the label
alone says what a hit proves for the calibrated score (:data:`PRESENCE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from memory_inject.records import COLUMN_FIELDS
from memory_inject.storage.day_vote import NEAR_MINUTES, STANDALONE_SOURCES, standalone_sql

if TYPE_CHECKING:
    import psycopg

    from memory_inject.storage.postgres.schema import TableNames

__all__ = [
    "CONTEXT_COLUMNS",
    "NEAR_ROWS",
    "PRESENCE",
    "RANK_WEIGHTS",
    "add_context",
    "add_event_context",
    "add_near_context",
    "context_params",
    "context_values",
    "fill_near",
    "merge_with_context",
    "near_of",
    "stream_key",
    "tsv_expression",
]

_COL = {c: i for i, c in enumerate(COLUMN_FIELDS)}
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


def tsv_expression(
    names: TableNames, *, split: bool = False, config: str = "'english'"
) -> sql.Composed:
    """The generated tsvector of schema 2; ``split`` (schema 7) parses each text with
    :data:`~.folding.COMPOUND_MARKS` read as spaces; ``config`` is the text search
    configuration, as SQL (schema 9: the table's own, :func:`~.folding.config_sql`)."""
    text = "{words_fn}({})" if split else "{}"
    parts = (
        ("{key}", "A"),
        ("content", "B"),
        ("{tags_fn}(tags)", "B"),
        ("{day_fn}({ts})", "B"),
        ("coalesce(ctx_prev, '')", "C"),
        ("coalesce(ctx_prev2, '')", "D"),
    )
    return sql.SQL(
        " || ".join(
            f"setweight(to_tsvector({config}::regconfig, {text.replace('{}', e)}), '{label}')"
            for e, label in parts
        )
    ).format(
        key=sql.Identifier("key"),
        ts=sql.Identifier("timestamp"),
        tags_fn=names.ident("_tags_text"),
        day_fn=names.ident("_day_words"),
        words_fn=names.ident("_words"),
    )


def _numbered(source: sql.Composable) -> sql.Composed:
    """Neighbours over ``source`` rows ``(k, s, ord, content, live, ts)``: ``(k, prev, prev2)``.

    ``s`` is the stream (namespace and session), ``ord`` the write order, ``ts`` the
    timestamp; a row's neighbours are the last two *live* rows of its stream before it
    (``upto`` counts the live rows up to and including a row), each when written within
    :data:`NEAR_INTERVAL` of it (an event's rows share one timestamp).
    """
    return sql.SQL(
        "numbered AS (SELECT src.*, count(*) FILTER (WHERE src.live) OVER "
        "(PARTITION BY src.s ORDER BY src.ord) AS upto FROM ({source}) AS src), "
        "ctx AS (SELECT n.k, p1.content AS prev, p2.content AS prev2 FROM numbered AS n "
        "LEFT JOIN numbered AS p1 ON p1.s = n.s AND p1.live "
        "AND p1.upto = n.upto - n.live::int AND {within1} "
        "LEFT JOIN numbered AS p2 ON p2.s = n.s AND p2.live "
        "AND p2.upto = n.upto - n.live::int - 1 AND {within2})"
    ).format(
        source=source,
        within1=sql.SQL(_WITHIN.format(p="p1.ts", r="n.ts")),
        within2=sql.SQL(_WITHIN.format(p="p2.ts", r="n.ts")),
    )


#: A row's stream as text: its session's, or for a sessionless row its event's
#: (the first field keeps the two kinds apart). Over ``{r}`` with the namespace ``{ns}``.
_STREAM = (
    "CASE WHEN {r}.session_id IS NOT NULL THEN ROW('s', {ns}, {r}.session_id)::text "
    "ELSE ROW('e', {ns}, {r}.category, coalesce({r}.profile_id, ''), {r}.\"timestamp\")::text END"
)
#: Whether a row has neighbours at all: a session's, or an event's (no PI ``layer``).
_HAS_STREAM = "({r}.session_id IS NOT NULL OR {r}.layer IS NULL)"


def add_event_context(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 5: the event index, and existing sessionless rows' neighbours in their event."""
    t = names.ident()
    fill_source = sql.SQL(
        "SELECT m.rid AS k, {s} AS s, m.rid AS ord, m.content, m.deleted_at IS NULL AS live, "
        'm."timestamp" AS ts FROM {t} AS m WHERE m.session_id IS NULL AND m.layer IS NULL'
    ).format(s=sql.SQL(_STREAM.format(r="m", ns="m.namespace")), t=t)
    conn.execute(
        sql.SQL(
            "CREATE INDEX {idx} ON {t} (namespace, category, (coalesce(profile_id, '')), "
            '"timestamp", rid) WHERE session_id IS NULL AND layer IS NULL'
        ).format(idx=names.ident("_event_idx"), t=t)
    )
    # Statistics first: on a table never analyzed (a bulk load just before)
    # the planner expects a handful of rows and joins them by nested loops: the
    # fill of 100,000 rows had not ended after ten minutes; with them the whole
    # migration took 11 s (the rows' tsvectors are computed again).
    conn.execute(sql.SQL("ANALYZE {t}").format(t=t))
    conn.execute(
        sql.SQL(
            "WITH {numbered} UPDATE {t} SET ctx_prev = ctx.prev, ctx_prev2 = ctx.prev2 "
            "FROM ctx WHERE {t}.rid = ctx.k AND ctx.prev IS NOT NULL"
        ).format(numbered=_numbered(fill_source), t=t)
    )


def add_context(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 2: the context columns, filled for existing rows, and the tsvector over them."""
    t = names.ident()
    fill_source = sql.SQL(
        "SELECT rid AS k, ROW(namespace, session_id)::text AS s, rid AS ord, content, "
        'deleted_at IS NULL AS live, "timestamp" AS ts FROM {t} WHERE session_id IS NOT NULL'
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
            t=t,
            fn=names.ident("_day_words"),
            ts=sql.Identifier("timestamp"),
            tsv=tsv_expression(names),
        ),
        sql.SQL("CREATE INDEX {idx} ON {t} USING gin (tsv)").format(
            idx=names.ident("_tsv_idx"), t=t
        ),
    ]
    for stmt in statements:
        conn.execute(stmt)


#: The context columns a new row's INSERT sets (:func:`context_values`, in this order).
CONTEXT_COLUMNS = "ctx_prev, ctx_prev2, ctx_near"
#: How far back a sessionless record written alone looks for its near
#: neighbours (``day_vote.NEAR_MINUTES``; SQLite's schema 9, here schema 6).
NEAR_INTERVAL = f"interval '{NEAR_MINUTES} minutes'"
#: The content of the n-th live record written just before a new one (by
#: timestamp) in its namespace, category and profile, at most
#: :data:`NEAR_INTERVAL` earlier; params: namespace, category, profile,
#: timestamp (twice).
_NEAR_ONE = (
    "(SELECT p.content FROM {t} AS p WHERE p.namespace = %s AND p.session_id IS NULL "  # noqa: S608 - constants
    "AND p.layer IS NULL AND p.category = %s "
    "AND coalesce(p.profile_id, '') = coalesce(%s::text, '') "
    'AND p."timestamp" >= %s::timestamptz - ' + NEAR_INTERVAL + " "
    'AND p."timestamp" < %s::timestamptz AND p.deleted_at IS NULL '
    'ORDER BY p."timestamp" DESC, p.rid DESC LIMIT 1 OFFSET {n})'
)
_EVENT_ONE = (
    "(SELECT p.content FROM {t} AS p WHERE p.namespace = %s AND p.session_id IS NULL "
    "AND p.layer IS NULL AND p.category = %s "
    "AND coalesce(p.profile_id, '') = coalesce(%s::text, '') "
    'AND p."timestamp" = %s::timestamptz AND p.deleted_at IS NULL '
    "ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
#: Whether a neighbour stamped ``{p}`` was written within :data:`NEAR_INTERVAL` of ``{r}``:
#: a session's records further apart (facts a long-lived session gathers days apart)
#: are not each other's context (SQLite's schema 10).
_WITHIN = "{p} BETWEEN {r} - " + NEAR_INTERVAL + " AND {r} + " + NEAR_INTERVAL
#: The content of the n-th live record written before a new one in its session, when
#: written within :data:`NEAR_INTERVAL` of it; params: timestamp, namespace, session.
_SESSION_ONE = (
    "(SELECT CASE WHEN "  # noqa: S608 - constants
    + _WITHIN.format(p='p."timestamp"', r="%s::timestamptz")
    + " THEN p.content END FROM {t} AS p WHERE p.namespace = %s AND p.session_id = %s::text "
    "AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
#: A sessionless row's context: its event's two rows before it, or, with no
#: event, its near neighbours (``ctx_near`` true: a hit for its own words only).
_SESSIONLESS = (
    "coalesce({e0}, {n0}), CASE WHEN {e0} IS NOT NULL THEN {e1} ELSE {n1} END, "
    "CASE WHEN {e0} IS NULL AND {n0} IS NOT NULL THEN true END"
)


def context_params(params: Sequence[Any]) -> tuple[str, list[Any]]:
    """Which neighbours a new row with ``params`` (one per column) gets, and their params.

    ``"session"``, ``"event"`` (a sessionless row: its event's or its near
    neighbours) or ``"none"`` (a sessionless PI record, or a row
    ``day_vote.STANDALONE_SOURCES`` wrote), for :func:`context_values`.
    """
    if params[_COL["source"]] in STANDALONE_SOURCES:
        return "none", []  # a fact stored on purpose stands alone (SQLite's schema 11)
    ns, session = params[_COL["namespace"]], params[_COL["session_id"]]
    if session is not None:
        ts = params[_COL["timestamp"]]
        return "session", [ts, ts, ns, session] * 2
    if params[_COL["layer"]] is not None:
        return "none", []
    event = [ns, params[_COL["category"]], params[_COL["profile_id"]], params[_COL["timestamp"]]]
    near = [*event, params[_COL["timestamp"]]]
    # The placeholders' order in _SESSIONLESS: e0 n0, e0 e1 n1, e0 n0.
    return "event", [*event, *near, *event, *event, *near, *event, *near]


def context_values(t: sql.Identifier, kind: str = "session") -> sql.Composable:
    """``ctx_prev, ctx_prev2, ctx_near`` for an INSERT's VALUES, of :func:`context_params`'s
    ``kind``."""
    if kind == "none":
        return sql.SQL("NULL, NULL, NULL")
    if kind == "session":
        return sql.SQL("{}, {}, NULL").format(
            *(sql.SQL(_SESSION_ONE).format(t=t, n=sql.Literal(n)) for n in (0, 1))
        )
    e0, e1 = (sql.SQL(_EVENT_ONE).format(t=t, n=sql.Literal(n)) for n in (0, 1))
    n0, n1 = (sql.SQL(_NEAR_ONE).format(t=t, n=sql.Literal(n)) for n in (0, 1))
    return sql.SQL(_SESSIONLESS).format(e0=e0, e1=e1, n0=n0, n1=n1)


#: The live sessionless rows of row ``m``'s group written before it (by ``rid``) in the
#: :data:`NEAR_INTERVAL` before it, nearest first: its near neighbours.
NEAR_ROWS = (
    "SELECT p.content FROM {t} AS p WHERE p.namespace = m.namespace "  # noqa: S608 - constants
    "AND p.session_id IS NULL AND p.layer IS NULL AND p.category = m.category "
    "AND coalesce(p.profile_id, '') = coalesce(m.profile_id, '') "
    'AND p."timestamp" >= m."timestamp" - ' + NEAR_INTERVAL + " "
    'AND p."timestamp" < m."timestamp" AND p.rid < m.rid AND p.deleted_at IS NULL '
    'ORDER BY p."timestamp" DESC, p.rid DESC'
)


def near_of(t: sql.Identifier, n: int) -> sql.Composed:
    """The content of the ``n``-th near neighbour of row ``m`` (:data:`NEAR_ROWS`)."""
    return sql.SQL("(" + NEAR_ROWS + " LIMIT 1 OFFSET {n})").format(t=t, n=sql.Literal(n))


def fill_near(t: sql.Identifier, where: sql.Composable) -> sql.Composed:
    """Give the sessionless rows ``where`` picks that have no context yet their near
    neighbours (the rows before them by ``rid``), as an insert would have."""
    n0, n1 = near_of(t, 0), near_of(t, 1)
    return sql.SQL(
        "UPDATE {t} AS u SET ctx_prev = c.p0, ctx_prev2 = c.p1, ctx_near = true "
        "FROM (SELECT m.rid, {n0} AS p0, {n1} AS p1 FROM {t} AS m "
        "WHERE m.session_id IS NULL AND m.layer IS NULL AND m.ctx_prev IS NULL "
        "AND NOT {alone} AND {where}) AS c WHERE u.rid = c.rid AND c.p0 IS NOT NULL"
    ).format(t=t, n0=n0, n1=n1, where=where, alone=sql.SQL(standalone_sql("m")))


def stream_key(table: str, r: str) -> str:
    """SQL for the advisory lock key (int4) of the stream of row ``r``: its session's, else
    its category and profile's (where its event and near neighbours are); ``.neighbours``."""
    tab = "'" + table.replace("'", "''") + "'"
    return (
        f"hashtext(CASE WHEN {r}.session_id IS NOT NULL "
        f"THEN ROW('s', {tab}, {r}.namespace, {r}.session_id)::text "
        f"ELSE ROW('g', {tab}, {r}.namespace, {r}.category, coalesce({r}.profile_id, ''))::text "
        "END)"
    )


def add_near_context(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 6: ``ctx_near``, and existing sessionless rows with no event their near
    neighbours (SQLite's schema 9)."""
    t = names.ident()
    conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN ctx_near boolean").format(t=t))
    conn.execute(fill_near(t, sql.SQL("true")))


def merge_with_context(
    t: sql.Identifier, stage: sql.Identifier, columns: Sequence[str], assign: sql.Composed
) -> sql.Composed:
    """Upsert the staged rows in file order, new rows with their neighbours (param: ``ns``).

    A staged row whose key the table holds is an update (its neighbours are computed
    again after the merge: ``bulk.stage_refresh``); the new ones follow the last two
    live rows of their session (or event) already in the table, and each other in file
    order.
    """
    stream = sql.SQL(_STREAM.format(r="f", ns="%(ns)s::text"))
    source = sql.SQL(
        "SELECT NULL::bigint AS k, m.s, -1 AS grp, m.rid AS ord, m.content, true AS live, "
        "m.ts FROM (SELECT DISTINCT f.session_id, {stream} AS s FROM fresh AS f "
        "WHERE f.session_id IS NOT NULL) AS fs "
        'CROSS JOIN LATERAL (SELECT fs.s, p.rid, p.content, p."timestamp" AS ts FROM {t} AS p '
        "WHERE p.namespace = %(ns)s AND p.session_id = fs.session_id "
        "AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 2) AS m "
        "UNION ALL SELECT NULL::bigint, fs.s, -1, m.rid, m.content, true, m.ts "
        "FROM (SELECT DISTINCT f.category, coalesce(f.profile_id, '') AS pr, "
        'f."timestamp" AS ts, {stream} AS s FROM fresh AS f WHERE f.session_id IS NULL) AS fs '
        'CROSS JOIN LATERAL (SELECT p.rid, p.content, p."timestamp" AS ts FROM {t} AS p '
        "WHERE p.namespace = %(ns)s AND p.session_id IS NULL AND p.layer IS NULL "
        "AND p.category = fs.category AND coalesce(p.profile_id, '') = fs.pr "
        'AND p."timestamp" = fs.ts AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 2) AS m '
        "UNION ALL SELECT f._seq, {stream}, 0, f._seq, "
        'f.content, f.deleted_at IS NULL, f."timestamp"::timestamptz FROM fresh AS f'
    ).format(t=t, stream=stream)
    # (grp, ord) is the write order: the table's rows first, then the file's.
    numbered = _numbered(
        sql.SQL(
            "SELECT k, s, row_number() OVER (ORDER BY grp, ord) AS ord, content, live, ts "
            "FROM ({}) AS u"
        ).format(source)
    )
    return sql.SQL(
        'WITH last AS (SELECT DISTINCT ON ("key") * FROM {s} ORDER BY "key", _seq DESC), '
        "fresh AS (SELECT l.* FROM last AS l WHERE {has_stream} AND NOT EXISTS "
        '(SELECT 1 FROM {t} AS e WHERE e.namespace = %(ns)s AND e."key" = l."key")), '
        "{numbered} "
        "INSERT INTO {t} ({cols}, ctx_prev, ctx_prev2) "
        # A fact stored on purpose takes no neighbours; it is still one (SQLite's schema 11).
        "SELECT {lcols}, ctx.prev, ctx.prev2 FROM last LEFT JOIN ctx ON ctx.k = last._seq "
        "AND NOT {alone} ORDER BY last._seq "
        'ON CONFLICT (namespace, "key") DO UPDATE SET {assign}'
    ).format(
        s=stage,
        t=t,
        has_stream=sql.SQL(_HAS_STREAM.format(r="l")),
        alone=sql.SQL(standalone_sql("last")),
        numbered=numbered,
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        lcols=sql.SQL(", ").join(sql.Identifier("last", c) for c in columns),
        assign=assign,
    )
