"""A large namespace's vectors read on a background thread, never inside a turn.

The first recall with an embedder reads the namespace's vectors into a
:class:`~.vector_matrix.VectorMatrix`: about 10 us a row, so 9 to 14 s at 1M rows.
Inside a turn that read ran into the turn's deadline (2 s by default), was
interrupted, and the next turn started it again: on a store of a few hundred
thousand rows or more no turn ever got its memory, not even by keyword.

From :data:`LOAD_LATER_ROWS` rows on, :class:`Loads` reads the matrix on a daemon
thread with a read-only connection of its own, in one snapshot, and hands it to the
cache, which patches it from ``memories_log`` like any other matrix. Until then a
recall raises :class:`VectorsLoading`, and the store searches by keyword only and
says so on the turn's event (``vectors_loading: ...``). A read that failed is tried
again by a recall :data:`RETRY_S` seconds later; the failure is on the events
meanwhile.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memory_inject.storage.sqlite.changes import log_position
from memory_inject.storage.sqlite.vector_matrix import VectorMatrix, VectorScope, read_matrix

__all__ = [
    "FILE_SCAN_BYTES",
    "LOAD_LATER_ROWS",
    "RETRY_S",
    "KeywordsOnly",
    "Loads",
    "VectorsLoading",
    "VectorsNotHeld",
    "is_large",
    "refuse_scan",
]

#: A namespace of at least this many rows (a bound: the rids' span) is read on a
#: background thread; a smaller one inside the recall, as before (about 0.5 s at it).
LOAD_LATER_ROWS = 50_000
#: Seconds before a recall starts a read again after one failed.
RETRY_S = 30.0

_Key = tuple[str, int]


#: A namespace too large to hold in memory is read from the file by each recall; past
#: this many bytes of vectors a recall without a session does not try (about 0.85 s at
#: 512 MiB here, so the turn's deadline would stop it with nothing found).
FILE_SCAN_BYTES = 512 << 20


def is_large(conn: sqlite3.Connection, namespace: str, bound: int) -> bool:
    """Whether ``namespace``'s matrix, of at most ``bound`` rows, is read in the background.

    ``bound`` may count the whole file's rows (the rids' span): a tenant of a hundred
    rows in a file shared with a million would wait for a background read, keyword
    only, where reading its rows takes a millisecond. So the namespace's own rows are
    counted on an index too, up to :data:`LOAD_LATER_ROWS` (2-35 ms at 1M rows).
    """
    if bound < LOAD_LATER_ROWS:
        return False
    own = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE namespace = ? LIMIT ?)",
        (namespace, LOAD_LATER_ROWS),
    ).fetchone()[0]
    return int(own) >= LOAD_LATER_ROWS


class KeywordsOnly(Exception):
    """This recall's vector stage cannot run in time: search by keyword, and say why."""


class VectorsLoading(KeywordsOnly):
    """The namespace's vectors are being read on a background thread."""


class VectorsNotHeld(KeywordsOnly):
    """The namespace's vectors are past the in-memory bound and too many to read per recall."""


def refuse_scan(namespace: str, dim: int, rows: int, scope: VectorScope) -> None:
    """Raise :class:`VectorsNotHeld` when a recall of ``scope`` would read more than
    :data:`FILE_SCAN_BYTES` of ``rows`` vectors from the file (a session's rows are read)."""
    if scope.session_id is None and rows * 4 * dim > FILE_SCAN_BYTES:
        raise VectorsNotHeld(
            f"vectors_not_held: namespace {namespace!r} holds {rows} vectors of {dim} "
            "dimensions, more than the store keeps in memory and more than a recall reads "
            "from the file; this recall searched by keyword only (the ann extra, "
            "`pip install memory-inject[ann]`, keeps up to 2 GiB of them in memory)"
        )


class Loads:
    """The background reads of one :class:`~.vectors.VectorCache` (called under its lock)."""

    def __init__(self) -> None:
        """No read running."""
        self._running: dict[_Key, int] = {}
        self._failed: dict[_Key, tuple[float, str]] = {}
        self._gen = 0  # moves when the cache is cleared: reads started before are dropped

    def cancel(self) -> None:
        """Drop every read running (their results are not kept) and the failures."""
        self._gen += 1
        self._running.clear()
        self._failed.clear()

    def later(
        self,
        path: str,
        key: _Key,
        rows: int,
        landed: Callable[[_Key, VectorMatrix], None],
        lock: threading.RLock,
    ) -> VectorsLoading:
        """Start reading ``key``'s matrix (unless a read is running or failed lately);
        the :class:`VectorsLoading` the recall raises. ``landed`` receives the matrix,
        called under ``lock`` while the read is still the current one."""
        namespace = key[0]
        failed = self._failed.get(key)
        if key not in self._running and (failed is None or time.monotonic() >= failed[0]):
            self._failed.pop(key, None)
            gen = self._running[key] = self._gen
            args = (path, key, gen, landed, lock)
            threading.Thread(
                target=self._read, args=args, name="memory-inject-vectors", daemon=True
            ).start()
            failed = None
        note = (
            f"vectors_loading: the {rows} or fewer vectors of namespace {namespace!r} "
            "are being read on a background thread; this recall searched by keyword only"
        )
        if failed is not None:
            note += f" (the last read failed: {failed[1]}; tried again in {RETRY_S:.0f} s)"
        return VectorsLoading(note)

    def _read(
        self,
        path: str,
        key: _Key,
        gen: int,
        landed: Callable[[_Key, VectorMatrix], None],
        lock: threading.RLock,
    ) -> None:
        namespace, dim = key
        built: VectorMatrix | None = None
        error = ""
        try:
            uri = f"{Path(path).as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=30.0, check_same_thread=False)
            try:
                conn.execute("BEGIN")  # one snapshot: the rows and the log position
                built = read_matrix(conn, namespace, dim, log_position(conn))
            finally:
                conn.close()
        except Exception as exc:  # noqa: BLE001 - reported on the next recalls' events
            error = f"{type(exc).__name__}: {exc}"
        with lock:
            if self._running.get(key) != gen or gen != self._gen:
                return  # cleared meanwhile: a newer read (or none) is wanted
            del self._running[key]
            if built is None:
                self._failed[key] = (time.monotonic() + RETRY_S, error)
            else:
                landed(key, built)
