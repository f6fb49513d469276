"""``erase``: a SQLite row removed for good, its text out of the file's bytes too.

``forget`` is a soft delete: the row stays (``deleted_at`` set) for export,
and its words stay in the keyword index's old segments until FTS5 merges them.
An erase is a ``DELETE`` of the row, live or forgotten, and of every copy of
its text the file holds, in one write transaction. The write connection runs
with ``PRAGMA secure_delete`` from its open (freed cells and pages are
overwritten with zeros), so no earlier write left a copy of the row in free
pages either (a file written before by a SQLite built without it may hold
such copies: ``VACUUM`` rewrites them away, storage.md):

* the rows that took its text as context get theirs again (:mod:`.neighbours`,
  as a forget does), and their index entries are replaced;
* the keyword index is rewritten as one segment (:func:`compact_keyword_index`), so no
  old segment keeps a token of the row or of the neighbours' old context;
* the delete triggers log the rid in ``memories_log``, so every reader's cache
  (keyword mirror, term statistics, vector matrix) drops the row as it drops a
  forgotten one;
* after the commit the WAL is checkpointed and truncated, so the frames that
  held the row before are gone from the ``-wal`` file;
* when a row had a vector, the approximate index's graph files of the namespace
  (``.usearch``, saved next to the database by :mod:`.vector_ann_file`) are
  removed, and a graph still being built in this process is stopped: a graph
  holds the vectors it was built from (a forget already makes the next process
  build it again). The matrices and a ready graph drop the row as they follow
  the log.

What it cannot reach: copies made outside the file (a backup, a filesystem
snapshot, a replica) and bytes the file system or disk keep after SQLite
overwrote them; a graph build of another process (or one at its last step here)
that saves its file just after the erase removed it (the next build replaces it,
its digest no longer being the vectors'). A checkpoint that a long read keeps
from finishing (the WAL then holds the old frames until the next checkpoint) is
waited for as long as the store's busy timeout.
"""

from __future__ import annotations

import contextlib
import glob
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from memory_inject.storage.sqlite import neighbours
from memory_inject.storage.sqlite.connection import SQLiteConnection
from memory_inject.storage.sqlite.queries import within_scope
from memory_inject.storage.sqlite.vector_ann_file import database_file, graph_path
from memory_inject.storage.sqlite.vectors import VectorCache

__all__ = [
    "COMPACT",
    "MAX_LEVELS",
    "Eraser",
    "compact_keyword_index",
    "erase_rows",
    "keyword_levels",
    "scope_where",
]

#: SQLite before 3.51 (the oldest release checked to cap it) may put each ``optimize``'s
#: output one level above the index's top: after about 2,000 of them (1,000 erases of a
#: retention job on SQLite 3.40) the index's structure record no longer parses, and every
#: write and keyword recall fails "database disk image is malformed" (round 36).
LEVELS_GROW = sqlite3.sqlite_version_info < (3, 51, 0)
#: Past this many levels such a SQLite rebuilds the index instead (``rebuild`` indexes the
#: content table afresh at one level; at 10k rows about 40 ms against optimize's 15, and
#: it grows with the store, so it is paid once in a while, not at every erase).
MAX_LEVELS = 32
COMPACT = "optimize"  # what most compactions run; ``rebuild`` past MAX_LEVELS


def compact_keyword_index(conn: sqlite3.Connection) -> None:
    """Rewrite ``memories_fts`` as one segment (in the caller's write transaction), so no
    old segment keeps a deleted row's tokens: ``optimize``, or ``rebuild`` where the
    SQLite adds a level at each and the index holds more than :data:`MAX_LEVELS`."""
    command = "rebuild" if LEVELS_GROW and keyword_levels(conn) > MAX_LEVELS else COMPACT
    conn.execute(f"INSERT INTO memories_fts(memories_fts) VALUES ('{command}')")  # noqa: S608


def keyword_levels(conn: sqlite3.Connection) -> int:
    """How many levels ``memories_fts``'s structure record (its ``_data`` row 10) says."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = 10").fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) < 5:
        return 0
    block = row[0]
    i = 8 if block[4:8] == b"\xff\x00\x00\x01" else 4  # the cookie, then a V2 header
    value = 0
    for n in range(9):  # SQLite's big-endian varint
        if i >= len(block):
            return value
        byte = block[i]
        i += 1
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


class Eraser(Protocol):
    """What :func:`erase_rows` needs of the engine."""

    connections: SQLiteConnection
    namespace: str

    def write(self, op: Any, what: str) -> Any:
        """``op`` in a write transaction; the store's caches learn of the commit."""

    def vector_cache(self) -> VectorCache | None:
        """The store's vector matrices, if it keeps them."""


def scope_where(
    key: str, scope: tuple[Sequence[str], bool, Sequence[str] | None] | None
) -> tuple[str, list[Any]] | None:
    """The rows ``erase(key)`` may remove within ``scope`` (``forget_scope``'s value), live
    or forgotten: the same scope rules as ``forget``; None when the scope keeps nothing."""
    return within_scope("key = ?", [key], scope)


def erase_rows(engine: Eraser, where: str, params: Sequence[Any], what: str) -> int:
    """Delete this namespace's rows matching ``where`` and every copy of their text the
    file holds (see the module docstring); returns how many rows went."""
    ns = engine.namespace

    def op(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
        # The write connection runs with secure_delete on from its open (connection.py):
        # turning it on here alone left the copies earlier updates had freed, and turning
        # it off after left every later write's.
        gone: list[tuple[Any, ...]] = conn.execute(
            f"DELETE FROM memories WHERE namespace = ? AND {where} "  # noqa: S608
            f"RETURNING {neighbours.ANCHOR}, embedding IS NOT NULL",
            (ns, *params),
        ).fetchall()
        if gone:
            neighbours.refresh(conn, ns, [g[:-1] for g in gone])
            # Old segments keep a deleted row's tokens until merged: rewrite them all.
            compact_keyword_index(conn)
        return gone

    gone = engine.write(op, what)
    if not gone:
        return 0
    if any(g[-1] for g in gone):
        cache = engine.vector_cache()
        if cache is not None:
            _stop_builds(cache, ns)
        engine.connections.read(_drop_graphs(ns), what)
    engine.connections.checkpoint(what)
    return len(gone)


def _stop_builds(cache: VectorCache, namespace: str) -> None:
    """Stop and drop the namespace's graphs still being built: a build started before the
    erase would save the erased vectors next to the file. A ready graph never saves again
    and drops the row's slot as its matrix follows the log; the next recall starts a new
    build from the current matrix. (``vectors.py`` is at its size limit: its lock and
    index table are used here.)"""
    with cache._lock:
        for key, ann in list(cache._indexes.items()):
            if key[0] == namespace and not ann.ready:
                ann.stop()
                del cache._indexes[key]


def _drop_graphs(namespace: str) -> Any:
    def op(conn: sqlite3.Connection) -> None:
        one = graph_path(conn, namespace, 1)
        if database_file(conn) is None or one is None:
            return
        prefix = one.name[: -len("1.usearch")]
        for path in Path(one.parent).glob(f"{glob.escape(prefix)}*.usearch*"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    return op
