"""The SQLite engine's schema, codec and damaged-row notes in one namespace, as the tests read them.

The old ``memory_inject.storage._sqlite_schema`` was split by job into
``memory_inject.storage.sqlite.ddl``, ``migrations``, ``codec`` and
``errors``; the tests that read it as ``schema.X`` import this instead.
"""

from __future__ import annotations

import sqlite3

from memory_inject.storage.sqlite import migrations, writers
from memory_inject.storage.sqlite.codec import (
    COLUMNS,
    SELECT,
    encode_vector,
    fetch_entries,
    record_to_row,
    row_to_entry,
    row_to_record,
)
from memory_inject.storage.sqlite.ddl import LOG_KEEP, scope_match, scope_token, scope_tokens
from memory_inject.storage.sqlite.errors import take_damaged
from memory_inject.storage.sqlite.migrations import APPLICATION_ID, SCHEMA_VERSION

__all__ = [
    "APPLICATION_ID",
    "COLUMNS",
    "LOG_KEEP",
    "SCHEMA_VERSION",
    "SELECT",
    "encode_vector",
    "fetch_entries",
    "migrate",
    "record_to_row",
    "row_to_entry",
    "row_to_record",
    "scope_match",
    "scope_token",
    "scope_tokens",
    "take_damaged",
]


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """The library's migrations on a test's own connection (registered as this library's
    writer). A file brought to an older version only gets no writer guard: no release of
    that version had one, and its rows are then written by hand as that release did."""
    writers.register(conn)
    version = migrations.migrate(conn, target)
    if version < SCHEMA_VERSION:
        for op in ("insert", "update", "delete"):
            conn.execute(
                f"DROP TRIGGER IF EXISTS memory_inject_writer_{writers.WRITER_GENERATION}_{op}"
            )
    return version
