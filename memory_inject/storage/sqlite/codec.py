"""The SQLite store's row codec: records and entries to and from row tuples, and vectors.

Column order is the record's fields (:data:`COLUMNS`); timestamps are
fixed-width UTC text, lists and mappings JSON text, the embedding
little-endian float32. Recall's hot path reads :data:`ENTRY_COLUMNS` straight
into entries (:func:`row_to_entry`), skipping the record's validators; a
damaged column is noted (:mod:`.errors`), never fatal to a recall.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_inject.models import MemoryEntry, parse_timestamp
from memory_inject.models import _category as category_of
from memory_inject.records import COLUMN_FIELDS, ENTRY_KEY, EXTRA_FIELDS, split_entry_fields
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite.errors import DamagedRowError, note_damaged

__all__ = [
    "COLUMNS",
    "ENTRY_COLUMNS",
    "ENTRY_SELECT",
    "SELECT",
    "UPSERT",
    "decode_vector",
    "encode_vector",
    "fetch",
    "fetch_entries",
    "record_to_row",
    "row_to_entry",
    "row_to_record",
]

#: Column order of every row tuple: the record's fields, in declaration order (zeroclaw's
#: entry fields, ``records.IN_METADATA``, live in ``metadata``).
COLUMNS: tuple[str, ...] = COLUMN_FIELDS
SELECT = ", ".join(COLUMNS)
_PLACEHOLDERS = ", ".join("?" for _ in COLUMNS)
_ASSIGN = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in ("namespace", "key"))
# Built from the fixed column list only; every value is a bound parameter.
UPSERT = (
    f"INSERT INTO memories ({SELECT}) VALUES ({_PLACEHOLDERS}) "  # noqa: S608
    f"ON CONFLICT (namespace, key) DO UPDATE SET {_ASSIGN}"
)

_TIMESTAMPS = frozenset({"timestamp", "updated_at", "last_used_at", "expires_at", "deleted_at"})
_LISTS = frozenset(
    {"tags", "entity_ids", "applies_when", "does_not_apply_when", "known_exceptions", "supersedes"}
)
_MAPPINGS = frozenset({"scope", "metadata"})


def encode_vector(values: Sequence[float]) -> bytes:
    """Little-endian float32, whatever the host's byte order."""
    return struct.pack(f"<{len(values)}f", *values)


def decode_vector(blob: bytes) -> tuple[float, ...]:
    """The float32 values of a blob written by :func:`encode_vector`."""
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def record_to_row(record: MemoryRecord) -> tuple[Any, ...]:
    """``record`` as :data:`COLUMNS` values: timestamps as text, lists and ``scope``
    as JSON, the embedding as a float32 blob.
    """
    row: list[Any] = []
    for name in COLUMNS:
        value: Any = record.stored_metadata if name == "metadata" else getattr(record, name)
        if value is None:
            row.append(None)
        elif name in _TIMESTAMPS:
            row.append(format_ts(value))
        elif name in _LISTS:
            row.append(json.dumps(list(value), ensure_ascii=False))
        elif name in _MAPPINGS:
            row.append(json.dumps(dict(value), ensure_ascii=False, sort_keys=True))
        elif name == "embedding":
            row.append(encode_vector(value))
        elif name == "category":
            row.append(str(value))
        else:
            row.append(value)
    return tuple(row)


def row_to_record(row: Sequence[Any]) -> MemoryRecord:
    """The record for a row of :data:`COLUMNS` values, decoding what :func:`record_to_row` did.

    ``DamagedRowError`` names the row's key and the column that cannot be decoded.
    """
    fields: dict[str, Any] = {}
    name = "?"
    try:
        for name, raw in zip(COLUMNS, row, strict=True):
            value = raw
            if raw is not None and (name in _LISTS or name in _MAPPINGS):
                # Most lists are empty: skip the JSON decoder for them (the hot read path).
                value = () if raw == "[]" else json.loads(raw)
            elif raw is not None and name == "embedding":
                value = decode_vector(raw)
            fields[name] = value
        name = "?"
        return MemoryRecord(**fields)
    except (TypeError, ValueError, OverflowError, RecursionError, struct.error) as exc:
        key = row[COLUMNS.index("key")] if len(row) == len(COLUMNS) else None
        column = f" column {name!r}" if name != "?" else ""
        raise DamagedRowError(
            f"row {key!r:.80}{column} cannot be decoded: {type(exc).__name__}: {exc!s:.120}"
        ) from None


#: The columns an entry needs (every record column but the embedding, in order).
ENTRY_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c != "embedding")
ENTRY_SELECT = ", ".join(ENTRY_COLUMNS)
_ENTRY_INDEX = {name: i for i, name in enumerate(ENTRY_COLUMNS)}
_EXTRA_DECODE = tuple(
    (name, _ENTRY_INDEX[name], "list" if name in _LISTS else "ts" if name in _TIMESTAMPS else "")
    for name in EXTRA_FIELDS
)
_I = _ENTRY_INDEX
_KEY_KEY, _KEY_CONTENT, _KEY_CATEGORY = _I["key"], _I["content"], _I["category"]
_KEY_TS, _KEY_SESSION, _KEY_IMPORTANCE = _I["timestamp"], _I["session_id"], _I["importance"]
_KEY_ID, _KEY_NAMESPACE = _I["id"], _I["namespace"]
_set = object.__setattr__
#: Parsed timestamp texts (recall parses the same few rows over and over).
_TS_CACHE: dict[str, datetime] = {}


