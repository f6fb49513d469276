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

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from memory_inject.storage.day_vote import standalone_sql
from memory_inject.storage.postgres.context import _WITHIN, NEAR_INTERVAL, near_of, stream_key
from memory_inject.storage.postgres.queries import Stmt
from memory_inject.storage.postgres.schema import LOCK_CLASS

__all__ = [
    "ANCHOR",
    "StreamMoved",
    "forget",
    "lock_namespace",
    "lock_streams",
    "refresh",
    "refresh_rows",
]

#: The lock classes (first key) of a stream and of a namespace.
STREAM_LOCK = LOCK_CLASS + 1
NAMESPACE_LOCK = LOCK_CLASS + 2
#: A row's place among the others: what decides whose neighbour it is.
ANCHOR = ("rid", "session_id", "category", "profile_id", "layer", "timestamp")


class StreamMoved(Exception):
    """The row a write changes moved to a stream whose lock the write does not hold (a
    concurrent move between its lock and its change): the write runs again."""


def _namespace_key(table: str) -> sql.Composable:
    return sql.SQL("hashtext(ROW('n', {tab}, %(ns)s::text)::text)").format(tab=sql.Literal(table))


def lock_namespace(t: sql.Identifier, table: str, ns: str) -> Stmt:
    """The namespace's lock, alone: an import's merge rewrites rows of any stream."""
    query = sql.SQL("SELECT pg_advisory_xact_lock({cls}, {key})::text").format(
        cls=sql.Literal(NAMESPACE_LOCK), key=_namespace_key(table)
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
    """Soft-delete the row under ``key`` (set ``deleted_at``); sends back its ``rid`` and
    its stream's lock key (no row: nothing was forgotten).

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
    query += sql.SQL(" RETURNING rid, {key}").format(key=sql.SQL(stream_key(table, "g")))
    return Stmt(query, params)


def _group(r: str) -> str:
    """A sessionless row ``r`` of the anchor ``a``'s group, live."""
    return (
        f"{r}.namespace = %(ns)s AND {r}.session_id IS NULL AND {r}.layer IS NULL "
        f"AND {r}.category = a.category "
        f"AND coalesce({r}.profile_id, '') = coalesce(a.profile_id, '') "
        f"AND {r}.deleted_at IS NULL"
    )


# The live rows that may hold an anchor's text as context: in its session the next two,
# in its event the next two, and the sessionless rows written within NEAR_INTERVAL after
# it with fewer than two live rows between (the two near neighbours they take). A
# superset does no harm (a row computed again gets what it had); each arm is an index range.
_TARGETS = (
    "SELECT a.rid FROM a "  # noqa: S608 - built from constants
    "UNION SELECT d.rid FROM a CROSS JOIN LATERAL (SELECT p.rid FROM {t} AS p "
    "WHERE a.session_id IS NOT NULL AND p.namespace = %(ns)s AND p.session_id = a.session_id "
    "AND p.rid > a.rid AND p.deleted_at IS NULL ORDER BY p.rid LIMIT 2) AS d "
    "UNION SELECT d.rid FROM a CROSS JOIN LATERAL (SELECT p.rid FROM {t} AS p "
    "WHERE a.session_id IS NULL AND a.layer IS NULL AND " + _group("p") + " "
    'AND p."timestamp" = a.ts AND p.rid > a.rid ORDER BY p.rid LIMIT 2) AS d '
    "UNION SELECT p.rid FROM a JOIN {t} AS p ON a.session_id IS NULL AND a.layer IS NULL "
    "AND " + _group("p") + ' AND p."timestamp" > a.ts '
    'AND p."timestamp" <= a.ts + ' + NEAR_INTERVAL + " AND p.rid > a.rid "
    "WHERE (SELECT count(*) FROM (SELECT 1 FROM {t} AS q WHERE " + _group("q") + " "
    'AND q.rid < p.rid AND q.rid <> a.rid AND q."timestamp" < p."timestamp" '
    'AND (q."timestamp" > a.ts OR (q."timestamp" = a.ts AND q.rid > a.rid)) LIMIT 2) AS c) < 2'
)
# The n-th live row before ``m`` in its session (within NEAR_INTERVAL) and in its event.
_SESSION_N = (
    "(SELECT CASE WHEN "  # noqa: S608 - built from constants
    + _WITHIN.format(p='p."timestamp"', r='m."timestamp"')
    + " "
    "THEN p.content END FROM {t} AS p WHERE p.namespace = m.namespace "
    "AND p.session_id = m.session_id AND p.rid < m.rid AND p.deleted_at IS NULL "
    "ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
_EVENT_N = (
    "(SELECT p.content FROM {t} AS p WHERE p.namespace = m.namespace "
    "AND p.session_id IS NULL AND p.layer IS NULL AND p.category = m.category "
    "AND coalesce(p.profile_id, '') = coalesce(m.profile_id, '') "
    'AND p."timestamp" = m."timestamp" AND p.rid < m.rid AND p.deleted_at IS NULL '
    "ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
# A row's context as an insert gives it (``context.context_params``): none for a fact
# stored on purpose, its session's, none for a PI record, else its event's or its near one.
_ROW_CONTEXT = (
    "CASE WHEN {alone} THEN NULL WHEN m.session_id IS NOT NULL THEN {s0} "
    "WHEN m.layer IS NOT NULL THEN NULL ELSE coalesce({e0}, {n0}) END AS p0, "
    "CASE WHEN {alone} THEN NULL WHEN m.session_id IS NOT NULL THEN {s1} "
    "WHEN m.layer IS NOT NULL THEN NULL WHEN {e0} IS NOT NULL THEN {e1} ELSE {n1} END AS p1, "
    "CASE WHEN {alone} OR m.session_id IS NOT NULL OR m.layer IS NOT NULL THEN NULL "
    "WHEN {e0} IS NULL AND {n0} IS NOT NULL THEN true END AS nr"
)


def refresh(t: sql.Identifier, anchors: sql.Composable, params: dict[str, Any]) -> Stmt:
    """Compute again the context of the live rows ``anchors`` (a query of :data:`ANCHOR`
    columns, the timestamp named ``ts``) and of the rows that took context from them;
    only rows whose context changes are written. ``params`` holds ``ns`` and the anchors'."""
    n = {i: sql.Literal(i) for i in (0, 1)}
    context = sql.SQL(_ROW_CONTEXT).format(
        alone=sql.SQL(standalone_sql("m")),
        s0=sql.SQL(_SESSION_N).format(t=t, n=n[0]),
        s1=sql.SQL(_SESSION_N).format(t=t, n=n[1]),
        e0=sql.SQL(_EVENT_N).format(t=t, n=n[0]),
        e1=sql.SQL(_EVENT_N).format(t=t, n=n[1]),
        n0=near_of(t, 0),
        n1=near_of(t, 1),
    )
    query = sql.SQL(
        "WITH a AS ({anchors}), targets AS ({targets}), "
        "fresh AS (SELECT m.rid, {context} FROM {t} AS m "
        "WHERE m.rid IN (SELECT rid FROM targets) AND m.deleted_at IS NULL) "
        "UPDATE {t} AS u SET ctx_prev = f.p0, ctx_prev2 = f.p1, ctx_near = f.nr FROM fresh AS f "
        "WHERE u.rid = f.rid AND (u.ctx_prev, u.ctx_prev2, u.ctx_near) "
        "IS DISTINCT FROM (f.p0, f.p1, f.nr)"
    ).format(anchors=anchors, targets=sql.SQL(_TARGETS).format(t=t), context=context, t=t)
    return Stmt(query, params, rows=False)


def refresh_rows(
    t: sql.Identifier, ns: str, rids: Sequence[int], before: Sequence[Sequence[Any]] = ()
) -> Stmt:
    """:func:`refresh` of the rows ``rids`` as they are now and of the places ``before``
    (:data:`ANCHOR` values: where a written row was before its write)."""
    anchors = sql.SQL(
        'SELECT rid, session_id, category, profile_id, layer, "timestamp" AS ts FROM {t} '
        "WHERE rid = ANY(%(rids)s::bigint[]) UNION ALL SELECT * FROM unnest(%(b_rid)s::bigint[], "
        "%(b_session)s::text[], %(b_category)s::text[], %(b_profile)s::text[], "
        "%(b_layer)s::text[], %(b_ts)s::timestamptz[])"
    ).format(t=t)
    params: dict[str, Any] = {"ns": ns, "rids": list(rids)}
    for i, name in enumerate(("rid", "session", "category", "profile", "layer", "ts")):
        params["b_" + name] = [place[i] for place in before]
    return refresh(t, anchors, params)
