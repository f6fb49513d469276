"""The SQLite store's reads for a turn's context: entities in use, mentions, standing records.

Functions over the engine's read (``SQLiteConnection.read``: an operation on a
read connection, retried once when the file is locked, stopped at a
deadline), so :class:`~.store.SQLiteStore` keeps only their signatures and
documentation; the entity statements are :mod:`.queries`', the standing
records' one is here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from memory_inject.models import MemoryEntry
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage._plan_rows import (
    MENTION_ROWS,
    entity_names,
    like_pattern,
    like_prefix,
    resolve_mentions,
)
from memory_inject.storage._standing_scope import scope_sql
from memory_inject.storage.records import HARD_RULE_TYPES, MemoryRecord, standing_pick
from memory_inject.storage.sqlite.codec import SELECT, row_to_record
from memory_inject.storage.sqlite.queries import KNOWN_ENTITIES, MENTIONED_ENTITIES

__all__ = ["Reader", "entities_mentioned", "known_entities", "standing_entries"]

T = TypeVar("T")


class Reader(Protocol):
    """The store's read: ``op`` on a read connection, ``what`` naming it in errors."""

    def __call__(self, op: Callable[[sqlite3.Connection], T], what: str, /) -> T: ...


def known_entities(read: Reader, namespace: str) -> dict[str, str]:
    """``{display name: entity id}`` for every entity id the live rows of ``namespace`` name."""
    rows = read(lambda c: c.execute(KNOWN_ENTITIES, (namespace,)).fetchall(), "entities")
    return entity_names(str(eid) for (eid,) in rows)


def entities_mentioned(
    read: Reader, namespace: str, mentions: Sequence[str], prefix: str
) -> dict[str, str]:
    """``{mention: entity id}`` for the mentions the live rows resolve (one read each)."""

    def rows(mention: str) -> list[tuple[str, str]]:
        args = (namespace, like_prefix(prefix), like_pattern(mention), MENTION_ROWS)
        return read(lambda c: c.execute(MENTIONED_ENTITIES, args).fetchall(), "entities")

    return resolve_mentions(mentions, rows, prefix)


def standing_entries(
    read: Reader,
    namespace: str,
    now: datetime,
    profile_id: str | None,
    *,
    limit: int,
    min_confidence: float,
    categories: Mapping[str, datetime | None] | None,
    sessions: Sequence[str] = (),
    shared_only: bool = False,
) -> list[MemoryEntry]:
    """The profile's active L1 records and most confident L2 hard rules, and the newest rows
    of each always-shown category (since its bound), at most ``limit`` of each, as entries.

    One statement on the ``memories_standing`` partial indexes, in rid order,
    then ``records.standing_pick``. ``sessions`` / ``shared_only`` filter before
    each limit (``storage._standing_scope``).
    """
    if limit <= 0:
        return []
    live = (
        "namespace = ? AND status = 'active' AND deleted_at IS NULL "
        "AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?) "
        "AND (profile_id IS NULL OR profile_id = ?)"
    )
    scope, scope_params = scope_sql(sessions, shared_only)
    live += scope
    types = ", ".join("?" * len(HARD_RULE_TYPES))
    sql = (
        f"SELECT * FROM (SELECT {SELECT}, rid FROM memories WHERE {live} "  # noqa: S608
        "AND layer IN ('L1', 'l1') ORDER BY rid LIMIT ?) "
        f"UNION ALL SELECT * FROM (SELECT {SELECT}, rid FROM memories WHERE {live} "
        f"AND layer IN ('L2', 'l2') AND rule_type IN ({types}) AND confidence >= ? "
        "ORDER BY confidence DESC, rid LIMIT ?)"
    )
    head = (namespace, format_ts(now), profile_id, *scope_params)
    params: list[Any] = [*head, limit, *head, *HARD_RULE_TYPES, min_confidence, limit]
    for category, since in (categories or {}).items():
        # No time bound without one: the category index then serves the query.
        bound = "" if since is None else "AND timestamp >= ? "
        sql += (
            f" UNION ALL SELECT * FROM (SELECT {SELECT}, rid FROM memories "  # noqa: S608
            f"WHERE {live} AND category = ? {bound}"
            "ORDER BY updated_at DESC, rid DESC LIMIT ?)"
        )
        params += [*head, str(category), *([] if since is None else [format_ts(since)]), limit]
    sql += " ORDER BY rid"

    def run(conn: sqlite3.Connection) -> list[MemoryRecord]:
        return [row_to_record(r[:-1]) for r in conn.execute(sql, params)]

    rows = read(run, "standing_records")  # in rid (insertion) order
    picked = standing_pick(rows, limit, min_confidence, categories)
    return [r.to_entry(None) for r in picked]
