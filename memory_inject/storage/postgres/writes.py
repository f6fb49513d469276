"""The single-row writes of :class:`~memory_inject.storage.postgres.PostgresStore`, as steps.

Each is a generator of statements (:data:`~memory_inject.storage.postgres.connection.Steps`)
that the engine's sync driver runs in one transaction: the upsert that refuses
a live row of another scope, the forget, and supersede, which locks the old row,
writes the new one and points the old one at it. Each takes its streams' locks
first and gives the rows whose neighbours it changed their context again
(:mod:`.neighbours`) before it commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_inject.storage._base import owned
from memory_inject.storage.postgres import neighbours as nb
from memory_inject.storage.postgres.connection import Steps
from memory_inject.storage.postgres.queries import Queries, Stmt
from memory_inject.storage.postgres.schema import COLUMNS, record_params, row_to_record
from memory_inject.storage.records import MemoryRecord

__all__ = ["forget_steps", "supersede_steps", "upsert_steps", "usage_steps"]


def _lock(q: Queries, keys: Sequence[str], new: MemoryRecord | None = None) -> Stmt:
    """:func:`.neighbours.lock_streams` of the rows under ``keys`` and of ``new``."""
    row = None
    if new is not None:
        row = {
            "session_id": new.session_id,
            "category": str(new.category),
            "profile_id": new.profile_id,
        }
    return nb.lock_streams(q.t, q.names.table, q.ns, keys, row)


def upsert_steps(
    q: Queries,
    record: MemoryRecord,
    keep: Sequence[str],
    move: bool = False,
    what: str = "store",
    locked: set[int] | None = None,
) -> Steps[MemoryRecord]:
    """Insert ``record`` or update the row under its key (``keep``'s columns keep theirs).

    :class:`~memory_inject.exceptions.KeyOwnedError` when the key's live row
    belongs to another scope, unless ``move``. A row that was held (an update, a
    revive, a move) and the rows that took context from it get context afresh.
    ``locked``: the stream keys the caller locked (else this locks them).
    """
    if locked is None:
        locked = {int(r[0]) for r in (yield _lock(q, (record.key,), record))}
    rows = yield q.upsert(record_params(record), keep, move)
    if not rows:  # the statement's guard: the key's live row is another scope's
        raise owned(record.key, what)
    n = len(COLUMNS)
    inserted, before = rows[0][n + 1], rows[0][n + 2]
    if before is None and not inserted:
        raise nb.StreamMoved(record.key)  # a row came in after the lock: run again
    if before is not None:
        if int(before[-1]) not in locked:
            raise nb.StreamMoved(record.key)
        place = (before[0], record.key, *before[1:-1])
        kinds = {nb.kind(record.session_id, record.layer), nb.kind(before[1], before[4])}
        yield nb.refresh_rows(q.t, q.ns, [record.key], kinds, [place])
    return row_to_record(rows[0][:n])


def forget_steps(
    q: Queries, key: str, scope: tuple[list[str], bool, tuple[str, ...] | None] | None
) -> Steps[bool]:
    """Soft-delete the live row under ``key`` in ``scope``; the rows that took context from
    it get theirs again. True when a row was forgotten."""
    locked = {int(r[0]) for r in (yield _lock(q, (key,)))}
    rows = yield nb.forget(q.t, q.names.table, q.ns, key, scope)
    if any(int(row[1]) not in locked for row in rows):
        raise nb.StreamMoved(key)
    if rows:
        kinds = {nb.kind(row[2], row[3]) for row in rows}
        yield nb.refresh_rows(q.t, q.ns, [str(row[0]) for row in rows], kinds)
    return bool(rows)


def supersede_steps(q: Queries, old_key: str, new: MemoryRecord) -> Steps[MemoryRecord]:
    """Write ``new`` as the successor of the live row under ``old_key``.

    ``KeyError`` when no live row has that key;
    :class:`~memory_inject.exceptions.KeyOwnedError` when it is another session's.
    """
    # Every stream this touches is locked before any row is.
    locked = {int(r[0]) for r in (yield _lock(q, (old_key, new.key), new))}
    rows: list[Any] = yield q.lock_live(old_key)
    if not rows:
        raise KeyError(old_key)
    if rows[0][1] != new.session_id:
        raise owned(old_key, "supersede")
    old_id = str(rows[0][0])
    new = new.evolve(supersedes=tuple(dict.fromkeys((*new.supersedes, old_id))))
    written = yield from upsert_steps(q, new, (), locked=locked)
    yield q.set_superseded_by(old_id, written.id)
    return written


def usage_steps(q: Queries, ids: Sequence[str]) -> Steps[int]:
    """Count one use of each live row in ``ids``; the rows counted.

    The namespace's shared lock comes first, as for every write: an import takes it alone
    before its merge locks rows in its file's order, and then its context refresh locks
    their neighbours, so an update of several rows that held one of them while waiting for
    another ended one of the two with "deadlock detected" (a helper's import of 3,000 rows
    beside four ``mark_used`` loops: 11 in 30 s, and not one import went through).
    """
    yield nb.lock_namespace(q.t, q.names.table, q.ns, shared=True)
    return int((yield q.mark_used(list(ids))))
