"""The single-row writes of :class:`~memory_inject.storage.postgres.PostgresStore`, as steps.

Each is a generator of statements (:data:`~memory_inject.storage.postgres.connection.Steps`)
that the engine's sync driver runs in one transaction: the upsert that refuses
a live row of another scope, and supersede, which locks the old row, writes
the new one and points the old one at it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.storage._base import owned
from memory_inject.storage.postgres.connection import Steps
from memory_inject.storage.postgres.queries import Queries
from memory_inject.storage.postgres.schema import record_params, row_to_record
from memory_inject.storage.records import MemoryRecord

__all__ = ["supersede_steps", "upsert_steps"]


def upsert_steps(
    q: Queries, record: MemoryRecord, keep: Sequence[str], move: bool = False, what: str = "store"
) -> Steps[MemoryRecord]:
    """Insert ``record`` or update the row under its key (``keep``'s columns keep theirs).

    :class:`~memory_inject.exceptions.KeyOwnedError` when the key's live row
    belongs to another scope, unless ``move``.
    """
    rows = yield q.upsert(record_params(record), keep, move)
    if not rows:  # the statement's guard: the key's live row is another scope's
        raise owned(record.key, what)
    return row_to_record(rows[0])


def supersede_steps(q: Queries, old_key: str, new: MemoryRecord) -> Steps[MemoryRecord]:
    """Write ``new`` as the successor of the live row under ``old_key``.

    ``KeyError`` when no live row has that key;
    :class:`~memory_inject.exceptions.KeyOwnedError` when it is another session's.
    """
    rows = yield q.lock_live(old_key)
    if not rows:
        raise KeyError(old_key)
    if rows[0][1] != new.session_id:
        raise owned(old_key, "supersede")
    old_id = str(rows[0][0])
    new = new.evolve(supersedes=tuple(dict.fromkeys((*new.supersedes, old_id))))
    written = yield from upsert_steps(q, new, ())
    yield q.set_superseded_by(old_id, written.id)
    return written
