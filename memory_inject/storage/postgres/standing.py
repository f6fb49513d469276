"""The standing-context read of :class:`~memory_inject.storage.postgres.PostgresStore`.

PI's standing context is read every turn: a profile's active L1 records
(insertion order), its most confident L2 hard rules and, per asked category,
the newest rows since a time. :func:`standing_statement` asks for all of them
in one ``UNION ALL`` on the ``_standing_idx`` partial index, of the rows the
turn's sessions may see (``storage._standing_scope``); :func:`standing_entries`
runs it and picks from the rows as every store does
(:func:`~memory_inject.storage.records.standing_pick`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from memory_inject.models import MemoryEntry
from memory_inject.storage._standing_scope import SESSION_RECORD_PREFIX
from memory_inject.storage.postgres.connection import PostgresConnections, rows_of
from memory_inject.storage.postgres.queries import Queries, Stmt
from memory_inject.storage.postgres.schema import RECALL_COLUMNS, row_to_record
from memory_inject.storage.records import HARD_RULE_TYPES, standing_pick

__all__ = ["standing_entries", "standing_statement"]

#: The session rule of the standing read (``storage._standing_scope.turn_sees``).
_OWN_SESSIONS = sql.SQL(
    " AND (session_id IS NULL OR session_id = ANY(%(sessions)s) OR (category = 'session' "
    "AND profile_id IS NOT NULL AND key = %(session_prefix)s || session_id))"
)


def standing_entries(
    connections: PostgresConnections,
    q: Queries,
    profile_id: str | None,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None,
    sessions: Sequence[str] = (),
    shared_only: bool = False,
) -> list[MemoryEntry]:
    """The profile's standing context in one statement (see ``PostgresStore``)."""
    if limit <= 0:
        return []
    stmt = standing_statement(
        q, profile_id, limit, min_confidence, categories, sessions, shared_only
    )
    rows = connections.run("standing_records", rows_of(stmt), read=True)
    records = [row_to_record(r[:-1], RECALL_COLUMNS) for r in rows]  # in rid order
    picked = standing_pick(records, limit, min_confidence, categories)
    return [r.to_entry(None) for r in picked]


def standing_statement(
    q: Queries,
    profile_id: str | None,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None = None,
    sessions: Sequence[str] = (),
    shared_only: bool = False,
) -> Stmt:
    """Live active rows of ``profile_id`` (or of no profile) that a turn of ``sessions`` (or a
    ``shared_only`` one) may see: at most ``limit`` of each part.

    Each row is the recall columns then ``rid``, the whole in ``rid`` order.
    """
    scope = _OWN_SESSIONS if sessions else sql.SQL(" AND session_id IS NULL" if shared_only else "")
    live = (
        sql.SQL(
            "namespace = %(ns)s AND status = 'active' AND deleted_at IS NULL "
            "AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > now()) "
            "AND (profile_id IS NULL OR profile_id = %(profile)s::text)"
        )
        + scope
    )
    query = sql.SQL(
        "(SELECT {cols}, rid FROM {t} WHERE {live} AND layer IN ('L1', 'l1') "
        "ORDER BY rid LIMIT %(lim)s) UNION ALL "
        "(SELECT {cols}, rid FROM {t} WHERE {live} AND layer IN ('L2', 'l2') "
        "AND rule_type = ANY(%(types)s) AND confidence >= %(conf)s "
        "ORDER BY confidence DESC, rid LIMIT %(lim)s)"
    ).format(cols=q.rec, t=q.t, live=live)
    params: dict[str, Any] = {
        "ns": q.ns,
        "profile": profile_id,
        "lim": limit,
        "types": list(HARD_RULE_TYPES),
        "conf": min_confidence,
        "sessions": list(sessions),
        "session_prefix": SESSION_RECORD_PREFIX,
    }
    for n, (category, since) in enumerate((categories or {}).items()):
        query += sql.SQL(
            " UNION ALL (SELECT {cols}, rid FROM {t} WHERE {live} AND category = {c} "
            'AND ({since}::timestamptz IS NULL OR "timestamp" >= {since}) '
            "ORDER BY updated_at DESC, rid DESC LIMIT %(lim)s)"
        ).format(
            cols=q.rec,
            t=q.t,
            live=live,
            c=sql.Placeholder(f"cat{n}"),
            since=sql.Placeholder(f"since{n}"),
        )
        params[f"cat{n}"], params[f"since{n}"] = str(category), since
    return Stmt(query + sql.SQL(" ORDER BY rid"), params)