def _ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    value = _TS_CACHE.get(text)
    if value is None:
        if len(_TS_CACHE) >= 65536:
            _TS_CACHE.clear()
        value = _TS_CACHE[text] = parse_timestamp(text)
    return value


def row_to_entry(row: Sequence[Any], score: float | None) -> MemoryEntry:
    """The entry for a row of :data:`ENTRY_COLUMNS` values: ``row_to_record(row).to_entry(score)``.

    Rows were validated when written, so the record's converters and
    validators are skipped (recall builds entries on every turn); the test
    suite compares the two for every column. A column damaged on disk (JSON
    or a time that cannot be parsed) reads as empty and the row is noted
    for :func:`take_damaged`, so one bad row cannot fail every recall.
    """
    try:
        return _row_to_entry(row, score)
    except (TypeError, ValueError, RecursionError) as exc:
        note_damaged(f"row {row[_I['key']]!r:.80} cannot be decoded: {type(exc).__name__}")
        return _row_to_entry(row, score, tolerant=True)


def _json_or(raw: str, empty: Any, tolerant: bool) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        if not tolerant:
            raise
        return empty


def _ts_or_none(text: str | None, tolerant: bool) -> datetime | None:
    try:
        return _ts(text)
    except (TypeError, ValueError):
        if not tolerant:
            raise
        return None


def _row_to_entry(
    row: Sequence[Any], score: float | None, *, tolerant: bool = False
) -> MemoryEntry:
    extra: dict[str, Any] = {}
    for name, i, kind in _EXTRA_DECODE:
        raw = row[i]
        if kind == "list":
            if raw is None or raw == "[]":  # most lists are empty: no decoder, no generator
                extra[name] = ()
                continue
            value = _json_or(raw, (), tolerant)
            if tolerant and not isinstance(value, list | tuple):
                value = ()
            extra[name] = tuple(str(v) for v in value)
        elif raw is None:
            extra[name] = None
        elif kind == "ts":
            extra[name] = _ts_or_none(raw, tolerant)
        elif name == "scope":
            extra[name] = _json_or(raw, None, tolerant)
        elif name == "metadata":
            # The record's converter: {} is None.
            extra[name] = _json_or(raw, None, tolerant) or None
        else:
            extra[name] = raw
    own = _entry_fields(extra, tolerant) if extra["metadata"] is not None else None
    entry = object.__new__(MemoryEntry)
    timestamp = _ts_or_none(row[_KEY_TS], tolerant)
    for attr, value in (
        ("key", row[_KEY_KEY]),
        ("content", row[_KEY_CONTENT]),
        ("category", category_of(row[_KEY_CATEGORY])),
        ("timestamp", timestamp),
        ("session_id", row[_KEY_SESSION]),
        ("score", None if score is None else float(score)),
        ("importance", row[_KEY_IMPORTANCE]),
        ("id", row[_KEY_ID]),
        ("namespace", row[_KEY_NAMESPACE]),
        ("extra", extra),
    ):
        _set(entry, attr, value)
    if own:
        for attr, default in _ENTRY_DEFAULTS:
            _set(entry, attr, own.get(attr, default))
    else:
        for attr, default in _ENTRY_DEFAULTS:
            _set(entry, attr, default)
    if extra["updated_at"] is None:
        extra["updated_at"] = timestamp
    return entry


_ENTRY_DEFAULTS = (
    ("kind", None),
    ("pinned", False),
    ("tenant_id", None),
    ("agent_alias", None),
    ("agent_id", None),
)


def _entry_fields(extra: dict[str, Any], tolerant: bool) -> dict[str, Any]:
    """zeroclaw's entry fields out of ``extra["metadata"]``, which loses their key."""
    meta = extra["metadata"]
    if not isinstance(meta, dict) or ENTRY_KEY not in meta:
        return {}
    try:
        extra["metadata"], own = split_entry_fields(meta)
    except (TypeError, ValueError):
        if not tolerant:
            raise
        extra["metadata"] = {k: v for k, v in meta.items() if k != ENTRY_KEY} or None
        return {}
    return own


def fetch_entries(
    conn: sqlite3.Connection,
    namespace: str,
    where: str,
    params: Sequence[Any],
) -> list[tuple[Any, ...]]:
    """Entry rows (:data:`ENTRY_COLUMNS`) of ``namespace`` matching ``where``."""
    sql = f"SELECT {ENTRY_SELECT} FROM memories WHERE namespace = ? AND {where}"  # noqa: S608
    return conn.execute(sql, (namespace, *params)).fetchall()


def fetch(
    conn: sqlite3.Connection, namespace: str, where: str, params: Sequence[Any]
) -> list[MemoryRecord]:
    """Records of ``namespace`` matching ``where`` (which may end in ORDER BY / LIMIT).

    A damaged row is skipped, so one bad row cannot fail every recall that
    reaches it; :func:`take_damaged` says which rows were skipped.
    """
    sql = f"SELECT {SELECT} FROM memories WHERE namespace = ? AND {where}"  # noqa: S608
    out: list[MemoryRecord] = []
    for r in conn.execute(sql, (namespace, *params)):
        try:
            out.append(row_to_record(r))
        except DamagedRowError as exc:
            note_damaged(str(exc))
    return out
