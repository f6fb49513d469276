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

import bisect
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
# one of: a row ``x`` after it in time (at most NEAR_MINUTES and a second), newer (rid),
# with fewer than two live rows ``q`` (not the anchor's row) after the anchor in (time,
# rid) order, before ``x`` in time and older than ``x`` (:func:`_near_dependents`). One
# read of the group's live rows over the anchors' windows (:data:`_WINDOW`, the
# ``memories_event`` index) serves every anchor of a write: a re-import of rows written
# close together moves them all within one window, and a statement per anchor and row
# there was quadratic (issue 36).
_WINDOW = (
    "SELECT p.rid, p.timestamp FROM memories AS p WHERE " + _GROUP.format(r="p") + " "  # noqa: S608
    "AND p.timestamp >= :lo AND p.timestamp <= :hi ORDER BY p.timestamp, p.rid"
)
_INF = float("inf")
_TARGETS = "rid IN (SELECT value FROM json_each(?)) AND deleted_at IS NULL"


def anchors(conn: sqlite3.Connection, namespace: str, keys: Iterable[str]) -> list[tuple[Any, ...]]:
    """The :data:`ANCHOR` of each row held under ``keys`` (forgotten ones too)."""
    return conn.execute(
        f"SELECT {ANCHOR} FROM memories WHERE namespace = ? "  # noqa: S608 - constants
        "AND key IN (SELECT value FROM json_each(?))",
        (namespace, json.dumps(list(keys))),
    ).fetchall()


def _dependents(
    conn: sqlite3.Connection, namespace: str, changed: Iterable[Sequence[Any]]
) -> set[int]:
    """The anchors' rows and the live rows that may hold an anchor's row's text as context
    (a superset does no harm: a row computed again gets what it had): an index seek per
    anchor in a session or event, and one read per sessionless group's windows."""
    found: set[int] = set()
    groups: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for rid, session, category, profile, layer, ts in changed:
        found.add(int(rid))
        if session is not None:
            args: dict[str, Any] = {"ns": namespace, "session": session, "rid": rid}
            found.update(int(r) for (r,) in conn.execute(_SESSION_NEXT, args))
            continue
        if layer is not None:
            continue  # a PI record is no row's neighbour
        args = {"ns": namespace, "rid": rid, "category": category, "profile": profile or ""}
        found.update(int(r) for (r,) in conn.execute(_EVENT_NEXT, {**args, "ts": ts}))
        until = format_ts(parse_timestamp(ts) + timedelta(minutes=NEAR_MINUTES, seconds=1))
        groups.setdefault((category, profile or ""), []).append((ts, int(rid), until))
    for (category, profile), group in groups.items():
        args = {"ns": namespace, "category": category, "profile": profile}
        found |= _near_dependents(conn, args, group)
    return found


def _near_dependents(
    conn: sqlite3.Connection, args: dict[str, Any], group: list[tuple[str, int, str]]
) -> set[int]:
    """The rows of one sessionless group that may take an anchor of ``group`` (its
    ``(timestamp, rid, until)``) as near context: the group's live rows over the anchors'
    merged windows are read once, in (time, rid) order, and each anchor walks them."""
    group.sort()
    windows: list[tuple[str, str]] = []
    for ts, _, until in group:
        if windows and ts <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], until))
        else:
            windows.append((ts, until))
    keys: list[tuple[str, int]] = []
    for lo, hi in windows:  # disjoint and in order: ``keys`` stays sorted
        keys.extend(
            (str(t), int(r)) for r, t in conn.execute(_WINDOW, {**args, "lo": lo, "hi": hi})
        )
    tree = _MinTree([r for _, r in keys])
    found: set[int] = set()
    for ts, rid, until in group:
        found.update(_walk(keys, tree, (ts, rid), until))
    return found


def _walk(
    keys: list[tuple[str, int]], tree: _MinTree, anchor: tuple[str, int], until: str
) -> list[int]:
    """The rows of ``keys`` that take ``anchor`` as near context (``_TAKES_IT``): after it
    in time up to ``until``, newer, and with fewer than two rows (not its own) after it and
    before them in time that are older than them. ``m1`` and ``m2`` are the two oldest
    rows seen at earlier times: a row qualifies while it is older than ``m2``, so only rows
    older than ``m2`` are visited (``tree``), a time (a block of ``keys``) at a time, and
    each visit finds a row or makes ``m2`` older: the walk ends when none can qualify."""
    ts, rid = anchor
    m1 = m2 = _INF
    out: list[int] = []
    pos = bisect.bisect_right(keys, anchor)
    while m2 > rid + 1:
        i = tree.first_below(pos, m2)
        if i < 0 or keys[i][0] > until:
            break
        t = keys[i][0]
        end = bisect.bisect_right(keys, (t, _INF), i)  # the rows at time t, by rid
        if t > ts:  # fewer than two older rows at earlier times: those newer than the anchor
            first = bisect.bisect_right(keys, (t, rid), i, end)
            out.extend(r for _, r in keys[first : bisect.bisect_left(keys, (t, m2), i, end)])
        oldest = [r for _, r in keys[i : min(i + 3, end)] if r != rid][:2]
        m1, m2 = sorted((m1, m2, *oldest))[:2]
        pos = end
    return out


class _MinTree:
    """A minimum segment tree over ``values``: the first at or after a place below a bound."""

    def __init__(self, values: Sequence[int]) -> None:
        self.n = len(values)
        self.size = 1
        while self.size < self.n:
            self.size *= 2
        self.t: list[float] = [_INF] * (2 * self.size)
        self.t[self.size : self.size + self.n] = values
        for i in range(self.size - 1, 0, -1):
            self.t[i] = min(self.t[2 * i], self.t[2 * i + 1])

    def first_below(self, pos: int, bound: float) -> int:
        """The first index at or after ``pos`` whose value is below ``bound``, or -1."""
        if pos >= self.n:
            return -1
        t, i = self.t, pos + self.size
        while t[i] >= bound:  # the next subtree to the right
            while i & 1:
                i >>= 1
            if i == 0:
                return -1
            i += 1
        while i < self.size:  # down to its first value below the bound
            i = 2 * i if t[2 * i] < bound else 2 * i + 1
        return i - self.size


def refresh(conn: sqlite3.Connection, namespace: str, changed: Iterable[Sequence[Any]]) -> int:
    """Compute again the context of the rows ``changed`` (:data:`ANCHOR` rows: a written
    row as it was and as it is) and of the rows that took context from them; returns how
    many live rows that was. Runs in the caller's write transaction."""
    rids = _dependents(conn, namespace, changed)
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
