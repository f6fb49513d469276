"""A PostgreSQL row's context columns computed again when its neighbours change (issue 29).

An insert gives a new row its neighbours' text (``ctx_prev``, ``ctx_prev2``,
``ctx_near``: :mod:`.context`). Those columns must follow the rows they were
taken from: a forgotten row's words may not lift, and so confirm, its
neighbour, and a key written again (an update, a forgotten row revived,
perhaps by another scope) may not keep the context of the row it replaces.
So a write that changes a row already held, and a forget, run :func:`refresh`
in their own transaction: the row and the rows that took context from it get
theirs again, by the rules an insert applies, over the live rows written
before each (the tsvector is generated from the columns, so it follows).

Two writers of one *stream* (a session, or the sessionless rows of a category
and profile, where events and near context live) at once could each compute
context from a snapshot that misses the other's change, so every write takes
the stream's transaction-level advisory lock first (:func:`lock_streams`, in
one order, before any row lock), and a shared lock on the namespace that an
import takes alone (:func:`lock_namespace`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import sql

from memory_inject.storage.day_vote import standalone_sql
from memory_inject.storage.postgres.context import _WITHIN, NEAR_INTERVAL, NEAR_ROWS, stream_key
from memory_inject.storage.postgres.queries import Stmt
from memory_inject.storage.postgres.schema import LOCK_CLASS

__all__ = [
    "ANCHOR",
    "KINDS",
    "StreamMoved",
    "forget",
    "kind",
    "lock_namespace",
    "lock_streams",
    "refresh",
    "refresh_rows",
]

#: The lock classes (first key) of a stream and of a namespace.
STREAM_LOCK = LOCK_CLASS + 1
NAMESPACE_LOCK = LOCK_CLASS + 2
#: A row's place among the others: what decides whose neighbour it is.
ANCHOR = ("rid", "key", "session_id", "category", "profile_id", "layer", "timestamp")


class StreamMoved(Exception):
    """The row a write changes moved to a stream whose lock the write does not hold (a
    concurrent move between its lock and its change): the write runs again."""


def _namespace_key(table: str) -> sql.Composable:
    return sql.SQL("hashtext(ROW('n', {tab}, %(ns)s::text)::text)").format(tab=sql.Literal(table))


def lock_namespace(t: sql.Identifier, table: str, ns: str, *, shared: bool = False) -> Stmt:
    """The namespace's lock, alone: an import's merge rewrites rows of any stream.
    ``shared``: beside the other writers, not beside an import (``mark_used``)."""
    query = sql.SQL("SELECT pg_advisory_xact_lock{how}({cls}, {key})::text").format(
        how=sql.SQL("_shared" if shared else ""),
        cls=sql.Literal(NAMESPACE_LOCK),
        key=_namespace_key(table),
    )
    return Stmt(query, {"ns": ns})


def lock_streams(
    t: sql.Identifier, table: str, ns: str, keys: Sequence[str], new: dict[str, Any] | None
) -> Stmt:
    """Take the namespace's shared lock, then, in key order, the locks of the streams of
    the rows held under ``keys`` and of ``new`` (a row to be written: its ``session_id``,
    ``category``, ``profile_id``); sends back the stream keys locked."""
    arms = [
        sql.SQL(
            'SELECT {k} AS k FROM {t} AS m WHERE m.namespace = %(ns)s AND m."key" = ANY(%(keys)s)'
        ).format(k=sql.SQL(stream_key(table, "m")), t=t)
    ]
    params: dict[str, Any] = {"ns": ns, "keys": list(keys)}
    if new is not None:
        arms.append(
            sql.SQL(
                "SELECT {k} FROM (SELECT %(ns)s::text AS namespace, %(s)s::text AS session_id, "
                "%(c)s::text AS category, %(p)s::text AS profile_id) AS w"
            ).format(k=sql.SQL(stream_key(table, "w")))
        )
        params.update(s=new["session_id"], c=new["category"], p=new["profile_id"])
    query = sql.SQL(
        "WITH n AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared({ncls}, {nkey})::text AS l) "
        "SELECT s.k, pg_advisory_xact_lock({cls}, s.k)::text FROM n, "
        "(SELECT DISTINCT k FROM ({arms}) AS x ORDER BY k OFFSET 0) AS s"
    ).format(
        ncls=sql.Literal(NAMESPACE_LOCK),
        nkey=_namespace_key(table),
        cls=sql.Literal(STREAM_LOCK),
        arms=sql.SQL(" UNION ALL ").join(arms),
    )
    return Stmt(query, params)


def forget(
    t: sql.Identifier,
    table: str,
    ns: str,
    key: str,
    scope: tuple[list[str], bool, tuple[str, ...] | None] | None = None,
) -> Stmt:
    """Soft-delete the row under ``key`` (set ``deleted_at``); sends back its key, its
    stream's lock key, session and layer (no row: nothing was forgotten).

    With ``scope`` (``_base.forget_scope``): only a row of those sessions, or a
    shared row (of those sources) when allowed, in the same statement.
    """
    query = sql.SQL(
        "UPDATE {t} AS g SET deleted_at = now() "
        'WHERE namespace = %(ns)s AND "key" = %(key)s AND deleted_at IS NULL'
    ).format(t=t)
    params: dict[str, Any] = {"ns": ns, "key": key}
    if scope is not None:
        named, shared, sources = scope
        params.update(named=named, shared=shared, sources=list(sources or ()))
        query += sql.SQL(
            " AND (session_id = ANY(%(named)s) OR (%(shared)s AND session_id IS NULL"
            + ("" if sources is None else " AND source = ANY(%(sources)s)")
            + "))"
        )
    query += sql.SQL(' RETURNING "key", {k}, session_id, layer').format(
        k=sql.SQL(stream_key(table, "g"))
    )
    return Stmt(query, params)


def _group(r: str) -> str:
    """A sessionless row ``r`` of the anchor ``a``'s group, live."""
    return (
        f"{r}.namespace = %(ns)s AND {r}.session_id IS NULL AND {r}.layer IS NULL "
        f"AND {r}.category = a.category "
        f"AND coalesce({r}.profile_id, '') = coalesce(a.profile_id, '') "
        f"AND {r}.deleted_at IS NULL"
    )


