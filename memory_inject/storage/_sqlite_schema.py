"""Opening, DDL, forward migrations, the schema check and the row codec of the SQLite store.

The schema version lives in ``PRAGMA user_version`` and our files carry
``PRAGMA application_id`` so that a database of another program (founder-os
also keeps a ``memories`` table in ``.memory/memory.db``) is refused rather
than migrated. Migrations only ever run forward, each in its own
``BEGIN IMMEDIATE`` transaction together with the version bump.
"""

from __future__ import annotations

import json
import sqlite3
import struct
import threading
import urllib.parse
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_inject.exceptions import (
    SchemaMismatchError,
    StorageError,
    StoreCorruptError,
    StoreLockedError,
    StoreMissingError,
)
from memory_inject.models import MemoryEntry, parse_timestamp
from memory_inject.models import _category as category_of
from memory_inject.records import COLUMN_FIELDS, ENTRY_KEY, EXTRA_FIELDS, split_entry_fields
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "APPLICATION_ID",
    "COLUMNS",
    "ENTRY_COLUMNS",
    "ENTRY_SELECT",
    "FTS_COLUMNS",
    "LOG_KEEP",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SELECT",
    "UPSERT",
    "DamagedRowError",
    "connect",
    "decode_vector",
    "encode_vector",
    "fetch",
    "fetch_entries",
    "is_locked",
    "migrate",
    "prepare",
    "record_to_row",
    "row_to_entry",
    "row_to_record",
    "take_damaged",
    "wrap_error",
]

#: "MINJ": marks a file as ours, next to the version in ``user_version``.
APPLICATION_ID = 0x4D494E4A


# "8 May 2023" from a fixed-width UTC timestamp (``format_ts``), in SQL so the
# triggers and the migration compute it the same way.
_DAY_WORDS = (
    "(CAST(CAST(substr({row}.timestamp, 9, 2) AS INTEGER) AS TEXT) || ' ' || "
    "CASE substr({row}.timestamp, 6, 2) "
    "WHEN '01' THEN 'January' "
    "WHEN '02' THEN 'February' "
    "WHEN '03' THEN 'March' "
    "WHEN '04' THEN 'April' "
    "WHEN '05' THEN 'May' "
    "WHEN '06' THEN 'June' "
    "WHEN '07' THEN 'July' "
    "WHEN '08' THEN 'August' "
    "WHEN '09' THEN 'September' "
    "WHEN '10' THEN 'October' "
    "WHEN '11' THEN 'November' "
    "WHEN '12' THEN 'December' "
    "ELSE '' END || ' ' || "
    "substr({row}.timestamp, 1, 4))"
)
# The content of the n-th live record written before ``row`` in its session.
_NEIGHBOUR = (
    "(SELECT p.content FROM memories AS p WHERE {row}.session_id IS NOT NULL "
    "AND p.namespace = {row}.namespace AND p.session_id = {row}.session_id "
    "AND p.rid < {row}.rid AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
)
_CTX_ASSIGN = (
    "ctx_prev = " + _NEIGHBOUR.replace("{n}", "0") + ", "
    "ctx_prev2 = " + _NEIGHBOUR.replace("{n}", "1") + ", "
    "ctx_day = " + _DAY_WORDS
)
# The row's scope as one index token: "s" + hex of its session id (first 100
# characters), or "g" + hex of its category for a sessionless row. Recall adds
# the scope's tokens to MATCH so FTS5 intersects posting lists instead of
# ranking every match and joining it to its row (see ``scope_match``). A token
# is only a pre-filter: the SQL scope still decides, so two ids that stem alike
# can never leak into each other's recall.
_SCOPE_TOKEN = (
    "(CASE WHEN {row}.session_id IS NOT NULL "  # noqa: S105 - SQL, not a secret
    "THEN 's' || hex(substr({row}.session_id, 1, 100)) "
    "ELSE 'g' || hex(substr({row}.category, 1, 100)) END)"
)
FTS_COLUMNS = "key, content, tags, ctx_prev, ctx_prev2, ctx_day, ctx_scope"
#: How many entries of ``memories_log`` (schema 6) are kept: a reader's cache
#: more changes behind than this rebuilds instead of re-reading the changed rows.
LOG_KEEP = 4096

