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
same rules as the store's SQL scope; a test holds the two together).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from attrs import frozen

from memory_inject.embedders import numpy_or_none

__all__ = [
    "MAX_MATRIX_BYTES",
    "LogPosition",
    "ScopeVectors",
    "VectorCache",
    "VectorScope",
    "log_position",
    "logged_since",
]

#: A place in ``memories_log``: its ``seq`` and that entry's random ``stamp``
#: (schema 7; None for an empty log or an entry written before the stamps).
LogPosition = tuple[int, int | None]

#: A namespace's matrix is kept only while it holds at most this many bytes
#: (:func:`row_bytes` a row: about 340,000 rows of 384 dimensions); a larger
#: one is not kept, and its recalls read the scope's vectors from the file.
MAX_MATRIX_BYTES = 256 << 20


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


#: The columns a matrix row is built from (the build and the patch read the same).
_ROW = "rid, id, embedding, session_id, category, timestamp, expires_at, superseded_by"
#: Past this many changed rows a matrix is read again rather than patched.
PATCH_MAX = 1024


class _Matrix:
    """The embedded, not forgotten rows of one namespace: unit vectors and scope columns.

    Rows sit in slots; a row that changes or goes is dropped from its slot
    (``live`` false, vector zeroed) and a changed row that is still in the
    namespace takes a free slot, so a write costs the changed rows, not a new
    matrix. Sessions and categories are kept as integer codes of the exact
    strings (numpy text arrays drop trailing NULs, which would let a session
    ``"alice\\x00"`` match ``"alice"``). ``seq`` is the ``memories_log``
    position the matrix is current at.
    """

    __slots__ = (
        "by_rid",
        "category",
        "codes",
        "dim",
        "expires",
        "free",
        "gen",
        "has_session",
        "ids",
        "live",
        "matrix",
        "n",
        "nonfinite",
        "position",
        "rids",
        "seq",
        "session",
        "superseded",
        "timestamp",
    )

    def __init__(self, rows: list[Any], dim: int, seq: LogPosition) -> None:
        """``rows`` hold ``_ROW``: rid, id, embedding and the scope columns."""
        _np = numpy_or_none()
        self.dim = dim
        self.seq = seq
        self.gen = 0  # moves with every patch: slots may hold other rows after it
        self.n = len(rows)
        self.codes: dict[str, int] = {}
        self.ids: list[str | None] = [str(r[1]) for r in rows]
        self.rids = [int(r[0]) for r in rows]
        self.position = {key: i for i, key in enumerate(self.ids) if key is not None}
        self.by_rid = {rid: i for i, rid in enumerate(self.rids)}
        self.free: list[int] = []
        if rows:
            raw = _np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(self.n, dim)
            finite = _np.isfinite(raw).all(axis=1)
            # A stored vector that is not finite (written around the checks) is never
            # scored: its row keeps its slot and scope columns, so it can be counted.
            self.matrix = _unit(_np.where(finite[:, None], raw, 0.0))
        else:
            finite = _np.ones(0, dtype=bool)
            self.matrix = _np.zeros((0, dim), dtype=_np.float32)
        self.nonfinite = ~finite
        self.live = finite.copy()
        self.has_session = _np.array([r[3] is not None for r in rows], dtype=bool)
        self.session = _np.array([self._code(r[3]) for r in rows], dtype=_np.int64)
        self.category = _np.array([self._code(r[4]) for r in rows], dtype=_np.int64)
        self.timestamp = _np.array([r[5] or "" for r in rows], dtype=str)
        self.expires = _np.array([r[6] or "" for r in rows], dtype=str)
        self.superseded = _np.array([r[7] is not None for r in rows], dtype=bool)

    def _code(self, value: str | None) -> int:
        return self.codes.setdefault("" if value is None else str(value), len(self.codes))

    def mask(self, scope: VectorScope) -> Any:
        """True for the rows ``scope`` keeps (the store's SQL scope, in numpy)."""
        return self.live & self.in_scope(scope)

    def skipped(self, scope: VectorScope) -> int:
        """How many rows of ``scope`` hold a vector that is not finite (never scored)."""
        if not self.nonfinite.any():
            return 0
        return int((self.nonfinite & self.in_scope(scope)).sum())

    def in_scope(self, scope: VectorScope) -> Any:
        """True for the slots whose scope columns ``scope`` keeps, live or not."""
        _np = numpy_or_none()
        keep = ~self.superseded & ((self.expires == "") | (self.expires > scope.now))
        if scope.session_id is not None:
            code = self.codes.get(scope.session_id)
            if code is None:
                mine = _np.zeros(self.n, dtype=bool)
            else:
                mine = self.has_session & (self.session == code)
            shared = [self.codes[c] for c in scope.shared if c in self.codes]
            if shared:
                mine |= ~self.has_session & _np.isin(self.category, shared)
            keep &= mine
        if scope.since is not None:
            keep &= self.timestamp >= scope.since
        if scope.until is not None:
            keep &= self.timestamp <= scope.until
        return keep

    def patch(self, rows: list[Any], rids: Sequence[int], namespace: str, seq: LogPosition) -> None:
        """Apply the changed rows: ``rows`` are what ``rids`` now hold (``_ROW``,
        namespace, deleted_at); a rid with no row was deleted."""
        for rid in rids:
            slot = self.by_rid.get(rid)
            if slot is not None:
                self._drop(slot)
        for r in rows:
            blob = r[2]
            if r[8] != namespace or r[9] is not None or blob is None or len(blob) != 4 * self.dim:
                continue
            moved = self.position.get(str(r[1]))
            if moved is not None:  # the same id under another rid: the newer row wins
                self._drop(moved)
            self._put(r)
        self.seq = seq
        self.gen += 1

    def _drop(self, slot: int) -> None:
        self.live[slot] = False
        self.nonfinite[slot] = False
        self.matrix[slot] = 0.0
        key = self.ids[slot]
        if key is not None and self.position.get(key) == slot:
            del self.position[key]
        if self.by_rid.get(self.rids[slot]) == slot:
            del self.by_rid[self.rids[slot]]
        self.ids[slot] = None
        self.free.append(slot)

    def _put(self, r: Any) -> None:
        _np = numpy_or_none()
        if not self.free:
            self._grow()
        slot = self.free.pop()
        raw = _np.frombuffer(r[2], dtype="<f4").reshape(1, self.dim)
        finite = bool(_np.isfinite(raw).all())
        self.matrix[slot] = _unit(raw)[0] if finite else 0.0
        key, rid = str(r[1]), int(r[0])
        self.ids[slot], self.rids[slot] = key, rid
        self.position[key] = slot
        self.by_rid[rid] = slot
        self.live[slot] = finite
        self.nonfinite[slot] = not finite
        self.has_session[slot] = r[3] is not None
        self.session[slot] = self._code(r[3])
        self.category[slot] = self._code(r[4])
        self.timestamp = _set_text(self.timestamp, slot, r[5] or "")
        self.expires = _set_text(self.expires, slot, r[6] or "")
        self.superseded[slot] = r[7] is not None

    def _grow(self) -> None:
        """Free slots at the end, a quarter more at a time (numpy arrays are copied)."""
        _np = numpy_or_none()
        extra = max(64, self.n // 4)
        self.matrix = _np.concatenate([self.matrix, _np.zeros((extra, self.dim), _np.float32)])
        self.live = _np.concatenate([self.live, _np.zeros(extra, dtype=bool)])
        self.nonfinite = _np.concatenate([self.nonfinite, _np.zeros(extra, dtype=bool)])
        self.has_session = _np.concatenate([self.has_session, _np.zeros(extra, dtype=bool)])
        self.session = _np.concatenate([self.session, _np.zeros(extra, dtype=_np.int64)])
        self.category = _np.concatenate([self.category, _np.zeros(extra, dtype=_np.int64)])
        self.timestamp = _np.concatenate([self.timestamp, _np.zeros(extra, self.timestamp.dtype)])
        self.expires = _np.concatenate([self.expires, _np.zeros(extra, self.expires.dtype)])
        self.superseded = _np.concatenate([self.superseded, _np.zeros(extra, dtype=bool)])
        self.ids.extend([None] * extra)
        self.rids.extend([-1] * extra)
        self.free.extend(range(self.n + extra - 1, self.n - 1, -1))  # lowest slot first
        self.n += extra


def _unit(raw: Any) -> Any:
    _np = numpy_or_none()
    norms = _np.linalg.norm(raw, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return _np.ascontiguousarray(raw / norms, dtype=_np.float32)


def _set_text(arr: Any, slot: int, value: str) -> Any:
    """``arr[slot] = value``, widening the array first if the text would be cut."""
    if len(value) > arr.dtype.itemsize // 4:
        arr = arr.astype(f"<U{len(value)}")
    arr[slot] = value
    return arr


class ScopeVectors:
    """One query's cosines over the rows of its scope, from the cached matrix.

    ``low`` and ``high`` are the least and greatest cosine in the scope (0.0
    for an empty scope); :meth:`top` the best rows; :meth:`cosines` the cosine
    of given ids (the keyword stage's hits), for fusions that need both. The
    matrix may be patched by another read connection after this was scored:
    each look takes the cache's lock and scores again if it was.
    """

    __slots__ = (
        "_gen",
        "_keep",
        "_lock",
        "_m",
        "_q",
        "_scope",
        "_sims",
        "count",
        "high",
        "low",
        "skipped",
    )

    def __init__(
        self, m: _Matrix, q: Any, scope: VectorScope, lock: threading.RLock | None = None
    ) -> None:
        """Score the unit query ``q`` over ``m`` within ``scope`` (the caller holds ``lock``)."""
        self._m = m
        self._q = q
        self._scope = scope
        self._lock = lock if lock is not None else threading.RLock()
        self._score()
        #: Rows of the scope whose stored vector is not finite (never scored).
        self.skipped = m.skipped(scope)
        keep, sims = self._keep, self._sims
        self.count = int(keep.sum())
        inside = sims[keep]
        self.low = float(inside.min()) if self.count else 0.0
        self.high = float(inside.max()) if self.count else 0.0

    def _score(self) -> None:
        _np = numpy_or_none()
        m = self._m
        # einsum, not ``@``: a matrix-vector product through BLAS may start a
        # thread pool, whose spinning threads cost 10+ ms on a busy machine.
        if self._q is not None:
            self._sims = _np.einsum("ij,j->i", m.matrix, self._q)
        else:
            self._sims = _np.zeros(m.n, dtype=_np.float32)
        self._keep = m.mask(self._scope)
        self._gen = m.gen

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
            pairs = [(str(ids[int(rows[i])]), float(sims[i])) for i in part.tolist()]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs[:k]

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""
        with self._lock:
            self._current()
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

    def __init__(self, max_bytes: int = MAX_MATRIX_BYTES) -> None:
        """An empty cache; matrices are read on first use."""
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self._bumps = 0
        self._matrices: dict[tuple[str, int], _Matrix] = {}
        # (namespace, dim) whose matrix would hold more than max_bytes.
        self._big: set[tuple[str, int]] = set()
        # (data_version, bumps) per (read connection, matrix) when it last saw the matrix current.
        self._seen: dict[tuple[int, str, int], tuple[int, int]] = {}

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
            if m is None:
                return None
            return ScopeVectors(m, q / qn if qn > 0.0 else None, scope, self._lock)

    def _matrix(self, conn: sqlite3.Connection, namespace: str, dim: int) -> _Matrix | None:
        """The current matrix for this connection's snapshot (the caller holds the lock);
        None when it would hold more than :attr:`max_bytes` (the caller scans instead)."""
        version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self._bumps)
        seen = (id(conn), namespace, dim)
        key = (namespace, dim)
        cached = self._matrices.get(key)
        if self._seen.get(seen) == version and (cached is not None or key in self._big):
            return cached
        head = log_position(conn)
        built: _Matrix | None
        if cached is not None and _patched(conn, cached, namespace, head):
            built = cached
        else:
            self._seen = {k: v for k, v in self._seen.items() if k[1:] != key}
            count = conn.execute(
                "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL "
                "AND embedding IS NOT NULL AND length(embedding) = ?",
                (namespace, 4 * dim),
            ).fetchone()[0]
            if int(count) * row_bytes(dim) > self.max_bytes:
                built = None
            else:
                rows = conn.execute(
                    f"SELECT {_ROW} FROM memories WHERE namespace = ? "  # noqa: S608 - constants
                    "AND deleted_at IS NULL AND embedding IS NOT NULL AND length(embedding) = ? "
                    "ORDER BY rid",
                    (namespace, 4 * dim),
                ).fetchall()
                built = _Matrix(rows, dim, head)
        if built is not None and len(built.rids) * row_bytes(dim) > self.max_bytes:
            built = None  # grown past the bound by patches
        if built is None:
            self._matrices.pop(key, None)
            self._big.add(key)
        else:
            self._matrices[key] = built
            self._big.discard(key)
        self._seen[seen] = version
        return built


def row_bytes(dim: int) -> int:
    """About what one row costs in a matrix of ``dim``: its unit vector (float32), its
    id and rid, and its scope columns."""
    return 4 * dim + 200


def log_position(conn: sqlite3.Connection) -> LogPosition:
    """The newest ``memories_log`` entry as a :data:`LogPosition` (``(0, None)`` when empty)."""
    row = conn.execute("SELECT seq, stamp FROM memories_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, None) if row is None else (int(row[0]), row[1])


def logged_since(
    conn: sqlite3.Connection, since: LogPosition, head: LogPosition, cap: int
) -> list[int] | None:
    """The rids logged after ``since`` up to ``head``; None when a cache at ``since`` must rebuild.

    None when the log went back (a file replaced under the store), when the
    entry at ``since`` is not the one the cache saw (its stamp differs: a
    history that diverged, such as a backup restored into the live file, even
    one that went further), when entries after it were pruned, or when more
    than ``cap`` rows changed.
    """
    seq, stamp = since
    if head == since:
        return []
    if head[0] < seq:
        return None
    if stamp is not None or seq > 0:
        row = conn.execute("SELECT stamp FROM memories_log WHERE seq = ?", (seq,)).fetchone()
        if row is None or row[0] != stamp:
            return None
    if head[0] == seq:  # the same entry, another stamp: caught above
        return []
    first = conn.execute("SELECT min(seq) FROM memories_log").fetchone()[0]
    if first is None or int(first) > seq + 1:
        return None
    rids = [
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT rid FROM memories_log WHERE seq > ? LIMIT ?", (seq, cap + 1)
        )
    ]
    return None if len(rids) > cap else rids


def _patched(conn: sqlite3.Connection, m: _Matrix, namespace: str, head: LogPosition) -> bool:
    """Bring ``m`` to ``head`` from the log; False when it must be read again instead."""
    rids = logged_since(conn, m.seq, head, PATCH_MAX)
    if rids is None:
        return False
    if not rids:
        return True
    rows = conn.execute(
        f"SELECT {_ROW}, namespace, deleted_at FROM memories "  # noqa: S608 - constants
        "WHERE rid IN (SELECT value FROM json_each(?))",
        (json.dumps(rids),),
    ).fetchall()
    m.patch(rows, rids, namespace, head)
    return True
