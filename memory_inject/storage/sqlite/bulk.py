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

from memory_inject.storage._base import owned
from memory_inject.storage._jsonl import read_jsonl, write_jsonl
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite.codec import UPSERT, record_to_row
from memory_inject.storage.sqlite.connection import SQLiteConnections

__all__ = ["SQLiteBulk"]


class _LineError(ValueError):
    """An import batch failed because of one line, which the message names."""


def _last_of(records: Sequence[MemoryRecord], key: str) -> int:
    """The index of the last record of ``key`` (the one the upsert keeps)."""
    return max(i for i, r in enumerate(records) if r.key == key)


def _id_clash(
    conn: sqlite3.Connection, namespace: str, records: Sequence[MemoryRecord]
) -> tuple[int, str] | None:
    """The first record whose id another key holds (in the file before it, or in the
    table), and that key; None when no id clashes."""
    ids = list({r.id for r in records})
    held = dict(
        conn.execute(
            "SELECT id, key FROM memories WHERE namespace = ? AND id IN "
            "(SELECT value FROM json_each(?))",
            (namespace, json.dumps(ids)),
        ).fetchall()
    )
    for i, r in enumerate(records):
        other = held.get(r.id)
        if other is not None and other != r.key:
            return i, str(other)
        held[r.id] = r.key
    return None


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
        lines: builtins.list[int] = []
        for lineno, record in read_jsonl(src):
            batch.append(record.evolve(namespace=self._namespace))
            lines.append(lineno)
            if len(batch) >= batch_size:
                done += self._import_batch(batch, lines)
                batch, lines = [], []
                if progress is not None:
                    progress(done)
        if batch:
            done += self._import_batch(batch, lines)
            if progress is not None:
                progress(done)
        return done

    def _import_batch(self, batch: builtins.list[MemoryRecord], lines: Sequence[int]) -> int:
        try:
            return self._upsert_many(self._embedded(batch), "import", lines)
        except _LineError as exc:
            raise ValueError(str(exc)) from exc.__cause__
        except ValueError as exc:
            raise ValueError(f"import batch ending at line {lines[-1]}: {exc}") from exc

    def _upsert_many(
        self, records: Sequence[MemoryRecord], what: str, lines: Sequence[int] | None = None
    ) -> int:
        rows = [record_to_row(r) for r in records]
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
                    line = "" if lines is None else f" (line {lines[_last_of(records, key)]})"
                    raise owned(str(key), f"{what}{line}")
            try:
                conn.executemany(UPSERT, rows)
            except sqlite3.IntegrityError as exc:
                if lines is not None:
                    clash = _id_clash(conn, self._namespace, records)
                    if clash is not None:
                        i, other = clash
                        raise _LineError(
                            f"import line {lines[i]}: id {records[i].id!r} is already the id "
                            f"of key {other!r} (an id names one memory); nothing of lines "
                            f"{lines[0]}-{lines[-1]} was written"
                        ) from exc
                raise

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
