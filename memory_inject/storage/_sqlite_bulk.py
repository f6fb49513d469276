"""The bulk paths of :class:`~memory_inject.storage.sqlite.SQLiteStore`.

JSON Lines import and export (the format is :mod:`memory_inject.storage._jsonl`'s,
shared with PostgreSQL) and the back-fill of embeddings for rows written
before an embedder was set. Each runs in batches over the connection layer.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import IO

from memory_inject.storage import _sqlite_schema as schema
from memory_inject.storage._base import owned
from memory_inject.storage._jsonl import read_jsonl, write_jsonl
from memory_inject.storage._sqlite_conn import SQLiteConnections
from memory_inject.storage.records import MemoryRecord

__all__ = ["SQLiteBulk"]


class SQLiteBulk(SQLiteConnections):
    """``SQLiteStore``'s JSONL ``import_jsonl``/``export_jsonl`` and ``embed_missing``."""

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = 1000,
    ) -> int:
        """Upsert one record per JSON line into this namespace; returns how many.

        Rows are committed ``batch_size`` at a time, so a bad line (reported as
        ``ValueError`` with its line number) leaves the earlier batches in
        place; re-running the fixed file is safe because writes are upserts.
        Each line's ``namespace`` is replaced by this store's, so an export of
        one agent can seed another.
        """
        done = 0
        batch: builtins.list[MemoryRecord] = []
        last_line = 0
        for lineno, record in read_jsonl(src):
            batch.append(record.evolve(namespace=self._namespace))
            last_line = lineno
            if len(batch) >= batch_size:
                done += self._import_batch(batch, last_line)
                batch = []
                if progress is not None:
                    progress(done)
        if batch:
            done += self._import_batch(batch, last_line)
            if progress is not None:
                progress(done)
        return done

    def _import_batch(self, batch: builtins.list[MemoryRecord], last_line: int) -> int:
        try:
            return self._upsert_many(self._embedded(batch), "import")
        except ValueError as exc:
            raise ValueError(f"import batch ending at line {last_line}: {exc}") from exc

    def _upsert_many(self, records: Sequence[MemoryRecord], what: str) -> int:
        rows = [schema.record_to_row(r) for r in records]
        sessions = {r.key: r.session_id for r in records}  # a repeated key: its last line

        def op(conn: sqlite3.Connection) -> None:
            # A row belongs to its scope: no line may replace another scope's live row.
            live = conn.execute(
                "SELECT key, session_id FROM memories WHERE namespace = ? AND deleted_at IS "
                "NULL AND key IN (SELECT value FROM json_each(?))",
                (self._namespace, json.dumps(list(sessions))),
            ).fetchall()
            for key, session in live:
                if sessions.get(key, session) != session:
                    raise owned(str(key), what)
            conn.executemany(schema.UPSERT, rows)

        self._write(op, what)
        return len(rows)

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int:
        """Write every row of this namespace, forgotten and superseded ones included."""
        records = self._read(lambda c: self._fetch(c, "1 = 1", ()), "export")
        return write_jsonl(dst, records)

    def embed_missing(self, *, batch_size: int = 256) -> int:
        """Embed the live rows that have no vector yet (written before an embedder was set)."""
        if self._embedder is None:
            return 0
        done = 0
        while True:
            todo = self._read(
                lambda c: self._fetch(
                    c,
                    "embedding IS NULL AND deleted_at IS NULL ORDER BY rid LIMIT ?",
                    (batch_size,),
                ),
                "embed_missing",
            )
            if not todo:
                return done
            done += self._upsert_many(self._embedded(todo), "embed_missing")
