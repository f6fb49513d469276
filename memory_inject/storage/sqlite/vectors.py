"""The SQLite store's in-memory vector matrix: one float32 array per namespace and size.

Reading every stored vector of the scope on every hybrid recall cost more
than the rest of the recall together: at 10k rows, walking the rows to apply
the scope alone took tens of milliseconds, the blobs, a fresh array and the
norms as much again. The namespace's embedded rows are read once, kept as
unit vectors with the few columns the scope reads (session, category,
timestamp, expiry, superseded), and kept current. A change is seen through
two counters, read on the connection that recalls:

* ``PRAGMA data_version``, which changes when *another* connection (this
  store's writer, another store or another process) commits; each read
  connection has its own, so the cache remembers the value each connection
  last saw it current at;
* the store's own write count, for a ``:memory:`` database whose reads share
  the writer's connection (there ``data_version`` does not move on its own
  commits).

The store's read connections share one cache. A matrix is patched, read and
scored under the cache's lock; a query's cosines and scope mask are its own
arrays, and a later look at them (:meth:`ScopeVectors.top`,
:meth:`ScopeVectors.cosines`) sees whether a patch moved rows meanwhile and
scores again if so.

When either moved, the matrix is patched from ``memories_log`` (schema 6:
triggers log the rid of every inserted, updated and deleted row, whoever
wrote it): only the rows logged since the matrix was current are read. A
matrix further behind than the log keeps (or than :data:`PATCH_MAX` rows) is
read again. Before the log, every write meant reading every vector again:
about 100 ms for the next hybrid recall at 10k rows.

The scope is applied to those columns in numpy (:class:`VectorScope`, the
same rules as the store's SQL scope; a test holds the two together). The
matrix itself (slots, patches, the scope mask) is :mod:`.vector_matrix`'s;
the change log's reads are :mod:`.changes`'. This module owns the cache and
a query's exact scores over it.

Past :data:`~.vector_ann.ANN_THRESHOLD` rows, with ``usearch`` installed (the
``ann`` extra) and ``index="auto"``, the cache keeps an HNSW graph next to a
matrix (:mod:`.vector_ann`; saved next to the file and loaded by the next
process, :mod:`.vector_ann_file`) and a broad scope's nearest rows come from it; a
narrow scope (a session's rows) is scored exactly over its own rows only.
The matrix is then kept up to :data:`ANN_MAX_BYTES` instead of
:data:`MAX_MATRIX_BYTES`: a 1M-row namespace read from the file on every
recall costs seconds, its matrix in memory about 1.2 GB at 256 dimensions.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.sqlite import vector_load
from memory_inject.storage.sqlite.changes import log_position
from memory_inject.storage.sqlite.vector_ann import (
    ANN_THRESHOLD,
    NARROW_ROWS,
    AnnIndex,
    AnnScope,
    Scored,
    usearch_installed,
    usearch_or_none,
)
from memory_inject.storage.sqlite.vector_ann_file import database_file, graph_path
from memory_inject.storage.sqlite.vector_matrix import (
    VectorMatrix,
    VectorScope,
    patch_from_log,
    read_matrix,
    row_bytes,
    rows_to_read,
)

__all__ = [
    "ANN_MAX_BYTES",
    "INDEX_CHOICES",
    "MAX_MATRIX_BYTES",
    "PATCH_MAX",
    "ExactScope",
    "ScopeVectors",
    "VectorCache",
    "VectorScope",
    "row_bytes",
]

#: A namespace's matrix is kept only while it holds at most this many bytes
#: (:func:`row_bytes` a row: about 340,000 rows of 384 dimensions); a larger
#: one is not kept, and its recalls read the scope's vectors from the file.
MAX_MATRIX_BYTES = 256 << 20

#: The bound when an approximate index is kept next to the matrix (about 1.7M
#: rows of 256 dimensions, 1.2M of 384).
ANN_MAX_BYTES = 2 << 30

#: ``index`` of :class:`VectorCache`: ``"auto"`` keeps an approximate index past
#: its threshold when ``usearch`` is installed and saves its graph next to the
#: database file, ``"memory"`` keeps it in memory only (each process builds its
#: own), ``"exact"`` never keeps one.
INDEX_CHOICES = ("auto", "memory", "exact")

#: What the recall reads of one query's cosines: :class:`ExactScope` or
#: :class:`~.vector_ann.AnnScope`.
ScopeVectors = Scored


#: A session scope keeping less than this share of a namespace's rows is scanned
#: exactly over its own rows rather than through the approximate index (which would
#: oversample past :data:`~.vector_ann.MAX_CANDIDATES`) or the whole matrix (1 ms at 20k).
NARROW_SHARE = 0.05

#: Past this many changed rows a matrix is read again rather than patched.
PATCH_MAX = 1024


class ExactScope:
    """One query's exact cosines over the rows of its scope, from the cached matrix.

    ``low`` and ``high`` are the least and greatest cosine in the scope (0.0
    for an empty scope); :meth:`top` the best rows; :meth:`cosines` the cosine
    of given ids (the keyword stage's hits), for fusions that need both. The
    matrix may be patched by another read connection after this was scored:
    each look takes the cache's lock and scores again if it was. ``narrow``
    scores only the rows a session scope may keep
    (:meth:`~.vector_matrix.VectorMatrix.session_rows`) rather than every row.
    """

    __slots__ = (
        "_gen",
        "_keep",
        "_lock",
        "_m",
        "_narrow",
        "_q",
        "_rows",
        "_scope",
        "_sims",
        "count",
        "high",
        "low",
        "skipped",
    )

    def __init__(
        self,
        m: VectorMatrix,
        q: Any,
        scope: VectorScope,
        lock: threading.RLock | None = None,
        *,
        narrow: bool = False,
        rows: Any = None,
    ) -> None:
        """Score the unit query ``q`` over ``m`` within ``scope`` (the caller holds ``lock``)."""
        self._m = m
        self._q = q
        self._scope = scope
        self._lock = lock if lock is not None else threading.RLock()
        self._narrow = narrow
        self._rows: Any = None
        self._score(rows)
        #: Rows of the scope whose stored vector is not finite (never scored).
        self.skipped = m.skipped(scope)
        keep, sims = self._keep, self._sims
        self.count = int(keep.sum())
        inside = sims[keep]
        self.low = float(inside.min()) if self.count else 0.0
        self.high = float(inside.max()) if self.count else 0.0

    def _score(self, rows: Any = None) -> None:
        _np = numpy_or_none()
        m = self._m
        if self._narrow:  # ``rows``: the caller's; a patched matrix's are found again
            rows = self._rows = m.session_rows(self._scope) if rows is None else rows
            matrix, keep = m.matrix[rows], m.in_scope(self._scope, rows)
        else:
            matrix, keep = m.matrix, m.mask(self._scope)
        # einsum, not ``@``: a matrix-vector product through BLAS may start a
        # thread pool, whose spinning threads cost 10+ ms on a busy machine.
        if self._q is not None:
            self._sims = _np.einsum("ij,j->i", matrix, self._q)
        else:
            self._sims = _np.zeros(len(keep), dtype=_np.float32)
        self._keep = keep
        self._gen = m.gen

    def _slot(self, i: int) -> int:
        return i if self._rows is None else int(self._rows[i])

    def _current(self) -> None:
        if self._gen != self._m.gen:
            self._score()

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs of the scope, best first, ties by id."""
        _np = numpy_or_none()
        with self._lock:
            self._current()
            if k <= 0 or not self._keep.any():
                return []
            rows = _np.nonzero(self._keep)[0]
            sims = self._sims[rows]
            if k < len(rows):
                part = _np.argpartition(-sims, k - 1)[:k]
                # Widen to every row tied with the k-th so the id tie-break is exact.
                part = _np.nonzero(sims >= sims[part].min())[0]
            else:
                part = _np.arange(len(rows))
            ids = self._m.ids
            # Only live slots are kept, and a live slot always has its id.
            pairs = [(str(ids[self._slot(int(rows[i]))]), float(sims[i])) for i in part.tolist()]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:k]

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""
        _np = numpy_or_none()
        with self._lock:
            self._current()
            position, keep, sims, rows = self._m.position, self._keep, self._sims, self._rows
            out = {}
            for key in ids:
                i = position.get(key)
                if i is not None and rows is not None:
                    at = int(_np.searchsorted(rows, i))
                    i = at if at < len(rows) and int(rows[at]) == i else None
                if i is not None and keep[i]:
                    out[key] = float(sims[i])
        return out


