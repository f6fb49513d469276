"""The standing-context read of :class:`~memory_inject.storage.postgres.PostgresStore`.

PI's standing context is read every turn: a profile's active L1 records
(insertion order), its most confident L2 hard rules and, per asked category,
the newest rows since a time. :func:`standing_statement` asks for all of them
in one ``UNION ALL`` on the ``_standing_idx`` partial index; the store picks
from the rows as every store does (:func:`~memory_inject.storage.records.standing_pick`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg import sql

from memory_inject.storage.postgres.queries import Queries, Stmt
from memory_inject.storage.records import HARD_RULE_TYPES

__all__ = ["standing_statement"]


def standing_statement(
    q: Queries,
    profile_id: str | None,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None = None,
) -> Stmt:
    """Live active rows of ``profile_id`` (or of no profile): at most ``limit`` of each part.

    Each row is the recall columns then ``rid``, the whole in ``rid`` order.
    """
    live = sql.SQL(
        "namespace = %(ns)s AND status = 'active' AND deleted_at IS NULL "
        "AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > now()) "
        "AND (profile_id IS NULL OR profile_id = %(profile)s::text)"
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
