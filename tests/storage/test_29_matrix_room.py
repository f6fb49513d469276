"""Issue 29: a vector matrix keeps room past its rows, so the first writes copy nothing.

At 1M rows of 256 dimensions the first write after the matrix was read made the next
recall copy the whole 1 GB matrix (0.6 to 2.9 s). The matrix is now a view of a larger
room, allocated but untouched, and new slots come from it; these tests check the slots,
vectors and scope columns against a matrix read afresh.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from memory_inject.storage.sqlite.vector_matrix import VectorMatrix, unit_rows  # noqa: E402

_DIM = 8


def _row(rid: int, rng: random.Random, session: str | None = None) -> tuple[Any, ...]:
    """A ``MATRIX_ROW`` with the namespace and ``deleted_at`` a patch reads after it."""
    vec = [rng.uniform(-1, 1) for _ in range(_DIM)]
    blob = struct.pack(f"<{_DIM}f", *vec)
    ts = f"2026-12-06T00:00:{rid % 60:02d}.000000Z"
    return (rid, f"k{rid}", blob, session, "core", ts, None, None, "default", None)


def _same(a: VectorMatrix, b: VectorMatrix) -> None:
    """Equal rows in the same order: the live slots of ``a`` against every slot of ``b``."""
    slots = list(np.flatnonzero(a.live))
    assert [a.rids[s] for s in slots] == b.rids
    assert [a.ids[s] for s in slots] == b.ids
    assert np.array_equal(a.matrix[slots], b.matrix)
    assert np.array_equal(a.has_session[slots], b.has_session)
    names_a = {code: name for name, code in a.codes.items()}
    names_b = {code: name for name, code in b.codes.items()}
    assert [names_a[int(c)] for c in a.session[slots]] == [names_b[int(c)] for c in b.session]
    assert [str(t) for t in a.timestamp[slots]] == [str(t) for t in b.timestamp]


def test_the_first_new_rows_take_the_room_without_a_copy() -> None:
    rng = random.Random(1)
    rows = [_row(r, rng) for r in range(1, 401)]
    m = VectorMatrix([r[:8] for r in rows], _DIM, (0, None))
    before = m.matrix
    new = [_row(r, rng, "s1") for r in range(401, 451)]
    m.patch(list(new), [r[0] for r in new], "default", (1, None))
    assert len(m.matrix) == 400 + 100  # a quarter more slots, as before the room
    assert np.shares_memory(before, m.matrix)  # the same memory: nothing was copied
    _same(m, VectorMatrix([r[:8] for r in rows + new], _DIM, (1, None)))


def test_past_the_room_the_matrix_moves_and_keeps_every_row() -> None:
    rng = random.Random(2)
    rows = [_row(r, rng) for r in range(1, 101)]
    m = VectorMatrix([r[:8] for r in rows], _DIM, (0, None))
    first = m.matrix
    written = list(rows)
    for step in range(12):  # 12 x 40 new rows: past the room of 100 + 64
        new = [
            _row(r, rng, f"s{step % 3}") for r in range(1000 * (step + 1), 1000 * (step + 1) + 40)
        ]
        m.patch(list(new), [r[0] for r in new], "default", (step + 1, None))
        written += new
    assert not np.shares_memory(first, m.matrix)
    _same(m, VectorMatrix([r[:8] for r in written], _DIM, (99, None)))
    # The slots past the rows are free and zero: never scored, never live.
    free = sorted(m.free)
    assert free and not m.live[free].any() and not m.matrix[free].any()


def test_the_room_holds_the_unit_vectors_read_would_make() -> None:
    rng = random.Random(3)
    rows = [_row(r, rng) for r in range(1, 50)]
    rows.append(
        (50, "zero", struct.pack(f"<{_DIM}f", *([0.0] * _DIM)), None, "core", "", None, None)
    )
    m = VectorMatrix(rows, _DIM, (0, None))
    raw = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), _DIM)
    assert np.array_equal(m.matrix, unit_rows(raw))
    assert m.matrix.dtype == np.float32 and m.matrix.flags["C_CONTIGUOUS"]
    assert not m.matrix[-1].any()  # a zero vector stays zero
