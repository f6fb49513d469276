"""A SQLite row's context columns computed again when its neighbours change (issue 29).

The insert trigger (:mod:`.ddl`) gives a new row its neighbours' text
(``ctx_prev``, ``ctx_prev2``, ``ctx_near``: :mod:`.ddl_context`). Those columns
must follow the rows they were taken from: a forgotten row's words may not
lift, and so confirm, its neighbour, and a key written again (an update, a
forgotten row revived, perhaps by another scope) may not keep the context of
the row it replaces. So every write that changes a row already held (its
text, its scope, its time, whether it is forgotten) calls :func:`refresh` in
its own transaction with the row as it was and as it is (:func:`anchors`):
the row itself and the rows that took context from it (:func:`_dependents`)
get theirs again, by the very expressions the insert trigger uses, over the
live rows written before each. A new key needs nothing (the trigger did it,
and no row was written after it). Only those few rows are touched, and their
keyword index entries are replaced the way the schema-8 and 9 migrations did.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from memory_inject.models import parse_timestamp
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage.day_vote import NEAR_MINUTES
from memory_inject.storage.sqlite.ddl import FTS_COLUMNS
from memory_inject.storage.sqlite.ddl_context import CTX_STANDALONE_ASSIGN

__all__ = ["ANCHOR", "anchors", "refresh"]

#: A row's place among the others (:func:`anchors`): what decides whose neighbour it is.
ANCHOR = "rid, session_id, category, profile_id, layer, timestamp"

# A sessionless row's group (namespace, category, profile, no PI layer), for ``{r}``.
_GROUP = (
    "{r}.namespace = :ns AND {r}.session_id IS NULL AND {r}.layer IS NULL "
    "AND {r}.category = :category AND coalesce({r}.profile_id, '') = :profile "
    "AND {r}.deleted_at IS NULL"
)
# The live rows that may hold the anchor's text as context: in its session the next two
# (``ddl_context._NEIGHBOUR``), in its event the next two (``_EVENT_NEIGHBOUR``).
_SESSION_NEXT = (
    "SELECT p.rid FROM memories AS p WHERE p.namespace = :ns AND p.session_id = :session "
    "AND p.rid > :rid AND p.deleted_at IS NULL ORDER BY p.rid LIMIT 2"
)
_EVENT_NEXT = (
    "SELECT p.rid FROM memories AS p WHERE " + _GROUP.format(r="p") + " "  # noqa: S608
    "AND p.timestamp = :ts AND p.rid > :rid ORDER BY p.rid LIMIT 2"
)
# And the sessionless rows written within NEAR_MINUTES after it whose near neighbours
# (``_NEAR_NEIGHBOUR``: the two live rows before them by time, written before them) it is
# one of: fewer than two live rows between it and them (:data:`_TAKES_IT`). Two rows
# after it by time (:data:`_AFTER`) that are both older (rid) than a row and before it
# in time rule that row out, so only the rows up to the second of them in time, or
# older than one of them, are looked at (:data:`_NEAR_BY_TIME`, :data:`_NEAR_BY_RID`):
# with rows written in time order, the two rows themselves.
_AFTER = (
    "SELECT rid, timestamp FROM memories AS q WHERE " + _GROUP.format(r="q") + " "  # noqa: S608
    "AND q.timestamp >= :ts AND q.timestamp <= :until AND (q.timestamp > :ts OR q.rid > :rid) "
    "ORDER BY q.timestamp, q.rid LIMIT 2"
)
_TAKES_IT = (
    "(SELECT count(*) FROM (SELECT 1 FROM memories AS q "  # noqa: S608 - constants
    "WHERE " + _GROUP.format(r="q") + " AND q.rid < p.rid AND q.rid <> :rid "
    "AND q.timestamp >= :ts AND q.timestamp < p.timestamp "
    "AND (q.timestamp > :ts OR (q.timestamp = :ts AND q.rid > :rid)) LIMIT 2)) < 2"
)
_NEAR_BY_TIME = (
    "SELECT p.rid FROM memories AS p WHERE " + _GROUP.format(r="p") + " "  # noqa: S608
    "AND p.timestamp > :ts AND p.timestamp <= :upto AND p.rid > :rid AND " + _TAKES_IT
)
# The group's columns with ``+``: the rowid range is the index to use.
_NEAR_BY_RID = (
    "SELECT p.rid FROM memories AS p WHERE p.rid > :rid AND p.rid < :older "  # noqa: S608
    "AND +p.namespace = :ns AND p.session_id IS NULL AND p.layer IS NULL "
    "AND +p.category = :category AND coalesce(p.profile_id, '') = :profile "
    "AND p.deleted_at IS NULL AND p.timestamp > :ts AND p.timestamp <= :until AND " + _TAKES_IT
)
_TARGETS = "rid IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"


def anchors(conn: sqlite3.Connection, namespace: str, keys: Iterable[str]) -> list[tuple[Any, ...]]:
    """The :data:`ANCHOR` of each row held under ``keys`` (forgotten ones too)."""
    return conn.execute(
        f"SELECT {ANCHOR} FROM memories WHERE namespace = ? "  # noqa: S608 - constants
        "AND key IN (SELECT value FROM json_each(?))",
        (namespace, json.dumps(list(keys))),
    ).fetchall()


def _dependents(conn: sqlite3.Connection, namespace: str, anchor: Sequence[Any]) -> set[int]:
    """The live rows that may hold ``anchor``'s row's text as context (a superset does no
    harm: a row computed again gets what it had); a few index ranges."""
    rid, session, category, profile, layer, ts = anchor
    if session is not None:
        args: dict[str, Any] = {"ns": namespace, "session": session, "rid": rid}
        return {int(r) for (r,) in conn.execute(_SESSION_NEXT, args)}
    if layer is not None:
        return set()  # a PI record is no row's neighbour
    until = format_ts(parse_timestamp(ts) + timedelta(minutes=NEAR_MINUTES, seconds=1))
    args = {"ns": namespace, "rid": rid, "category": category, "profile": profile or ""}
    args.update(ts=ts, until=until)
    found = {int(r) for (r,) in conn.execute(_EVENT_NEXT, args)}
    after = conn.execute(_AFTER, args).fetchall()
    if len(after) < 2:  # fewer than two rows in the window after it: each may take it
        args.update(upto=until, older=0)
    else:
        args.update(upto=after[1][1], older=max(int(after[0][0]), int(after[1][0])))
    found.update(int(r) for (r,) in conn.execute(_NEAR_BY_TIME, args))
    found.update(int(r) for (r,) in conn.execute(_NEAR_BY_RID, args))
    return found


def refresh(conn: sqlite3.Connection, namespace: str, changed: Iterable[Sequence[Any]]) -> int:
    """Compute again the context of the rows ``changed`` (:data:`ANCHOR` rows: a written
    row as it was and as it is) and of the rows that took context from them; returns how
    many live rows that was. Runs in the caller's write transaction."""
    rids: set[int] = set()
    for anchor in changed:
        rids.add(int(anchor[0]))
        rids |= _dependents(conn, namespace, anchor)
    if not rids:
        return 0
    todo = (json.dumps(sorted(rids)),)
    # External content: the index entry goes with the values it was made from, then the
    # row's new values go in (the update trigger watches the row's own columns only).
    conn.execute(
        f"INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS}) "  # noqa: S608
        f"SELECT 'delete', rid, {FTS_COLUMNS} FROM memories WHERE {_TARGETS}",
        todo,
    )
    n = conn.execute(
        f"UPDATE memories SET {CTX_STANDALONE_ASSIGN.format(row='memories')} "  # noqa: S608
        f"WHERE {_TARGETS}",
        todo,
    ).rowcount
    conn.execute(
        f"INSERT INTO memories_fts(rowid, {FTS_COLUMNS}) "  # noqa: S608 - constants
        f"SELECT rid, {FTS_COLUMNS} FROM memories WHERE {_TARGETS}",
        todo,
    )
    return int(n)
