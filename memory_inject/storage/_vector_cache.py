"""The SQLite store's in-memory vector matrix: one float32 array per namespace and size.

Reading every stored vector of the scope on every hybrid recall cost more
than the rest of the recall together (the blobs, then a fresh array, then the
norms). The matrix of a namespace's embedded rows is read once, kept with its
rows' unit vectors, and reused until the file changes. A change is seen
through two counters, read on the connection that recalls:

* ``PRAGMA data_version``, which changes when *another* connection (this
  store's writer, another store or another process) commits;
* the store's own write count, for a ``:memory:`` database whose reads share
  the writer's connection (there ``data_version`` does not move on its own
  commits).

The scope (live rows, session, time range) is still SQLite's business: each
recall asks for the rids the scope keeps, which reads no vector, and the
matrix answers only for those.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from memory_inject.embedders import numpy_or_none

__all__ = ["ScopeVectors", "VectorCache"]


class _Matrix:
    """The embedded rows of one namespace, unit-normalised, in rid order."""

    __slots__ = ("ids", "matrix", "position", "rids")

    def __init__(self, rids: list[int], ids: list[str], matrix: Any) -> None:
        """Row ``i`` of ``matrix`` is the unit vector of ``rids[i]`` / ``ids[i]``."""
        self.rids = rids
        self.ids = ids
        self.matrix = matrix
        self.position = {rid: i for i, rid in enumerate(rids)}


class ScopeVectors:
    """One query's cosines over the rows of its scope, from the cached matrix.

    ``low`` and ``high`` are the least and greatest cosine in the scope (0.0
    for an empty scope); :meth:`top` the best rows; :meth:`cosines` the cosine
    of given ids (the keyword stage's hits), for fusions that need both.
    """

    __slots__ = ("_by_id", "_ids", "_sims", "high", "low")

    def __init__(self, ids: list[str], sims: Any) -> None:
        """``sims[i]`` is the cosine of the row ``ids[i]``."""
        self._ids = ids
        self._sims = sims
        self._by_id: dict[str, int] | None = None
        self.low = float(sims.min()) if len(ids) else 0.0
        self.high = float(sims.max()) if len(ids) else 0.0

    def __len__(self) -> int:
        """How many rows of the scope have a vector."""
        return len(self._ids)

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs, best first, ties by id."""
        _np = numpy_or_none()
        n = len(self._ids)
        if k <= 0 or n == 0:
            return []
        sims = self._sims
        if k < n:
            part = _np.argpartition(-sims, k - 1)[:k]
            # Widen to every row tied with the k-th so the id tie-break is exact.
            part = _np.nonzero(sims >= sims[part].min())[0]
        else:
            part = _np.arange(n)
        order = sorted(part.tolist(), key=lambda i: (-float(sims[i]), self._ids[i]))
        return [(self._ids[i], float(sims[i])) for i in order[:k]]

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""
        if self._by_id is None:
            self._by_id = {key: i for i, key in enumerate(self._ids)}
        by_id, sims = self._by_id, self._sims
        return {key: float(sims[by_id[key]]) for key in ids if key in by_id}


class VectorCache:
    """Per-store cache of :class:`_Matrix` objects, rebuilt when the file changed.

    ``bump()`` is called by the store after each of its own commits; the
    cache compares ``(data_version, bumps)`` with the pair it was built at.
    """

    def __init__(self) -> None:
        """An empty cache; matrices are read on first use."""
        self._lock = threading.Lock()
        self._bumps = 0
        self._matrices: dict[tuple[str, int], tuple[tuple[int, int], _Matrix]] = {}

    def bump(self) -> None:
        """Note a commit made by this store (needed where reads share the writer's connection)."""
        with self._lock:
            self._bumps += 1

    def clear(self) -> None:
        """Drop every matrix (the next recall reads the vectors again)."""
        with self._lock:
            self._matrices.clear()

    def scope(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        scope: str,
        params: Sequence[Any],
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
        m = self._matrix(conn, namespace, dim)
        sql = (
            f"SELECT rid FROM memories WHERE namespace = ? AND {scope} "  # noqa: S608
            "AND embedding IS NOT NULL AND length(embedding) = ?"
        )
        pos = m.position
        keep = [pos[r] for (r,) in conn.execute(sql, (namespace, *params, 4 * dim)) if r in pos]
        q = _np.asarray(query_vec, dtype=_np.float32)
        qn = float(_np.linalg.norm(q))
        if not keep:
            return ScopeVectors([], _np.zeros(0, dtype=_np.float32))
        rows = _np.asarray(keep, dtype=_np.intp)
        every = m.matrix @ (q / qn) if qn > 0.0 else _np.zeros(len(m.ids), dtype=_np.float32)
        return ScopeVectors([m.ids[i] for i in keep], every[rows])

    def _matrix(self, conn: sqlite3.Connection, namespace: str, dim: int) -> _Matrix:
        version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self._bumps)
        with self._lock:
            cached = self._matrices.get((namespace, dim))
        if cached is not None and cached[0] == version:
            return cached[1]
        built = _read(conn, namespace, dim)
        with self._lock:
            self._matrices[(namespace, dim)] = (version, built)
        return built


def _read(conn: sqlite3.Connection, namespace: str, dim: int) -> _Matrix:
    _np = numpy_or_none()
    rows = conn.execute(
        "SELECT rid, id, embedding FROM memories WHERE namespace = ? AND deleted_at IS NULL "
        "AND embedding IS NOT NULL AND length(embedding) = ? ORDER BY rid",
        (namespace, 4 * dim),
    ).fetchall()
    if not rows:
        return _Matrix([], [], _np.zeros((0, dim), dtype=_np.float32))
    matrix = _np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), dim)
    norms = _np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    unit = _np.ascontiguousarray(matrix / norms, dtype=_np.float32)
    return _Matrix([int(r[0]) for r in rows], [str(r[1]) for r in rows], unit)