# The live rows that may hold an anchor's text as context (``_SESSION_NEXT``,
# ``_GROUP_NEXT``): in its session the next two, in its event the next two, and the
# sessionless rows written within NEAR_INTERVAL after it with fewer than two live rows
# between (``_TAKES_IT``), the two near neighbours they take. Two rows after it by time
# (``_AFTER``) that are both older (rid) than a row and before it in time rule that row
# out, so only the rows up to the second of them in time, or older than one of them, are
# looked at (with rows written in time order, the two rows themselves). A superset does
# no harm (a row computed again gets what it had); each arm is an index range.
_AFTER = (
    "SELECT a.*, x.n, x.upto, x.older FROM a CROSS JOIN LATERAL (SELECT count(*) AS n, "  # noqa: S608
    'max(y.ts) AS upto, max(y.rid) AS older FROM (SELECT q.rid, q."timestamp" AS ts '
    "FROM {t} AS q WHERE " + _group("q") + ' AND q."timestamp" >= a.ts '
    'AND q."timestamp" <= a.ts + ' + NEAR_INTERVAL + ' AND (q."timestamp" > a.ts '
    'OR q.rid > a.rid) ORDER BY q."timestamp", q.rid LIMIT 2) AS y) AS x '
    "WHERE a.session_id IS NULL AND a.layer IS NULL"
)
_TAKES_IT = (
    "(SELECT count(*) FROM (SELECT 1 FROM {t} AS q WHERE "  # noqa: S608 - constants
    + _group("q")
    + " "
    'AND q.rid < p.rid AND q.rid <> a.rid AND q."timestamp" >= a.ts '
    'AND q."timestamp" < p."timestamp" '
    'AND (q."timestamp" > a.ts OR (q."timestamp" = a.ts AND q.rid > a.rid)) LIMIT 2) AS c) < 2'
)
_SELF = 'SELECT a."key" FROM a'
_SESSION_NEXT = (
    'SELECT d."key" FROM a CROSS JOIN LATERAL (SELECT p."key" FROM {t} AS p '
    "WHERE a.session_id IS NOT NULL AND p.namespace = %(ns)s AND p.session_id = a.session_id "
    "AND p.rid > a.rid AND p.deleted_at IS NULL ORDER BY p.rid LIMIT 2) AS d"
)
_GROUP_NEXT = (
    'SELECT d."key" FROM a CROSS JOIN LATERAL (SELECT p."key" FROM {t} AS p '  # noqa: S608
    "WHERE a.session_id IS NULL AND a.layer IS NULL AND " + _group("p") + " "
    'AND p."timestamp" = a.ts AND p.rid > a.rid ORDER BY p.rid LIMIT 2) AS d '
    'UNION SELECT p."key" FROM later AS a JOIN {t} AS p ON ' + _group("p") + " "
    'AND p."timestamp" > a.ts AND p.rid > a.rid AND p."timestamp" <= '
    "CASE WHEN a.n < 2 THEN a.ts + " + NEAR_INTERVAL + " ELSE a.upto END WHERE " + _TAKES_IT + " "
    # The stream index's rid range is the one to use: the category as an expression.
    'UNION SELECT p."key" FROM later AS a JOIN {t} AS p ON a.n >= 2 AND p.rid > a.rid '
    "AND p.rid < a.older AND p.namespace = %(ns)s AND p.session_id IS NULL "
    "AND p.layer IS NULL AND p.category || '' = a.category "
    "AND coalesce(p.profile_id, '') = coalesce(a.profile_id, '') AND p.deleted_at IS NULL "
    'AND p."timestamp" > a.ts AND p."timestamp" <= a.ts + ' + NEAR_INTERVAL + " "
    "WHERE " + _TAKES_IT
)
# The two live rows before ``m`` in its session (each within NEAR_INTERVAL of it), in
# its event, and its near ones: arrays of at most two, one subquery each.
_SESSION_TWO = (
    "ARRAY(SELECT CASE WHEN "  # noqa: S608 - built from constants
    + _WITHIN.format(p='p."timestamp"', r='m."timestamp"')
    + " THEN p.content END FROM {t} AS p WHERE p.namespace = m.namespace "
    "AND p.session_id = m.session_id AND p.rid < m.rid AND p.deleted_at IS NULL "
    "ORDER BY p.rid DESC LIMIT 2)"
)
_EVENT_TWO = (
    "ARRAY(SELECT p.content FROM {t} AS p WHERE p.namespace = m.namespace "
    "AND p.session_id IS NULL AND p.layer IS NULL AND p.category = m.category "
    "AND coalesce(p.profile_id, '') = coalesce(m.profile_id, '') "
    'AND p."timestamp" = m."timestamp" AND p.rid < m.rid AND p.deleted_at IS NULL '
    "ORDER BY p.rid DESC LIMIT 2)"
)
# A row's context as an insert gives it (``context.context_params``): none for a fact
# stored on purpose, its session's, none for a PI record, else its event's or its near one.
_ROW_CONTEXT = (
    "CASE WHEN {alone} THEN NULL WHEN m.session_id IS NOT NULL THEN x.s[1] "
    "WHEN m.layer IS NOT NULL THEN NULL ELSE coalesce(x.e[1], x.n[1]) END AS p0, "
    "CASE WHEN {alone} THEN NULL WHEN m.session_id IS NOT NULL THEN x.s[2] "
    "WHEN m.layer IS NOT NULL THEN NULL WHEN x.e[1] IS NOT NULL THEN x.e[2] ELSE x.n[2] END "
    "AS p1, CASE WHEN {alone} OR m.session_id IS NOT NULL OR m.layer IS NOT NULL THEN NULL "
    "WHEN x.e[1] IS NULL AND x.n[1] IS NOT NULL THEN true END AS nr"
)
_NEIGHBOURS = (
    "CROSS JOIN LATERAL (SELECT CASE WHEN m.session_id IS NOT NULL THEN {s} END AS s, "
    "CASE WHEN m.session_id IS NULL AND m.layer IS NULL THEN {e} END AS e, "
    "CASE WHEN m.session_id IS NULL AND m.layer IS NULL THEN {n} END AS n) AS x"
)
#: The kinds of row a refresh may meet (:func:`kind`): a session's, a sessionless group's
#: (events and near context), a PI record (no neighbours).
KINDS = ("session", "group", "pi")
_NONE = sql.SQL("NULL::text[]")


