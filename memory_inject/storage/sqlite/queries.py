"""The SQL of the SQLite store's reads and writes, built from their arguments.

Pure functions and constants: each returns a statement and its parameters
(every value a bound parameter; only fixed fragments and placeholders are
spliced in), and :class:`~.store.SQLiteStore` runs them. :data:`LIVE` is the
live-row rule every recall applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_inject._skip_keys import SQL_TRIMMED
from memory_inject.contract import RecallExclusion
from memory_inject.models import parse_timestamp
from memory_inject.storage._exclusion import kept_sql, key_rules_sql
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage.sqlite.vector_matrix import VectorScope

__all__ = [
    "COUNT",
    "KNOWN_ENTITIES",
    "LIVE",
    "MARK_USED",
    "MENTIONED_ENTITIES",
    "Bound",
    "forget_statement",
    "list_where",
    "scope_where",
    "tagged_where",
    "vector_scope",
    "within_scope",
]

#: A time bound of a recall, as the caller gave it.
Bound = datetime | str | None

#: A row a recall may return: not forgotten, not superseded, not expired at ``?``.
LIVE = "deleted_at IS NULL AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?)"
#: The namespace's rows that are not forgotten.
COUNT = "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL"
#: Every entity id a live row of the namespace names.
KNOWN_ENTITIES = (
    "SELECT DISTINCT j.value FROM memories AS m, json_each(m.entity_ids) AS j "
    "WHERE m.namespace = ? AND m.deleted_at IS NULL"
)
#: ``(entity id, content)`` of live rows naming an id with a prefix and content like a mention.
MENTIONED_ENTITIES = (
    "SELECT j.value, m.content FROM memories AS m, json_each(m.entity_ids) AS j "
    "WHERE m.namespace = ? AND m.deleted_at IS NULL AND j.value LIKE ? ESCAPE '\\' "
    "AND m.content LIKE ? ESCAPE '\\' LIMIT ?"
)
#: Count one more use of each id of the JSON list (``(now, namespace, ids)``).
MARK_USED = (
    "UPDATE memories SET times_used = times_used + 1, last_used_at = ? "
    "WHERE namespace = ? AND deleted_at IS NULL "
    "AND id IN (SELECT value FROM json_each(?))"
)


def forget_statement(
    namespace: str,
    key: str,
    stamp: str,
    scope: tuple[Sequence[str], bool, Sequence[str] | None] | None,
) -> tuple[str, list[Any]] | None:
    """The soft delete of ``key`` at ``stamp``, limited to ``scope`` (``forget_scope``'s
    ``(named sessions, shared too, shared sources)``); None when the scope keeps nothing."""
    sql = (
        "UPDATE memories SET deleted_at = ? WHERE namespace = ? AND key = ? AND deleted_at IS NULL"
    )
    return within_scope(sql, [stamp, namespace, key], scope)


def within_scope(
    sql: str, params: list[Any], scope: tuple[Sequence[str], bool, Sequence[str] | None] | None
) -> tuple[str, list[Any]] | None:
    """``sql`` (a statement ending in a ``WHERE`` clause) limited to the rows ``scope``
    (``forget_scope``'s ``(named sessions, shared too, shared sources)``) may touch, as a
    forget and an erase are; None when the scope keeps nothing."""
    if scope is None:
        return sql, params
    named, shared, sources = scope
    ors = []
    if named:
        ors.append(f"session_id IN ({', '.join('?' * len(named))})")
        params.extend(named)
    if shared:
        only = ""
        if sources is not None:
            only = f" AND source IN ({', '.join('?' * len(sources)) or 'NULL'})"
            params.extend(sources)
        ors.append(f"(session_id IS NULL{only})")
    if not ors:
        return None
    return f"{sql} AND ({' OR '.join(ors)})", params


def list_where(
    category: str | None, session_id: str | None, limit: int | None
) -> tuple[str, list[Any]]:
    """The rows ``list`` returns: not forgotten, of ``category`` and ``session_id`` when
    given, newest first, at most ``limit``."""
    where, params = ["deleted_at IS NULL"], list[Any]()
    if category is not None:
        where.append("category = ?")
        params.append(str(category))
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    sql = " AND ".join(where) + " ORDER BY timestamp DESC, rid DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(max(0, int(limit)))
    return sql, params


#: A key that starts or ends with :data:`~memory_inject._skip_keys.SQL_TRIMMED` white space.
_PADDED = (f"[{SQL_TRIMMED}]*", f"*[{SQL_TRIMMED}]")


def scope_where(
    now: datetime,
    session_id: str | None,
    shared: Sequence[str],
    since: Bound,
    until: Bound,
    exclude: tuple[str, RecallExclusion] | None = None,
) -> tuple[str, list[Any]]:
    """The live rows a recall may see: of ``session_id`` (and the sessionless rows of the
    ``shared`` categories), between ``since`` and ``until``; the first parameter is ``now``.

    ``exclude`` (``(namespace, exclusion)``) leaves out the rows the exclusion names. The
    key is tested on the namespace's ``(namespace, key)`` index in a subquery of row ids
    (``rid``): the scope is ANDed into statements that join ``memories_fts`` or
    ``json_each``, both of which have a ``key`` column of their own."""
    where, params = [LIVE], list[Any]([format_ts(now)])
    if session_id is not None:
        if shared:
            marks = ", ".join("?" * len(shared))
            where.append(f"(session_id = ? OR (session_id IS NULL AND category IN ({marks})))")
            params.extend([session_id, *shared])
        else:
            where.append("session_id = ?")
            params.append(session_id)
    if since is not None:
        where.append("timestamp >= ?")
        params.append(format_ts(parse_timestamp(since)))
    if until is not None:
        where.append("timestamp <= ?")
        params.append(format_ts(parse_timestamp(until)))
    if exclude is not None:

        def mark(value: object) -> str:
            params.append(value)
            return "?"

        def key_rules() -> str:
            # SQLite's LIKE folds ASCII letters as the skip set does; trim() costs more than
            # the LIKEs, so only a padded key is trimmed (each use binds its own characters).
            namespace = mark(exclude[0])  # the marks' order is the text's
            raw = key_rules_sql(lambda: "x.key", mark)
            padded = f"(x.key GLOB {mark(_PADDED[0])} OR x.key GLOB {mark(_PADDED[1])})"
            trimmed = key_rules_sql(lambda: f"trim(x.key, {mark(SQL_TRIMMED)})", mark)
            # LIKE and GLOB stop at a NUL: a key holding one is left to the skip set.
            return (
                f"rid IN (SELECT x.rid FROM memories AS x WHERE x.namespace = {namespace} "  # noqa: S608
                f"AND instr(x.key, char(0)) = 0 AND ({raw} OR ({padded} AND ({trimmed}))))"
            )

        where.extend(kept_sql(exclude[1], mark, key_rules))
    return " AND ".join(where), params


def vector_scope(
    now: str, session_id: str | None, shared: Sequence[str], since: Bound, until: Bound
) -> VectorScope:
    """The rules of :func:`scope_where`, for the cached vector matrix (tests compare the two)."""
    return VectorScope(
        now=now,
        session_id=session_id,
        shared=tuple(shared),
        since=None if since is None else format_ts(parse_timestamp(since)),
        until=None if until is None else format_ts(parse_timestamp(until)),
    )


def tagged_where(
    scope: str,
    params: Sequence[Any],
    entity_id: str | None,
    source: str | None,
    statuses: Sequence[str] | None,
    limit: int,
) -> tuple[str, list[Any]]:
    """A founder-os plan's rows of ``scope``: naming ``entity_id``, from ``source``, in
    ``statuses`` (each when given), most confident first, at most ``limit``."""
    out = list(params)
    if entity_id is not None:
        scope += " AND EXISTS (SELECT 1 FROM json_each(entity_ids) WHERE value = ?)"
        out.append(entity_id)
    if source is not None:
        scope += " AND source = ?"
        out.append(source)
    if statuses is not None:
        scope += f" AND status IN ({', '.join('?' * len(statuses)) or 'NULL'})"
        out.extend(statuses)
    order = " ORDER BY confidence IS NULL, confidence DESC, updated_at DESC, rid DESC LIMIT ?"
    return scope + order, [*out, limit]
