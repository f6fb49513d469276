"""Table layout and row conversion for :class:`~memory_inject.storage.postgres.PostgresStore`.

The table holds every :class:`MemoryRecord` field (lists as ``text[]``, ``scope`` as
``jsonb``, the embedding as exact ``double precision[]``), a generated ``tsvector`` with a
GIN index for lexical recall and, when pgvector is present and an embedder is configured, a
``vector(dim)`` copy of the embedding (kept by a trigger: :func:`.hnsw.add_vector_column`)
with an HNSW index for semantic recall. Schema 2 adds the context columns (``context``) to
the tsvector; schemas 7 and 8 parse hosts, paths, versions and "prod-3" as words, schema 9
folds accents and normal forms (``folding``). The
vector column is derived data; the exact embedding round-trips through export. How a
table is created and brought forward is :mod:`.migrations`'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from memory_inject.embedders import embedder_dim, embedder_name
from memory_inject.exceptions import EmbedderError, SchemaMismatchError
from memory_inject.records import COLUMN_FIELDS
from memory_inject.storage.records import MemoryRecord

__all__ = [
    "COLUMNS",
    "LOCK_CLASS",
    "RECALL_COLUMNS",
    "TableNames",
    "create_base",
    "record_params",
    "relation_exists",
    "required_dim",
    "row_to_record",
]

#: Every record field, in ``MemoryRecord`` order; this is also the column order. zeroclaw's
#: entry fields (``records.IN_METADATA``) have no column: they live in ``metadata``.
COLUMNS: tuple[str, ...] = COLUMN_FIELDS
#: What recall reads: everything but the (large, unused by recall) embedding.
RECALL_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c != "embedding")

_LIST = "text[] NOT NULL DEFAULT '{}'"
_TYPES: dict[str, str] = {
    "key": "text NOT NULL",
    "content": "text NOT NULL",
    "category": "text NOT NULL",
    "timestamp": "timestamptz NOT NULL",
    "id": "text NOT NULL",
    "updated_at": "timestamptz NOT NULL",
    "session_id": "text",
    "namespace": "text NOT NULL",
    "importance": "double precision",
    "confidence": "double precision",
    "status": "text NOT NULL DEFAULT 'active'",
    "tags": _LIST,
    "source": "text",
    "entity_ids": _LIST,
    "profile_id": "text",
    "scope": "jsonb",
    "applies_when": _LIST,
    "does_not_apply_when": _LIST,
    "known_exceptions": _LIST,
    "rule_type": "text",
    "memory_kind": "text",
    "layer": "text",
    "supersedes": _LIST,
    "superseded_by": "text",
    "times_used": "integer NOT NULL DEFAULT 0",
    "last_used_at": "timestamptz",
    "expires_at": "timestamptz",
    "deleted_at": "timestamptz",
    "metadata": "jsonb",
    "embedding": "double precision[]",
}
_LISTS = frozenset(c for c, t in _TYPES.items() if t.startswith("text[]"))

#: First key of every advisory lock this library takes (``pg_advisory_xact_lock(int, int)``).
LOCK_CLASS = 0x6D656D  # "mem"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


@attrs.frozen
class TableNames:
    """The identifiers that belong to one memory table (all derived from its name)."""

    table: str

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.table, str) or not _IDENT.fullmatch(self.table):
            raise ValueError(
                "'table' must be a plain SQL identifier of at most 40 characters "
                f"(got {self.table!r})"
            )

    def ident(self, suffix: str = "") -> sql.Identifier:
        """The SQL identifier ``table + suffix``."""
        return sql.Identifier(self.table + suffix)

    @property
    def versions(self) -> sql.Identifier:
        """The table's schema-version table, ``<table>_schema_version``."""
        return self.ident("_schema_version")

    @property
    def hnsw(self) -> sql.Identifier:
        """The table's HNSW index, ``<table>_embedding_hnsw``."""
        return self.ident("_embedding_hnsw")


def create_base(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 1: the table, its tsvector and GIN index, its recency, time and session
    indexes; ``SchemaMismatchError`` when a table of that name exists and is not ours."""
    if relation_exists(conn, names.ident()):
        raise SchemaMismatchError(
            f"table {names.table!r} exists but has no memory_inject schema version; "
            "it is not ours (pass another 'table')"
        )
    columns = sql.SQL(",\n  ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(_TYPES[c])) for c in COLUMNS
    )
    q = sql.Identifier
    statements = [
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {fn}(text[]) RETURNS text LANGUAGE sql "
            "IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string($1, ' ') $$"
        ),
        sql.SQL(
            "CREATE TABLE {t} (\n  {columns},\n"
            "  rid bigint GENERATED ALWAYS AS IDENTITY,\n"
            "  tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english'::regconfig, {key}), 'A') || "
            "setweight(to_tsvector('english'::regconfig, {content}), 'B') || "
            "setweight(to_tsvector('english'::regconfig, {fn}({tags})), 'C')) STORED,\n"
            "  PRIMARY KEY ({namespace}, {id}),\n"
            "  UNIQUE ({namespace}, {key})\n)"
        ),
        sql.SQL("CREATE INDEX {tsv_idx} ON {t} USING gin (tsv)"),
        sql.SQL(
            "CREATE INDEX {recent_idx} ON {t} ({namespace}, {updated_at} DESC) "
            "WHERE {deleted_at} IS NULL"
        ),
        sql.SQL("CREATE INDEX {session_idx} ON {t} ({namespace}, {session_id}, {timestamp})"),
        sql.SQL("CREATE INDEX {time_idx} ON {t} ({namespace}, {timestamp} DESC)"),
    ]
    params = {
        "t": names.ident(),
        "fn": names.ident("_tags_text"),
        "columns": columns,
        "tsv_idx": names.ident("_tsv_idx"),
        "recent_idx": names.ident("_recent_idx"),
        "session_idx": names.ident("_session_idx"),
        "time_idx": names.ident("_time_idx"),
        **{c: q(c) for c in COLUMNS},
    }
    for stmt in statements:
        conn.execute(stmt.format(**params))


def relation_exists(conn: psycopg.Connection[Any], ident: sql.Identifier) -> bool:
    """Whether a table or index ``ident`` exists (on the search path)."""
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ident.as_string(),)).fetchone()
    return bool(found and found[0])


def required_dim(embedder: object) -> int:
    """The embedder's ``dim``, which the ``vector(dim)`` column needs (else ``EmbedderError``)."""
    dim = embedder_dim(embedder)
    if dim is None:
        raise EmbedderError(f"embedder {embedder_name(embedder)!r} has no 'dim'")
    return dim


def record_params(record: MemoryRecord) -> list[Any]:
    """The record's values in :data:`COLUMNS` order, adapted for psycopg."""
    out: list[Any] = []
    for name in COLUMNS:
        value: Any = record.stored_metadata if name == "metadata" else getattr(record, name)
        if name in _LISTS or (name == "embedding" and value is not None):
            value = list(value)
        elif name in ("scope", "metadata") and value is not None:
            value = Jsonb(dict(value))
        out.append(value)
    return out


def row_to_record(row: Sequence[Any], columns: Sequence[str] = COLUMNS) -> MemoryRecord:
    """Build a record from a row selected with ``columns``."""
    return MemoryRecord(**dict(zip(columns, row, strict=True)))
