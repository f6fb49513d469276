"""Issue 29: a vector matrix keeps room past its rows, so the first writes copy nothing.

At 1M rows of 256 dimensions the first write after the matrix was read made the next
recall copy the whole 1 GB matrix (0.6 to 2.9 s). The matrix is now a view of a larger
room, allocated but untouched, and new slots come from it; these tests check the slots,
vectors and scope columns against a matrix read afresh.
"""

from __future__ import annotations

import random
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from memory_inject.embedders import HashingEmbedder  # noqa: E402
from memory_inject.storage.sqlite import SQLiteStore  # noqa: E402
from memory_inject.storage.sqlite import vector_matrix as _matrix_mod  # noqa: E402
from memory_inject.storage.sqlite import vectors as _vectors  # noqa: E402
from memory_inject.storage.sqlite.vector_matrix import VectorMatrix, unit_rows  # noqa: E402
from memory_inject.storage.sqlite.vectors import VectorCache  # noqa: E402

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
    names = ("matrix", "live", "session", "timestamp", "superseded")
    before = {name: getattr(m, name) for name in names}
    new = [_row(r, rng, "s1") for r in range(401, 451)]
    m.patch(list(new), [r[0] for r in new], "default", (1, None))
    assert len(m.matrix) == len(m.timestamp) == 400 + 100  # a quarter more slots
    for name in names:  # the same memory: nothing was copied
        assert np.shares_memory(before[name], getattr(m, name)), name
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


@pytest.mark.parametrize(
    ("bound_rows", "read"),
    [
        (1000, True),  # the rids' span fits: no count at all
        (40, True),  # the span (70 rows, two namespaces) does not, the namespace's 30 rows do
        (20, False),  # the namespace's rows do not fit: recalls read from the file
    ],
)
def test_the_rid_span_decides_only_when_it_fits(
    tmp_path: Path, bound_rows: int, read: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A matrix is read when its rows fit the bound. The rids' span (two index lookups)
    answers when it fits; past it, the namespace's rows are counted."""
    path = tmp_path / "m.db"
    with SQLiteStore(path, embedder=HashingEmbedder(_DIM), namespace="other") as other:
        for i in range(40):
            other.store(f"o{i}", f"other row {i}")
    counts: list[str] = []
    real = _matrix_mod.rows_to_read

    def spy(conn: sqlite3.Connection, namespace: str, dim: int, limit: int) -> int:
        conn.set_trace_callback(counts.append)
        try:
            return real(conn, namespace, dim, limit)
        finally:
            conn.set_trace_callback(None)

    monkeypatch.setattr(_vectors, "rows_to_read", spy)
    with SQLiteStore(path, embedder=HashingEmbedder(_DIM)) as store:
        for i in range(30):
            store.store(f"k{i}", f"row {i} about apples")
        cache = VectorCache(max_bytes=bound_rows * _vectors.row_bytes(_DIM), index="exact")
        store._engine._vectors = cache
        found = store.recall_where("apples row 3", 5, mode="semantic")
        assert found and all(e.key.startswith("k") for e in found)
        assert (("default", _DIM) in cache._matrices) is read
    counted = any("count(*)" in sql for sql in counts)
    assert counted is (bound_rows < 70)


def test_a_matrix_read_in_blocks_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 64 rows over 300 (a non-finite vector in the third): the same vectors,
    bit for bit, and the same rows marked not finite."""
    monkeypatch.setattr(_matrix_mod, "_BLOCK_BYTES", 1)
    rng = random.Random(4)
    rows = [_row(r, rng)[:8] for r in range(1, 301)]
    bad = struct.pack(f"<{_DIM}f", 1.0, float("nan"), *([0.5] * (_DIM - 2)))
    rows[150] = (rows[150][0], rows[150][1], bad, *rows[150][3:])
    m = VectorMatrix(rows, _DIM, (0, None))
    raw = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), _DIM)
    finite = np.isfinite(raw).all(axis=1)
    assert np.array_equal(m.matrix, unit_rows(np.where(finite[:, None], raw, 0.0)))
    assert list(np.flatnonzero(m.nonfinite)) == [150]
    assert not m.live[150] and m.live.sum() == 299


def test_a_widened_text_column_moves_and_keeps_its_rows() -> None:
    """A timestamp longer than the column's width widens it (a new array); the next
    growth moves it to a new room with every value."""
    rng = random.Random(5)
    rows = [_row(r, rng)[:8] for r in range(1, 101)]
    m = VectorMatrix(rows, _DIM, (0, None))
    new = [_row(r, rng) for r in range(101, 400)]  # grows four times
    # Widened after the second growth, whose room is larger than its rows.
    new[120] = (*new[120][:5], "2026-12-06T00:00:00.000000Z and then some", *new[120][6:])
    m.patch(list(new), [r[0] for r in new], "default", (1, None))
    _same(m, VectorMatrix([*rows, *(r[:8] for r in new)], _DIM, (1, None)))
