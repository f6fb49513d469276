"""The bulk paths of :class:`~memory_inject.storage.sqlite.SQLiteStore`, as functions of it.

JSON Lines import and export (the format is :mod:`memory_inject.storage._jsonl`'s,
shared with PostgreSQL) and the back-fill of embeddings for rows written
before an embedder was set. Each takes the store (its namespace, its embedding
step and its :class:`~.engine.SQLiteEngine`) and runs in batches over the
engine's connections; the store's methods of the same names call them.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING

from memory_inject.embedders import embedder_dim
from memory_inject.exceptions import KeyOwnedError
from memory_inject.storage._base import owned, refuse_moves
from memory_inject.storage._jsonl import read_jsonl, write_jsonl
from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import neighbours
from memory_inject.storage.sqlite.codec import UPSERT, encode_vector, record_to_row
from memory_inject.storage.sqlite.engine import SQLiteEngine
from memory_inject.storage.sqlite.erase import compact_keyword_index

if TYPE_CHECKING:  # the store calls these functions: typing only, no import cycle
    from memory_inject.storage.sqlite.store import SQLiteStore

__all__ = ["embed_missing", "export_jsonl", "import_jsonl"]


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


def import_jsonl(
    store: SQLiteStore,
    src: str | os.PathLike[str] | IO[str],
    *,
    progress: Callable[[int], object] | None = None,
    batch_size: int = 1000,
    reembed: bool = False,
) -> int:
    """``store.import_jsonl``: upsert one record per JSON line, ``batch_size`` per commit."""
    foreign = "reembed" if reembed else "embed"
    done = 0
    batch: list[MemoryRecord] = []
    lines: list[int] = []
    for lineno, record in read_jsonl(src):
        batch.append(record.evolve(namespace=store.namespace))
        lines.append(lineno)
        if len(batch) >= batch_size:
            done += _import_batch(store, batch, lines, foreign)
            batch, lines = [], []
            if progress is not None:
                progress(done)
    if batch:
        done += _import_batch(store, batch, lines, foreign)
        if progress is not None:
            progress(done)
    if done >= MERGE_AFTER:
        _merge_keyword_index(store, done)
    return done


#: An import of at least this many records merges the keyword index (when they are a
#: quarter of the store or more: :func:`_merge_keyword_index`).
MERGE_AFTER = 100


def _merge_keyword_index(store: SQLiteStore, done: int) -> None:
    """Merge the keyword index's segments into one after an import that wrote at least
    a quarter of the store's rows.

    The index's triggers run once a row, and FTS5 flushes a segment at each
    statement: a 1,000-row import left 1,000 segment writes, which FTS5's own
    merging keeps at about 16 segments over four levels, and every keyword
    query looks each word up in all of them (a word's first read at 1k: 29 µs
    against 13 merged). Rewriting the index costs about what writing it did,
    so a small import into a large store leaves the merging to FTS5. Hits and
    scores cannot change.
    """

    def op(conn: sqlite3.Connection) -> None:
        (rows,) = conn.execute("SELECT count(*) FROM memories").fetchone()
        if 4 * done >= rows:
            compact_keyword_index(conn)  # optimize, or rebuild where levels grow (erase.py)

    store._engine.write(op, "import")


def _import_batch(
    store: SQLiteStore, batch: list[MemoryRecord], lines: Sequence[int], foreign: str
) -> int:
    try:
        records = store._embedded(batch, foreign=foreign)
        return _upsert_many(store._engine, records, "import", lines)
    except _LineError as exc:
        raise ValueError(str(exc)) from exc.__cause__
    except KeyOwnedError:
        raise  # it names the line, and stays what it is (PostgreSQL's import raises it too)
    except ValueError as exc:
        raise ValueError(f"import batch ending at line {lines[-1]}: {exc}") from exc


def _upsert_many(
    engine: SQLiteEngine,
    records: Sequence[MemoryRecord],
    what: str,
    lines: Sequence[int] | None = None,
) -> int:
    refuse_moves(records, what, lines)
    rows = [record_to_row(r) for r in records]
    sessions = {r.key: r.session_id for r in records}  # a repeated key: its last line
    namespace = engine.namespace

    def op(conn: sqlite3.Connection) -> None:
        # A row belongs to its scope: no line may replace another scope's live row.
        live = conn.execute(
            "SELECT key, session_id FROM memories WHERE namespace = ? AND deleted_at IS "
            "NULL AND key IN (SELECT value FROM json_each(?))",
            (namespace, json.dumps(list(sessions))),
        ).fetchall()
        for key, session in live:
            if sessions.get(key, session) != session:
                line = "" if lines is None else f" (line {lines[_last_of(records, key)]})"
                raise owned(str(key), f"{what}{line}")
        held = neighbours.anchors(conn, namespace, sessions)
        try:
            conn.executemany(UPSERT, rows)
        except sqlite3.IntegrityError as exc:
            if lines is not None:
                clash = _id_clash(conn, namespace, records)
                if clash is not None:
                    i, other = clash
                    raise _LineError(
                        f"import line {lines[i]}: id {records[i].id!r} is already the id "
                        f"of key {other!r} (an id names one memory); nothing of lines "
                        f"{lines[0]}-{lines[-1]} was written"
                    ) from exc
            raise
        if held:  # keys written again: their rows and their successors get context afresh
            again = neighbours.anchors(conn, namespace, sessions)
            neighbours.refresh(conn, namespace, [*held, *again])

    engine.write(op, what)
    return len(rows)


def export_jsonl(store: SQLiteStore, dst: str | os.PathLike[str] | IO[str]) -> int:
    """``store.export_jsonl``: every row of the namespace, forgotten and superseded ones too."""
    engine = store._engine
    records = engine.connections.read(lambda c: engine.fetch(c, "1 = 1", ()), "export")
    return write_jsonl(dst, records)


def embed_missing(store: SQLiteStore, *, batch_size: int = 256) -> int:
    """``store.embed_missing``: embed the live rows without a vector of the embedder's
    ``dim`` (none yet, or another model's), ``batch_size`` at a time; returns how many
    got one.

    Only the vector is written, and only to a row still as it was read (same id and
    content, still live, its vector unchanged): a ``store()`` or ``forget()`` that
    returned while a batch was being embedded is never undone. A row changed meanwhile
    is left to its writer (or to the next call), and each row is read once (by ``rid``).
    """
    if store.embedder is None:
        return 0
    engine = store._engine
    dim = embedder_dim(store.embedder)
    width = -1 if dim is None else 4 * dim  # float32 bytes; -1: any vector is the model's
    done, after = 0, 0
    stale = "(embedding IS NULL OR (? >= 0 AND length(embedding) != ?))"
    pending = stale + " AND deleted_at IS NULL AND rid > ?"

    def read(conn: sqlite3.Connection) -> tuple[int | None, list[MemoryRecord]]:
        [(last,)] = conn.execute(
            f"SELECT max(rid) FROM (SELECT rid FROM memories WHERE namespace = ? AND {pending} "  # noqa: S608
            "ORDER BY rid LIMIT ?)",
            (engine.namespace, width, width, after, batch_size),
        )
        return last, engine.fetch(conn, pending + " AND rid <= ?", (width, width, after, last))

    while True:
        last, todo = engine.connections.read(read, "embed_missing")
        if last is None:
            return done
        after = int(last)
        rows = [
            (encode_vector(new.embedding), engine.namespace, new.key, new.id, new.content)
            + ((None, None) if old.embedding is None else (1, encode_vector(old.embedding)))
            for old, new in zip(
                todo, store._embedded([r.evolve(embedding=None) for r in todo]), strict=True
            )
            if new.embedding is not None
        ]

        def op(conn: sqlite3.Connection, rows: Sequence[tuple[object, ...]] = rows) -> int:
            return conn.executemany(
                "UPDATE memories SET embedding = ? WHERE namespace = ? AND key = ? AND id = ? "
                "AND content = ? AND deleted_at IS NULL "
                "AND (embedding IS NULL AND ? IS NULL OR embedding = ?)",
                rows,
            ).rowcount  # the rows updated, not the index's rows the triggers changed

        done += engine.write(op, "embed_missing")
