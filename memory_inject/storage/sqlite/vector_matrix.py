"""One namespace's embedded rows as a numpy matrix: unit vectors, scope columns, slots.

:class:`VectorMatrix` is what :class:`~.vectors.VectorCache` keeps per
namespace and vector size; :class:`VectorScope` says which rows a recall may
return, with the rules of the store's SQL scope, applied to the matrix's
scope columns in numpy. A matrix also says which of its slots changed
(``touched``) to an approximate index kept next to it (:mod:`.vector_ann`), and
:func:`patch_from_log` brings it up to date from ``memories_log``.
:class:`Scored` is what a recall reads of one query's cosines over a matrix,
exact (:class:`~.vectors.ExactScope`) or not (:class:`~.vector_ann.AnnScope`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from attrs import frozen

from memory_inject.embedders import numpy_or_none
from memory_inject.storage.sqlite.changes import LogPosition, logged_since

__all__ = [
    "MATRIX_ROW",
    "Scored",
    "VectorMatrix",
    "VectorScope",
    "patch_from_log",
    "read_matrix",
    "row_bytes",
    "rows_to_read",
    "set_text",
    "unit_rows",
]


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


class Scored(Protocol):
    """What the recall reads of one query's cosines over its scope (exact or not)."""

    @property
    def skipped(self) -> int:
        """Rows of the scope whose stored vector is not finite (never scored)."""

    @property
    def low(self) -> float:
        """The least cosine of the scope (0.0 when it is empty)."""

    @property
    def high(self) -> float:
        """The greatest cosine of the scope (0.0 when it is empty)."""

    def top(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, cosine)`` pairs of the scope, best first, ties by id."""

    def cosines(self, ids: Iterable[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is in the scope and embedded."""


#: The columns a matrix row is built from (the build and the patch read the same).
MATRIX_ROW = "rid, id, embedding, session_id, category, timestamp, expires_at, superseded_by"