def kind(session_id: str | None, layer: str | None) -> str:
    """Which of :data:`KINDS` a row with ``session_id`` and ``layer`` is."""
    if session_id is not None:
        return "session"
    return "group" if layer is None else "pi"


def refresh(
    t: sql.Identifier,
    anchors: sql.Composable,
    params: dict[str, Any],
    kinds: Iterable[str] = KINDS,
) -> Stmt:
    """Compute again the context of the live rows ``anchors`` (a query of :data:`ANCHOR`
    columns, the timestamp named ``ts``) and of the rows that took context from them;
    only rows whose context changes are written. ``params`` holds ``ns`` and the anchors'.
    ``kinds``: of the anchors (:func:`kind`); the statement looks for those only (its
    planning is most of its cost)."""
    kinds = set(kinds)
    session, group = "session" in kinds, "group" in kinds
    context = sql.SQL(_ROW_CONTEXT).format(alone=sql.SQL(standalone_sql("m")))
    lateral = sql.SQL(_NEIGHBOURS).format(
        s=sql.SQL(_SESSION_TWO).format(t=t) if session else _NONE,
        e=sql.SQL(_EVENT_TWO).format(t=t) if group else _NONE,
        n=sql.SQL("ARRAY(" + NEAR_ROWS + " LIMIT 2)").format(t=t) if group else _NONE,
    )
    arms = [_SELF, *([_SESSION_NEXT] if session else []), *([_GROUP_NEXT] if group else [])]
    later = sql.SQL("later AS ({}), ").format(sql.SQL(_AFTER).format(t=t)) if group else sql.SQL("")
    query = sql.SQL(
        "WITH a AS ({anchors}), {later}targets AS ({targets}), "
        'fresh AS (SELECT m."key", {context} FROM {t} AS m {lateral} WHERE m.namespace = %(ns)s '
        'AND m."key" IN (SELECT "key" FROM targets) AND m.deleted_at IS NULL) '
        "UPDATE {t} AS u SET ctx_prev = f.p0, ctx_prev2 = f.p1, ctx_near = f.nr FROM fresh AS f "
        'WHERE u.namespace = %(ns)s AND u."key" = f."key" '
        "AND (u.ctx_prev, u.ctx_prev2, u.ctx_near) IS DISTINCT FROM (f.p0, f.p1, f.nr)"
    ).format(
        anchors=anchors,
        later=later,
        targets=sql.SQL(" UNION ".join(arms)).format(t=t),
        context=context,
        lateral=lateral,
        t=t,
    )
    return Stmt(query, params, rows=False)


