"""An approximate index's graph saved next to the database file, and found again.

Building the HNSW graph of :mod:`.vector_ann` takes minutes at 1M rows
(7 to 21 on two shared cores), on every process start. Once built, the graph
is saved as ``<db>.<namespace digest>-<dim>.usearch`` with a stamp beside it
(``.json``), and the next process loads it instead of building, if the stamp
says it is the graph of the same vectors:

* the graph depends only on which slots are live and the unit vector in each
  (keys are slots; ids, sessions and the scope columns are read from the
  matrix on every search), so the stamp holds the slots' count, a digest of
  the live mask and of the float32 vectors, the vector size and the graph's
  parameters. A matrix is read in rid order, so rows written since the save
  sit in slots past the saved ones: if the saved slots still hold the same
  vectors, the graph is loaded and only the new rows are added (then saved
  again). A vector changed or a row forgotten since (slots move) changes the
  digest, and the graph is built again; a change of scope columns only
  (superseded, expiry) does not;
* the graph file's own size and digest are in the stamp too, so a file cut
  short, rewritten by another process in between or damaged is never handed
  to ``usearch`` (whose native reader trusts its input): it is built again;
* a loaded graph must hold exactly the live slots it was saved with.

Hashing is on the build's thread, never on a recall: at 1M rows of 256
dimensions the vectors' digest takes about 1 s, and loading the 0.9 GB graph
(its digest checked) 3 to 6 s, against 7 minutes or more to build it. Files
are written under a temporary name and renamed into place; a save that fails
(a directory that cannot be written, a full disk) removes its temporary files
and leaves the graph in memory only, and a dead writer's are removed by the
next save or load. A wrong or stale graph
could only cost recall, never a wrong row: every candidate's scope and cosine
are read from the matrix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from memory_inject.embedders import numpy_or_none

__all__ = [
    "FORMAT",
    "database_file",
    "graph_path",
    "load_graph",
    "remove_stale_temps",
    "save_graph",
    "saved_slots",
    "vectors_digest",
]

#: The stamp's format; a stamp of another format is stale.
FORMAT = 1

_BLOCK = 1 << 24
#: A save's temporary file untouched this long is removed if its process is gone,
#: and this long in any case (seconds).
_DEAD_AFTER = 600.0
_ANY_AFTER = 86400.0


def database_file(conn: sqlite3.Connection) -> str | None:
    """The main database's file; None for one with no file (``:memory:`` or temporary)."""
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return str(row[2]) or None
    return None  # pragma: no cover - SQLite always lists "main"


def graph_path(conn: sqlite3.Connection, namespace: str, dim: int) -> Path | None:
    """Where the graph of ``namespace``'s ``dim``-sized vectors is saved; None for a
    database with no file (``:memory:`` or a temporary one)."""
    path = database_file(conn)
    if path is None:
        return None
    tag = hashlib.sha256(namespace.encode()).hexdigest()[:16]
    return Path(f"{path}.{tag}-{dim}.usearch")


def vectors_digest(live: Any, matrix: Any) -> str:
    """A digest of the live mask and the float32 vectors the graph is built from."""
    _np = numpy_or_none()
    h = hashlib.sha256()
    h.update(_np.ascontiguousarray(live, dtype=bool).tobytes())
    flat = memoryview(_np.ascontiguousarray(matrix, dtype="<f4")).cast("B")
    for start in range(0, len(flat), _BLOCK):
        h.update(flat[start : start + _BLOCK])
    return h.hexdigest()


def _file_digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            size += len(block)
            h.update(block)
    return size, h.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def save_graph(index: Any, path: Path, stamp: dict[str, Any]) -> bool:
    """Save ``index`` at ``path`` with ``stamp`` (what it was built from) beside it;
    False when the save fails (the graph stays in memory only), its temporary files
    removed. usearch reports a full disk as ``RuntimeError('Failed to serialize into
    stream')``: only ``OSError`` was caught, so the temporary file stayed and the
    finished graph was thrown away for the life of the process."""
    remove_stale_temps(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    stamp_tmp = _stamp_path(tmp)
    try:
        index.save(str(tmp))
        size, digest = _file_digest(tmp)
        body = {**stamp, "format": FORMAT, "graph_bytes": size, "graph_sha256": digest}
        stamp_tmp.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
        os.replace(stamp_tmp, _stamp_path(path))
    except BaseException as exc:
        for p in (tmp, stamp_tmp):
            with contextlib.suppress(OSError):
                p.unlink()
        if not isinstance(exc, Exception):
            raise
        return False
    return True


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (on Windows: assumed, as
    ``os.kill`` there ends the process)."""
    if os.name == "nt":  # pragma: no cover
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale_temps(path: Path) -> int:
    """Remove the temporary files of saves of ``path`` that died (killed, or before the
    fix above): those of a process that no longer runs, untouched for ``_DEAD_AFTER``
    seconds (a writer in another container may have a pid this one does not see), and
    any untouched for ``_ANY_AFTER``. A live writer's file is written or read all along.
    Returns how many were removed."""
    pattern = re.compile(rf"{re.escape(path.name)}\.(\d+)-[0-9a-f]{{8}}\.tmp(\.json)?")
    now, removed = time.time(), 0
    try:
        names = os.listdir(path.parent)
    except OSError:
        return 0
    for name in names:
        found = pattern.fullmatch(name)
        if found is None:
            continue
        temp = path.with_name(name)
        try:
            idle = now - temp.stat().st_mtime
            pid = int(found.group(1))
            if idle > _ANY_AFTER or (idle > _DEAD_AFTER and pid != os.getpid() and not _alive(pid)):
                temp.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def saved_slots(path: Path) -> int | None:
    """How many slots the matrix had when the graph at ``path`` was saved (None: no
    readable stamp); a matrix read since with more slots holds rows written since."""
    try:
        saved = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    slots = saved.get("slots") if isinstance(saved, dict) else None
    return slots if isinstance(slots, int) and slots > 0 else None


def load_graph(path: Path, stamp: dict[str, Any], slots: Any, index_type: Any) -> Any:
    """The graph saved at ``path`` (restored by ``index_type``, usearch's ``Index``) if
    its stamp is ``stamp`` and it holds exactly the slots ``slots``; None otherwise
    (missing, stale, damaged: the caller builds)."""
    _np = numpy_or_none()
    remove_stale_temps(path)
    try:
        saved = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            return None
        if any(saved.get(k) != v for k, v in stamp.items()):
            return None
        if _file_digest(path) != (saved.get("graph_bytes"), saved.get("graph_sha256")):
            return None
        index = index_type.restore(str(path), view=False)
    except (OSError, ValueError, RuntimeError, TypeError):
        return None
    if index is None or index.ndim != stamp.get("dim") or len(index) != len(slots):
        return None
    if len(slots) and not bool(_np.asarray(index.contains(slots.astype(_np.uint64))).all()):
        return None
    return index