class VectorCache:
    """Per-store cache of :class:`VectorMatrix` objects, rebuilt when the file changed.

    ``bump()`` is called by the store after each of its own commits; the
    cache compares ``(data_version, bumps)`` with the pair it was built at.
    ``index`` (:data:`INDEX_CHOICES`) says whether a matrix of at least
    ``ann_threshold`` live rows gets an approximate index (:mod:`.vector_ann`),
    built on a daemon thread unless ``background`` is false, and saved next to
    the database file unless ``persist`` is false or ``index`` is ``"memory"``
    (:mod:`.vector_ann_file`: the
    next process loads it rather than building it again); ``max_bytes``
    (None: :data:`ANN_MAX_BYTES` when such an index can be kept, else
    :data:`MAX_MATRIX_BYTES`) bounds a kept matrix.
    """

    def __init__(
        self,
        max_bytes: int | None = None,
        *,
        index: str = "auto",
        ann_threshold: int = ANN_THRESHOLD,
        background: bool = True,
        persist: bool = True,
    ) -> None:
        """An empty cache; matrices are read on first use. ``ValueError`` for a bad ``index``."""
        if index not in INDEX_CHOICES:
            raise ValueError(f"'vector_index' must be one of {INDEX_CHOICES} (got {index!r})")
        self.index = index
        self.ann = index != "exact" and usearch_installed()
        self.ann_threshold = ann_threshold
        self.background = background
        self.persist = persist and index == "auto"
        if max_bytes is None:
            max_bytes = ANN_MAX_BYTES if self.ann else MAX_MATRIX_BYTES
        self.max_bytes = max_bytes
        self._indexes: dict[tuple[str, int], AnnIndex] = {}
        self._lock = threading.RLock()
        self._bumps = 0
        self._matrices: dict[tuple[str, int], VectorMatrix] = {}
        # (namespace, dim) whose matrix would hold more than max_bytes.
        self._big: dict[tuple[str, int], int] = {}  # and their rows
        # (data_version, bumps) per (read connection, matrix) when it last saw the matrix current.
        self._seen: dict[tuple[int, str, int], tuple[int, int]] = {}
        self._loads = vector_load.Loads()  # large matrices read in the background

    def _landed(self, key: tuple[str, int], m: VectorMatrix) -> None:
        """A matrix read in the background (the caller holds the lock)."""
        self._matrices[key] = m
        self._big.pop(key, None)

    def bump(self) -> None:
        """Note a commit made by this store (needed where reads share the writer's connection)."""
        with self._lock:
            self._bumps += 1

    def clear(self) -> None:
        """Drop every matrix (the next recall reads the vectors again)."""
        with self._lock:
            self._matrices.clear()
            self._big.clear()
            self._seen.clear()
            self._loads.cancel()
            for ann in self._indexes.values():
                ann.stop()
            self._indexes.clear()

    def scope(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        scope: VectorScope,
        query_vec: Sequence[float],
    ) -> ScopeVectors | None:
        """The query's cosines over the scope's embedded rows; None without numpy.

        Runs inside the recall's read transaction, so the version read here
        and the rows read here are of the same snapshot.
        """
        _np = numpy_or_none()
        if _np is None:  # pragma: no cover - exercised only without numpy
            return None
        dim = len(query_vec)
        q = _np.asarray(query_vec, dtype=_np.float32)
        qn = float(_np.linalg.norm(q))
        with self._lock:
            m = self._matrix(conn, namespace, dim)
            if m is None:  # reads the scope from the file, unless that is too much
                vector_load.refuse_scan(namespace, dim, self._big.get((namespace, dim), 0), scope)
                return None
            unit = q / qn if qn > 0.0 else None
            ann = self._index(conn, namespace, m)
            if unit is None:
                return ExactScope(m, unit, scope, self._lock)
            if scope.session_id is None:
                share = 1.0
            else:
                rows = m.session_rows(scope)
                share = len(rows) / max(m.n if ann is None else len(ann), 1)
                if (ann is not None and len(rows) <= NARROW_ROWS) or share < NARROW_SHARE:
                    return ExactScope(m, unit, scope, self._lock, narrow=True, rows=rows)
            if ann is None:
                return ExactScope(m, unit, scope, self._lock)
            return AnnScope(
                ann, unit, scope, self._lock, share, lambda: ExactScope(m, unit, scope, self._lock)
            )

    def _index(self, conn: sqlite3.Connection, namespace: str, m: VectorMatrix) -> AnnIndex | None:
        """The ready approximate index of ``m``, started here when ``m`` is big enough;
        None while it builds, below the threshold, or without ``usearch`` (the caller
        holds the lock)."""
        if not self.ann:
            return None
        key = (namespace, m.dim)
        ann = self._indexes.get(key)
        if ann is not None and ann.matrix is not m:
            ann.stop()  # the matrix was read again: its slots are not the graph's
            ann = None
        if ann is None:
            if int(m.live.sum()) < self.ann_threshold:
                self._indexes.pop(key, None)
                return None
            if usearch_or_none() is None:  # installed but not importable: scan exactly
                self.ann = False
                return None
            path = graph_path(conn, namespace, m.dim) if self.persist else None
            ann = self._indexes[key] = AnnIndex(m, background=self.background, path=path)
        return ann if ann.ready else None

    def _matrix(self, conn: sqlite3.Connection, namespace: str, dim: int) -> VectorMatrix | None:
        """The current matrix for this connection's snapshot (the caller holds the lock);
        None when it would hold more than :attr:`max_bytes` (the caller scans instead)."""
        version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self._bumps)
        seen = (id(conn), namespace, dim)
        key = (namespace, dim)
        cached = self._matrices.get(key)
        if self._seen.get(seen) == version and (cached is not None or key in self._big):
            return cached
        head = log_position(conn)
        built: VectorMatrix | None
        rows = 0
        if cached is not None and patch_from_log(conn, cached, namespace, head, PATCH_MAX):
            built = cached
        else:
            self._seen = {k: v for k, v in self._seen.items() if k[1:] != key}
            count = rows = rows_to_read(conn, namespace, dim, self.max_bytes // row_bytes(dim))
            later = self.background and vector_load.is_large(conn, namespace, count)
            path = database_file(conn) if later else None
            if int(count) * row_bytes(dim) > self.max_bytes:
                built = None
            elif path is not None:  # seconds of reading: never inside a turn
                raise self._loads.later(path, key, count, self._landed, self._lock)
            else:
                built = read_matrix(conn, namespace, dim, head)
        if built is not None and len(built.rids) * row_bytes(dim) > self.max_bytes:
            rows, built = len(built.rids), None  # grown past the bound by patches
        if built is None:
            self._matrices.pop(key, None)
            self._big[key] = rows
            dropped = self._indexes.pop(key, None)
            if dropped is not None:
                dropped.stop()
        else:
            self._matrices[key] = built
            self._big.pop(key, None)
        self._seen[seen] = version
        return built