def refresh_rows(
    t: sql.Identifier,
    ns: str,
    keys: Sequence[str],
    kinds: Iterable[str],
    before: Sequence[Sequence[Any]] = (),
) -> Stmt:
    """:func:`refresh` of the rows under ``keys`` as they are now and of the places
    ``before`` (:data:`ANCHOR` values: where a written row was before its write), all of
    ``kinds``. Rows are found by key: the table has no index on ``rid`` alone."""
    anchors = sql.SQL(
        'SELECT rid, "key", session_id, category, profile_id, layer, "timestamp" AS ts '
        'FROM {t} WHERE namespace = %(ns)s AND "key" = ANY(%(keys)s::text[])'
    ).format(t=t)
    params: dict[str, Any] = {"ns": ns, "keys": list(keys)}
    if before:
        anchors += sql.SQL(
            " UNION ALL SELECT * FROM unnest(%(b_rid)s::bigint[], %(b_key)s::text[], "
            "%(b_session)s::text[], %(b_category)s::text[], %(b_profile)s::text[], "
            "%(b_layer)s::text[], %(b_ts)s::timestamptz[])"
        )
        for i, name in enumerate(("rid", "key", "session", "category", "profile", "layer", "ts")):
            params["b_" + name] = [place[i] for place in before]
    return refresh(t, anchors, params, kinds)