# Each entry moves the schema from version i to i + 1. Never edit a released
# entry: append a new one, so every existing file can be brought forward.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the table of records. Timestamps are fixed-width UTC text, lists and
    # the scope mapping are JSON text, the embedding is little-endian float32.
    (
        """CREATE TABLE memories (
            rid INTEGER PRIMARY KEY,
            id TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            category TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            session_id TEXT,
            namespace TEXT NOT NULL,
            importance REAL,
            confidence REAL,
            status TEXT NOT NULL DEFAULT 'active',
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            entity_ids TEXT NOT NULL DEFAULT '[]',
            profile_id TEXT,
            scope TEXT,
            applies_when TEXT NOT NULL DEFAULT '[]',
            does_not_apply_when TEXT NOT NULL DEFAULT '[]',
            known_exceptions TEXT NOT NULL DEFAULT '[]',
            rule_type TEXT,
            memory_kind TEXT,
            layer TEXT,
            supersedes TEXT NOT NULL DEFAULT '[]',
            superseded_by TEXT,
            times_used INTEGER NOT NULL DEFAULT 0,
            last_used_at TEXT,
            expires_at TEXT,
            deleted_at TEXT,
            embedding BLOB,
            UNIQUE (namespace, key),
            UNIQUE (namespace, id)
        )""",
        "CREATE INDEX memories_recent ON memories (namespace, updated_at DESC) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL",
        "CREATE INDEX memories_session ON memories (namespace, session_id, updated_at DESC)",
        "CREATE INDEX memories_created ON memories (namespace, timestamp)",
    ),
    # 2: the full-text index over key, content and tags (the tags' JSON text
    # tokenises to the tag words). External content, so the text is stored
    # once; the update trigger fires only when indexed text changes, so usage
    # counters never touch the index. 'rebuild' indexes rows written under v1.
    (
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        "key, content, tags, content='memories', content_rowid='rid', "
        "tokenize='porter unicode61')",
        """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, key, content, tags)
            VALUES (new.rid, new.key, new.content, new.tags);
        END""",
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.rid, old.key, old.content, old.tags);
        END""",
        """CREATE TRIGGER memories_fts_update AFTER UPDATE OF key, content, tags ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.rid, old.key, old.content, old.tags);
            INSERT INTO memories_fts(rowid, key, content, tags)
            VALUES (new.rid, new.key, new.content, new.tags);
        END""",
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 3: context expansion and calibrated scores (issue 14). A record written
    # in a session also indexes, at low weight, the two records written just
    # before it in that session (``ctx_prev``, ``ctx_prev2``), and every record
    # its creation date as words (``ctx_day``, "8 May 2023"). The values are
    # set once, when the row is inserted, so no older row is ever rewritten;
    # they live in the base table because the index has external content.
    (
        "ALTER TABLE memories ADD COLUMN ctx_prev TEXT",
        "ALTER TABLE memories ADD COLUMN ctx_prev2 TEXT",
        "ALTER TABLE memories ADD COLUMN ctx_day TEXT",
        "CREATE INDEX memories_stream ON memories (namespace, session_id, rid)",
        f"UPDATE memories SET {_CTX_ASSIGN.format(row='memories')}",  # noqa: S608 - constants
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        "key, content, tags, ctx_prev, ctx_prev2, ctx_day, content='memories', "
        "content_rowid='rid', tokenize='porter unicode61')",
        f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            UPDATE memories SET {_CTX_ASSIGN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, key, content, tags, ctx_prev, ctx_prev2, ctx_day)
            SELECT rid, key, content, tags, ctx_prev, ctx_prev2, ctx_day
            FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags,
                ctx_prev, ctx_prev2, ctx_day)
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day);
        END""",
        # The day follows the timestamp; the neighbours stay as first written.
        f"""CREATE TRIGGER memories_fts_update
            AFTER UPDATE OF key, content, tags, timestamp ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, key, content, tags,
                ctx_prev, ctx_prev2, ctx_day)
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day);
            UPDATE memories SET ctx_day = {_DAY_WORDS.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, key, content, tags, ctx_prev, ctx_prev2, ctx_day)
            SELECT rid, key, content, tags, ctx_prev, ctx_prev2, ctx_day
            FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 4: the scope in the index (``ctx_scope``, bm25 weight 0), so a session's
    # recall is a posting-list intersection (100k rows: 12 ms p50 joined).
    (
        "ALTER TABLE memories ADD COLUMN ctx_scope TEXT",
        f"UPDATE memories SET ctx_scope = {_SCOPE_TOKEN.format(row='memories')}",  # noqa: S608
        "DROP TRIGGER memories_fts_insert",
        "DROP TRIGGER memories_fts_delete",
        "DROP TRIGGER memories_fts_update",
        "DROP TABLE memories_fts",
        f"CREATE VIRTUAL TABLE memories_fts USING fts5({FTS_COLUMNS}, content='memories', "
        "content_rowid='rid', tokenize='porter unicode61')",
        f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
            UPDATE memories SET {_CTX_ASSIGN.format(row="new")},
                ctx_scope = {_SCOPE_TOKEN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {FTS_COLUMNS})
            SELECT rid, {FTS_COLUMNS} FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS})
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day, old.ctx_scope);
        END""",  # noqa: S608 - built from constants
        # The day and the scope follow the row; the neighbours stay as first written.
        f"""CREATE TRIGGER memories_fts_update
            AFTER UPDATE OF key, content, tags, timestamp, session_id, category ON memories
            BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, {FTS_COLUMNS})
            VALUES ('delete', old.rid, old.key, old.content, old.tags,
                old.ctx_prev, old.ctx_prev2, old.ctx_day, old.ctx_scope);
            UPDATE memories SET ctx_day = {_DAY_WORDS.format(row="new")},
                ctx_scope = {_SCOPE_TOKEN.format(row="new")} WHERE rid = new.rid;
            INSERT INTO memories_fts(rowid, {FTS_COLUMNS})
            SELECT rid, {FTS_COLUMNS} FROM memories WHERE rid = new.rid;
        END""",  # noqa: S608 - built from constants
        "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
    ),
    # 5: PI records (issue 12). ``metadata`` keeps the fields of an imported
    # record that have no column (JSON text); the partial index serves the
    # standing-context query (a profile's active L1 records and L2 rules, and
    # the newest rows of the always-shown sections), so it reads those rows,
    # not the namespace.
    (
        "ALTER TABLE memories ADD COLUMN metadata TEXT",
        "CREATE INDEX memories_standing ON memories (namespace, layer, rule_type, confidence) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'",
        "CREATE INDEX memories_standing_category ON memories (namespace, category, updated_at) "
        "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'",
    ),
    # 6: a change log for the readers' in-memory caches (issue 14). Every
    # insert, update and delete of a memory, by any connection, appends the
    # row's rid; a cache built at log position S re-reads only the rows logged
    # after S instead of every row. Only the newest LOG_KEEP entries are kept:
    # a cache further behind than that rebuilds.
    (
        "CREATE TABLE memories_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, rid INTEGER NOT NULL)",
        f"""CREATE TRIGGER memories_log_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_log(rid) VALUES (new.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_log(rid) SELECT old.rid WHERE old.rid IS NOT new.rid;
            INSERT INTO memories_log(rid) VALUES (new.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_log(rid) VALUES (old.rid);
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
    ),
    # 7: a random stamp on every log entry (issue 25). A cache knows the
    # position it is current at and that entry's stamp: a file whose history
    # diverged (a backup restored into the live file) can hold the same
    # positions and even the same rids, never the same stamps, so the cache
    # sees a history it did not follow and reads everything again.
    (
        "ALTER TABLE memories_log ADD COLUMN stamp INTEGER",
        "DROP TRIGGER memories_log_insert",
        "DROP TRIGGER memories_log_update",
        "DROP TRIGGER memories_log_delete",
        f"""CREATE TRIGGER memories_log_insert AFTER INSERT ON memories BEGIN
            INSERT INTO memories_log(rid, stamp) VALUES (new.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_update AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_log(rid, stamp)
                SELECT old.rid, random() WHERE old.rid IS NOT new.rid;
            INSERT INTO memories_log(rid, stamp) VALUES (new.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        f"""CREATE TRIGGER memories_log_delete AFTER DELETE ON memories BEGIN
            INSERT INTO memories_log(rid, stamp) VALUES (old.rid, random());
            DELETE FROM memories_log WHERE seq <= (SELECT max(seq) FROM memories_log) - {LOG_KEEP};
        END""",  # noqa: S608 - built from constants
        # Where the log is now, stamped, so a cache built before any new write has a stamp.
        "INSERT INTO memories_log(rid, stamp) SELECT 0, random() WHERE EXISTS "
        "(SELECT 1 FROM memories)",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def scope_token(session_id: str | None, category: str) -> str:
    """The ``ctx_scope`` token of a row, as the index holds it (``_SCOPE_TOKEN`` in Python).

    SQLite's ``substr`` ends a text at its first NUL, so the token does too: an
    id holding one must still find its own rows (the live-row filter, not the
    token, tells ids apart).
    """
    if session_id is not None:
        return "s" + session_id.split("\0", 1)[0][:100].encode("utf-8").hex().upper()
    return "g" + category.split("\0", 1)[0][:100].encode("utf-8").hex().upper()


def scope_tokens(session_id: str, shared: Sequence[str]) -> tuple[str, ...]:
    """The ``ctx_scope`` tokens of a session's rows and of the sessionless ``shared`` ones."""
    return (scope_token(session_id, ""), *(scope_token(None, c) for c in shared))


def scope_match(session_id: str, shared: Sequence[str]) -> str:
    """The MATCH clause that keeps a session's rows and the sessionless ``shared`` ones."""
    return tokens_match(scope_tokens(session_id, shared))


def tokens_match(tokens: Sequence[str]) -> str:
    """The MATCH clause that keeps rows whose ``ctx_scope`` is one of ``tokens``."""
    return "ctx_scope : (" + " OR ".join(f'"{t}"' for t in tokens) + ")"


_REQUIRED_TABLES = ("memories", "memories_fts")

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


def is_locked(exc: sqlite3.Error) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def wrap_error(exc: sqlite3.Error, what: str) -> StorageError:
    """The :class:`StorageError` subclass for a driver error (raise it ``from exc``)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    message = f"{what}: {exc}"
    if is_locked(exc):
        return StoreLockedError(f"{what}: database is locked (after one retry): {exc}")
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT) or "not a database" in str(exc):
        return StoreCorruptError(message)
    if code == sqlite3.SQLITE_CANTOPEN:
        return StoreMissingError(message)
    return StorageError(message)


def connect(path: str, *, create: bool, busy_timeout_ms: int) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode for use from any thread (callers hold a lock).

    Parent directories are created when ``create`` is true; with ``create``
    false the file is opened ``mode=rw`` so SQLite cannot create it either.
    """
    timeout = busy_timeout_ms / 1000.0
    if path == ":memory:":
        return sqlite3.connect(
            ":memory:", timeout=timeout, isolation_level=None, check_same_thread=False
        )
    p = Path(path)
    if p.is_dir():
        raise StoreMissingError(f"{path}: is a directory, not a database file")
    if not p.exists():
        if not create:
            raise StoreMissingError(f"{path}: no such database (create=False)")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreMissingError(f"{path}: cannot create its directory: {exc}") from exc
    mode = "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(str(p.absolute()))}?mode={mode}"
    try:
        return sqlite3.connect(
            uri, timeout=timeout, isolation_level=None, check_same_thread=False, uri=True
        )
    except sqlite3.Error as exc:
        raise wrap_error(exc, f"{path}: cannot open") from exc


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


class DamagedRowError(ValueError):
    """A row whose columns cannot be decoded (JSON edited by hand, a foreign writer...)."""


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


_damaged = threading.local()


#: The columns an entry needs (every record column but the embedding, in order).
ENTRY_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c != "embedding")
ENTRY_SELECT = ", ".join(ENTRY_COLUMNS)
_ENTRY_INDEX = {name: i for i, name in enumerate(ENTRY_COLUMNS)}
_EXTRA_DECODE = tuple(
    (name, _ENTRY_INDEX[name], "list" if name in _LISTS else "ts" if name in _TIMESTAMPS else "")
    for name in EXTRA_FIELDS
)
_I = _ENTRY_INDEX
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
        _note_damaged(f"row {row[_I['key']]!r:.80} cannot be decoded: {type(exc).__name__}")
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
            value = () if raw is None or raw == "[]" else _json_or(raw, (), tolerant)
            if tolerant and not isinstance(value, list | tuple):
                value = ()
            extra[name] = tuple(str(v) for v in value)
        elif kind == "ts":
            extra[name] = _ts_or_none(raw, tolerant)
        elif name == "scope" and raw is not None:
            extra[name] = _json_or(raw, None, tolerant)
        elif name == "metadata" and raw is not None:
            extra[name] = (
                _json_or(raw, None, tolerant) or None
            )  # the record's converter: {} is None
        else:
            extra[name] = raw
    own = _entry_fields(extra, tolerant)
    entry = object.__new__(MemoryEntry)
    _set(entry, "key", row[_I["key"]])
    _set(entry, "content", row[_I["content"]])
    _set(entry, "category", category_of(row[_I["category"]]))
    _set(entry, "timestamp", _ts_or_none(row[_I["timestamp"]], tolerant))
    _set(entry, "session_id", row[_I["session_id"]])
    _set(entry, "score", None if score is None else float(score))
    _set(entry, "importance", row[_I["importance"]])
    _set(entry, "id", row[_I["id"]])
    _set(entry, "namespace", row[_I["namespace"]])
    _set(entry, "extra", extra)
    for name, default in _ENTRY_DEFAULTS:
        _set(entry, name, own.get(name, default))
    if extra["updated_at"] is None:
        extra["updated_at"] = entry.timestamp
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
            _note_damaged(str(exc))
    return out


def _note_damaged(what: str) -> None:
    skipped: list[str] = getattr(_damaged, "rows", [])
    _damaged.rows = [*skipped[-9:], what]


def take_damaged() -> list[str]:
    """The damaged rows this thread's fetches skipped since the last call (at most 10)."""
    rows: list[str] = getattr(_damaged, "rows", [])
    _damaged.rows = []
    return rows


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the file forward to ``target``, one transaction per step; returns the version.

    The version is re-read under the write lock, so two processes opening a
    new file at once apply each step once.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _pragma(conn, "user_version")
            if version >= target:
                conn.execute("COMMIT")
                return version
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def prepare(conn: sqlite3.Connection, *, create: bool, label: str) -> None:
    """Check that the file is ours and current, migrating it forward if it is older.

    Raises :class:`SchemaMismatchError` for a newer schema or another program's
    database, :class:`StoreMissingError` for an empty file when ``create`` is
    false, :class:`StoreCorruptError` when our tables are missing afterwards.
    """
    version = _pragma(conn, "user_version")
    if version > SCHEMA_VERSION:
        raise SchemaMismatchError(
            f"{label}: schema version {version} is newer than this memory-inject "
            f"supports ({SCHEMA_VERSION}); upgrade memory-inject"
        )
    if version == 0:
        tables = _tables(conn)
        if tables:
            raise SchemaMismatchError(
                f"{label}: not a memory-inject database (it has tables "
                f"{', '.join(tables[:5])} and no memory-inject schema version)"
            )
        if not create:
            raise StoreMissingError(f"{label}: the database is empty and create=False")
    elif _pragma(conn, "application_id") != APPLICATION_ID:
        raise SchemaMismatchError(
            f"{label}: not a memory-inject database "
            f"(application_id {_pragma(conn, 'application_id'):#x}, user_version {version})"
        )
    if version < SCHEMA_VERSION:
        migrate(conn)
    missing = [t for t in _REQUIRED_TABLES if t not in _tables(conn)]
    if missing:
        raise StoreCorruptError(
            f"{label}: schema incomplete, missing table(s) {', '.join(missing)}"
        )