class VectorMatrix:
    """The embedded, not forgotten rows of one namespace: unit vectors and scope columns.

    Rows sit in slots; a row that changes or goes is dropped from its slot
    (``live`` false, vector zeroed) and a changed row that is still in the
    namespace takes a free slot, so a write costs the changed rows, not a new
    matrix. ``touched`` is None until an index next to the matrix asks to
    follow it; then every slot a patch drops or fills is added to it until the
    index has taken it (:meth:`.vector_ann.AnnIndex.sync`). Sessions and
    categories are kept as integer codes of the exact strings (numpy text
    arrays drop trailing NULs, which would let a session
    ``"alice\\x00"`` match ``"alice"``). ``seq`` is the ``memories_log``
    position the matrix is current at.
    """

    __slots__ = (
        "_rooms",
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
        "touched",
    )

    def __init__(self, rows: list[Any], dim: int, seq: LogPosition) -> None:
        """``rows`` hold ``MATRIX_ROW``: rid, id, embedding and the scope columns."""
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
        self.touched: set[int] | None = None
        # Room past the rows, allocated but not touched (no memory until written): the
        # first writes after a large matrix is read take it instead of copying the matrix.
        room = _np.zeros((self.n + _room_for(self.n), dim), dtype=_np.float32)
        self._rooms: dict[str, Any] = {"matrix": room}
        self.matrix = room[: self.n]
        finite = _np.ones(self.n, dtype=bool)
        # In blocks: the same numbers as one pass, without temporaries the matrix's size
        # (at 1M rows of 256 dimensions the norms alone took 3 s in one pass).
        step = max(64, _BLOCK_BYTES // (4 * dim))
        for i in range(0, self.n, step):
            part = rows[i : i + step]
            raw = _np.frombuffer(b"".join(r[2] for r in part), dtype="<f4").reshape(-1, dim)
            # A stored vector that is not finite (written around the checks) is never
            # scored: its row keeps its slot and scope columns, so it can be counted.
            ok = finite[i : i + len(part)] = _np.isfinite(raw).all(axis=1)
            unit_rows(_np.where(ok[:, None], raw, 0.0), out=self.matrix[i : i + len(part)])
        self.nonfinite = ~finite
        self.live = finite.copy()
        self.has_session = _np.array([r[3] is not None for r in rows], dtype=bool)
        self.session = _np.array([self._code(r[3]) for r in rows], dtype=_np.int64)
        self.category = _np.array([self._code(r[4]) for r in rows], dtype=_np.int64)
        self.timestamp = _np.array([r[5] or "" for r in rows], dtype=str)
        self.expires = _np.array([r[6] or "" for r in rows], dtype=str)
        self.superseded = _np.array([r[7] is not None for r in rows], dtype=bool)
        for name in _GROWN[1:]:  # the scope columns get room too
            column = getattr(self, name)
            room = _np.zeros(self.n + _room_for(self.n), dtype=column.dtype)
            room[: self.n] = column
            self._rooms[name] = room
            setattr(self, name, room[: self.n])

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

    def in_scope(self, scope: VectorScope, rows: Any = None) -> Any:
        """True for the slots whose scope columns ``scope`` keeps, live or not; with
        ``rows`` (an array of slots), for those slots only, in their order."""
        _np = numpy_or_none()

        def col(a: Any) -> Any:
            return a if rows is None else a[rows]

        expires = col(self.expires)
        keep = ~col(self.superseded) & ((expires == "") | (expires > scope.now))
        if scope.session_id is not None:
            code = self.codes.get(scope.session_id)
            has_session = col(self.has_session)
            if code is None:
                mine = _np.zeros(len(keep), dtype=bool)
            else:
                mine = has_session & (col(self.session) == code)
            shared = [self.codes[c] for c in scope.shared if c in self.codes]
            if shared:
                mine |= ~has_session & _np.isin(col(self.category), shared)
            keep &= mine
        if scope.since is not None:
            keep &= col(self.timestamp) >= scope.since
        if scope.until is not None:
            keep &= col(self.timestamp) <= scope.until
        return keep

    def session_rows(self, scope: VectorScope) -> Any:
        """The live slots a session scope may keep (its session's rows and the
        sessionless rows of its shared categories), before expiry and time bounds;
        every live slot for a scope without a session. Integer compares only: the
        text columns are read just for the rows found."""
        _np = numpy_or_none()
        if scope.session_id is None:
            return _np.flatnonzero(self.live)
        picked = []
        code = self.codes.get(scope.session_id)
        if code is not None:
            found = _np.flatnonzero(self.session == code)
            picked.append(found[self.has_session[found]])
        for name in scope.shared:
            shared = self.codes.get(name)
            if shared is not None:
                found = _np.flatnonzero(self.category == shared)
                picked.append(found[~self.has_session[found]])
        if not picked:
            return _np.zeros(0, dtype=_np.int64)
        rows = _np.unique(_np.concatenate(picked))
        return rows[self.live[rows]]

    def patch(self, rows: list[Any], rids: Sequence[int], namespace: str, seq: LogPosition) -> None:
        """Apply the changed rows: ``rows`` are what ``rids`` now hold (``MATRIX_ROW``,
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
        if self.touched is not None:
            self.touched.add(slot)
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
        if self.touched is not None:
            self.touched.add(slot)
        raw = _np.frombuffer(r[2], dtype="<f4").reshape(1, self.dim)
        finite = bool(_np.isfinite(raw).all())
        self.matrix[slot] = unit_rows(raw)[0] if finite else 0.0
        key, rid = str(r[1]), int(r[0])
        self.ids[slot], self.rids[slot] = key, rid
        self.position[key] = slot
        self.by_rid[rid] = slot
        self.live[slot] = finite
        self.nonfinite[slot] = not finite
        self.has_session[slot] = r[3] is not None
        self.session[slot] = self._code(r[3])
        self.category[slot] = self._code(r[4])
        self.timestamp = set_text(self.timestamp, slot, r[5] or "")
        self.expires = set_text(self.expires, slot, r[6] or "")
        self.superseded[slot] = r[7] is not None

    def _grow(self) -> None:
        """Free slots at the end, a quarter more at a time, taken from each array's room (a
        view: nothing copied) while it has it, else from a larger room the array moves to
        (a 1M-row matrix of 256 dimensions took 0.6 to 2.9 s to copy, its columns about
        0.1 s). A text column widened since (``set_text``) moves too."""
        _np = numpy_or_none()
        extra = _room_for(self.n)
        size = self.n + extra
        for name in _GROWN:
            column, room = getattr(self, name), self._rooms.get(name)
            if room is None or len(room) < size or column.base is not room:
                room = _np.zeros((size + _room_for(size), *column.shape[1:]), column.dtype)
                room[: self.n] = column
                self._rooms[name] = room
            setattr(self, name, room[:size])
        self.ids.extend([None] * extra)
        self.rids.extend([-1] * extra)
        self.free.extend(range(self.n + extra - 1, self.n - 1, -1))  # lowest slot first
        self.n += extra


def unit_rows(raw: Any, out: Any = None) -> Any:
    """``raw``'s rows scaled to length 1 (a zero row stays zero), as contiguous float32;
    written into ``out`` (float32, ``raw``'s shape) when given."""
    _np = numpy_or_none()
    norms = _np.linalg.norm(raw, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    if out is None:
        return _np.ascontiguousarray(raw / norms, dtype=_np.float32)
    return _np.divide(raw, norms, out=out, casting="same_kind")


def read_matrix(
    conn: sqlite3.Connection, namespace: str, dim: int, head: LogPosition
) -> VectorMatrix:
    """``namespace``'s embedded, not forgotten rows with a ``dim``-sized vector, read in
    ``conn``'s snapshot, whose ``memories_log`` position is ``head``."""
    rows = conn.execute(
        f"SELECT {MATRIX_ROW} FROM memories WHERE namespace = ? "  # noqa: S608 - constants
        "AND deleted_at IS NULL AND embedding IS NOT NULL AND length(embedding) = ? "
        "ORDER BY rid",
        (namespace, 4 * dim),
    ).fetchall()
    return VectorMatrix(rows, dim, head)


def row_bytes(dim: int) -> int:
    """About what one row costs in a matrix of ``dim``: its unit vector (float32), its
    id and rid, and its scope columns."""
    return 4 * dim + 200


#: How many rids the table spans (None when empty): two index lookups.
_RID_SPAN = "SELECT (SELECT max(rid) FROM memories) - (SELECT min(rid) FROM memories) + 1"


def rows_to_read(conn: sqlite3.Connection, namespace: str, dim: int, limit: int) -> int:
    """How many rows a matrix of ``namespace``'s ``dim``-vectors holds, or a bound of it
    that is at most ``limit``: rids are unique integers, so their span bounds the rows,
    and only a span past ``limit`` pays for the exact count (it reads every row: 0.7 to
    0.9 s at 1M)."""
    span = int(conn.execute(_RID_SPAN).fetchone()[0] or 0)
    if span <= limit:
        return span
    return int(
        conn.execute(
            "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL "
            "AND embedding IS NOT NULL AND length(embedding) = ?",
            (namespace, 4 * dim),
        ).fetchone()[0]
    )


#: The arrays a matrix keeps a slot in, each with room past its rows (the vectors first).
_GROWN = tuple(
    "matrix live nonfinite has_session session category timestamp expires superseded".split()
)

#: Bytes of vectors a matrix is read in at a time: a block's temporaries stay small
#: enough to be reused rather than mapped afresh (65,536 rows of 256 dimensions, 64 MB,
#: took about 3 s at 1M rows; 2,048 rows 0.7-0.8 s).
_BLOCK_BYTES = 2 << 20


def _room_for(n: int) -> int:
    """How many free slots a matrix of ``n`` slots makes at a time: a quarter more."""
    return max(64, n // 4)


def set_text(arr: Any, slot: int, value: str) -> Any:
    """``arr[slot] = value``, widening the array first if the text would be cut."""
    if len(value) > arr.dtype.itemsize // 4:
        arr = arr.astype(f"<U{len(value)}")
    arr[slot] = value
    return arr


def patch_from_log(
    conn: sqlite3.Connection, m: VectorMatrix, namespace: str, head: LogPosition, cap: int
) -> bool:
    """Bring ``m`` to ``head`` from ``memories_log``; False when it must be read again
    instead (the log does not reach back, or more than ``cap`` rows changed)."""
    rids = logged_since(conn, m.seq, head, cap)
    if rids is None:
        return False
    if not rids:
        return True
    rows = conn.execute(
        f"SELECT {MATRIX_ROW}, namespace, deleted_at FROM memories "  # noqa: S608 - constants
        "WHERE rid IN (SELECT value FROM json_each(?))",
        (json.dumps(rids),),
    ).fetchall()
    m.patch(rows, rids, namespace, head)
    return True
