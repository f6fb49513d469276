"""The SQLite store's in-memory vector matrix: one float32 array per namespace and size.

Reading every stored vector of the scope on every hybrid recall cost more
than the rest of the recall together: at 10k rows, walking the rows to apply
the scope alone took tens of milliseconds, the blobs, a fresh array and the
norms as much again. The namespace's embedded rows are read once, kept as
unit vectors with the few columns the scope reads (session, category,
timestamp, expiry, superseded), and reused until the file changes. A change
is seen through two counters, read on the connection that recalls:

* ``PRAGMA data_version``, which changes when *another* connection (this
  store's writer, another store or another process) commits;
* the store's own write count, for a ``:memory:`` database whose reads share
  the writer's connection (there ``data_version`` does not move on its own
  commits).

The scope is applied to those columns in numpy (:class:`VectorScope`, the
same rules as the store's SQL scope; a test holds the two together).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from attrs import frozen

from memory_inject.embedders import numpy_or_none

__all__ = ["ScopeVectors", "VectorCache", "VectorScope"]


@frozen(slots=True)
class VectorScope:
    """Which rows a recall may return, as the store's SQL scope says it.

    Live at ``now`` (not superseded, not expired; forgotten rows are never
    cached); with ``session_id``, that session's rows plus the sessionless
    rows of the ``shared`` categories; ``since`` / ``until`` bound the
    timestamp. Timestamps are the store's fixed-width UTC text.
    """

    now: str
    session_id: str | None = None
    shared: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None


class _Matrix:
    """The embedded, not forgotten rows of one namespace: unit vectors and scope columns."""

    __slots__ = (
        "category",
        "expires",
        "has_session",
        "ids",
        "matrix",
        "position",
        "session",
        "superseded",
        "timestamp",
    )

    def __init__(self, rows: list[Any], dim: int) -> None:
        """``rows`` are ``(id, embedding, session, category, timestamp, expires, superseded)``."""
        _np = numpy_or_none()
        self.ids = [str(r[0]) for r in rows]
        self.position = {key: i for i, key in enumerate(self.ids)}
        if rows:
            raw = _np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), dim)
            norms = _np.linalg.norm(raw, axis=1, keepdims=True)
            norms[norms == 0.0] = 1.0
            self.matrix = _np.ascontiguousarray(raw / norms, dtype=_np.float32)
        else:
            self.matrix = _np.zeros((0, dim), dtype=_np.float32)
        self.has_session = _np.array([r[2] is not None for r in rows], dtype=bool)
        self.session = _np.array([r[2] or "" for r in rows], dtype=str)
        self.category = _np.array([r[3] or "" for r in rows], dtype=str)
        self.timestamp = _np.array([r[4] or "" for r in rows], dtype=str)
        self.expires = _np.array([r[5] or "" for r in rows], dtype=str)
        self.superseded = _np.array([r[6] is not None for r in rows], dtype=bool)

    def mask(self, scope: VectorScope) -> Any:
        """True for the rows ``scope`` keeps (the store's SQL scope, in numpy)."""
        _np = numpy_or_none()
        keep = ~self.superseded & ((self.expires == "") | (self.expires > scope.now))
        if scope.session_id is not None:
            mine = self.has_session & (self.session == scope.session_id)
            if scope.shared:
                mine |= ~self.has_session & _np.isin(self.category, list(scope.shared))
            keep &= mine
        if scope.since is not None:
            keep &= self.timestamp >= scope.since
        if scope.until is not None:
            keep &= self.timestamp <= scope.until
        return keep


class ScopeVectors:
    """One query's cosines over the rows of its scope, from the cached matrix.

    ``low`` and ``high`` are the least and greatest cosine in the scope (0.0
    for an empty scope); :meth:`top` the best rows; :meth:`cosines` the cosine
    of given ids (the keyword stage's hits), for fusions that need both.
    """

    __slots__ = ("_keep", "_m", "_sims", "count", "high", "low")

    def __init__(self, m: _Matrix, sims: Any, keep: Any) -> None:
        """``sims`` holds every cached row's cosine, ``keep`` which rows are in the scope."""
        self._m = m
        self._sims = sims
        self._keep = keep
        self.count = int(keep.sum())
        inside = sims[keep]
        self.low = float(inside.min()) if self.count else 0.0
        self.high = float(inside.max()) if self.count else 0.0

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs of the scope, best first, ties by id."""
        _np = numpy_or_none()
        if k <= 0 or self.count == 0:
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
        pairs = [(ids[int(rows[i])], float(sims[i])) for i in part.tolist()]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:k]

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""
        position, keep, sims = self._m.position, self._keep, self._sims
        out = {}
        for key in ids:
            i = position.get(key)
            if i is not None and keep[i]:
                out[key] = float(sims[i])
        return out


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
        m = self._matrix(conn, namespace, dim)
        q = _np.asarray(query_vec, dtype=_np.float32)
        qn = float(_np.linalg.norm(q))
        # einsum, not ``@``: a matrix-vector product through BLAS may start a
        # thread pool, whose spinning threads cost 10+ ms on a busy machine.
        if qn > 0.0:
            sims = _np.einsum("ij,j->i", m.matrix, q / qn)
        else:
            sims = _np.zeros(len(m.ids), dtype=_np.float32)
        return ScopeVectors(m, sims, m.mask(scope))

    def _matrix(self, conn: sqlite3.Connection, namespace: str, dim: int) -> _Matrix:
        version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self._bumps)
        with self._lock:
            cached = self._matrices.get((namespace, dim))
        if cached is not None and cached[0] == version:
            return cached[1]
        rows = conn.execute(
            "SELECT id, embedding, session_id, category, timestamp, expires_at, superseded_by "
            "FROM memories WHERE namespace = ? AND deleted_at IS NULL "
            "AND embedding IS NOT NULL AND length(embedding) = ? ORDER BY rid",
            (namespace, 4 * dim),
        ).fetchall()
        built = _Matrix(rows, dim)
        with self._lock:
            self._matrices[(namespace, dim)] = (version, built)
        return built
