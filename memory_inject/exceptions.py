"""The one exception tree of memory_inject.

::

    MemoryInjectError
    ├── ConfigError            bad YAML or bad values; raised at load time, never mid-turn
    └── StorageError           a store could not do what was asked (wraps the driver error)
        ├── StoreMissingError  the database does not exist and could not be created
        ├── StoreCorruptError  the file is not a database, or fails its schema check
        ├── StoreLockedError   another writer holds the lock past the retry
        ├── SchemaMismatchError  the schema is newer than this library, or not ours
        ├── PgvectorUnusableError  pgvector is installed but fails its smoke query
        └── EmbedderError      the embedder raised or returned the wrong shape

A memory failure never fails the agent's turn: the renderer swallows every
``StorageError`` (and any other exception from a store) and reports it on the
``memory_recall`` event with ``success=False``. Write paths do raise, because a
write that returned must be durable.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ConfigError",
    "EmbedderError",
    "KeyOwnedError",
    "MemoryInjectError",
    "PgvectorUnusableError",
    "RecallInterruptedError",
    "RecallWaitError",
    "SchemaMismatchError",
    "StorageError",
    "StoreCorruptError",
    "StoreLockedError",
    "StoreMissingError",
]


#: How many problems a ConfigError's message lists (``.problems`` keeps them all).
_SHOWN = 50


class MemoryInjectError(Exception):
    """Base of every error this library raises on purpose."""


class ConfigError(MemoryInjectError, ValueError):
    """A configuration file or value is invalid.

    ``problems`` holds one line per problem, each naming the file, the key
    and the path: ``alice.yaml: 'max_entries' must be >= 0 (got -1) @ $.memory.budget``.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        """``source`` (usually the file) prefixes each problem; the message lists the first 50."""
        self.source = source
        self.problems: tuple[str, ...] = tuple(f"{source}: {p}" for p in problems)
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''}:"
        shown = [f"  - {p}" for p in self.problems[:_SHOWN]]
        if n > _SHOWN:
            shown.append(f"  - ... and {n - _SHOWN} more (all of them in .problems)")
        super().__init__("\n".join([head, *shown]))


class StorageError(MemoryInjectError):
    """A store failed. ``reason`` is a short machine-readable cause."""

    reason = "storage_error"


class StoreMissingError(StorageError):
    """The database is not there and cannot be opened or created (``reason`` ``"missing"``).

    Also raised for an empty database opened with ``create=False``.
    """

    reason = "missing"


class StoreCorruptError(StorageError):
    """The file is not a database, or lacks tables its schema needs (``reason`` ``"corrupt"``)."""

    reason = "corrupt"


class StoreLockedError(StorageError):
    """The database stayed locked (``reason`` ``"locked"``).

    SQLite: still locked after the busy timeout and one retry. PostgreSQL: the
    lock timeout passed, or a deadlock or serialization failure.
    """

    reason = "locked"


class SchemaMismatchError(StorageError):
    """The schema is newer than this library, or not ours (``reason`` ``"schema_mismatch"``).

    "Not ours": a SQLite file or PostgreSQL table that some other program made.
    """

    reason = "schema_mismatch"


class PgvectorUnusableError(StorageError):
    """pgvector is installed on the server but cannot compute a distance.

    Raised when a store opens, never mid-turn. The usual cause is a pgvector
    built for another CPU (``-march=native`` on an AVX-512 machine), whose
    backends die with SIGILL and take every other connection down with them.
    """

    reason = "pgvector_unusable"


class EmbedderError(StorageError):
    """The embedder failed (``reason`` ``"embedder_failed"``).

    It could not be built or loaded, it raised, or it returned the wrong number
    of vectors, vectors of the wrong dimension, or NaN/inf values.
    """

    reason = "embedder_failed"


class RecallInterruptedError(StorageError):
    """A store stopped its own call at the turn's deadline (``reason`` ``"deadline"``).

    Raised inside :meth:`~memory_inject.contract.SupportsInterrupt.interrupt_at`
    only; the render reports it as a deadline (``partial``), not as a failure.
    """

    reason = "deadline"


class RecallWaitError(RecallInterruptedError):
    """The turn's deadline passed while a call waited for a connection or a worker.

    The call never started (``reason`` ``"wait"``). ``note`` is the event's
    degraded line: it names what was waited for (``connection_wait: ...``,
    ``pool_wait: ...``), so a turn that never ran its recall is not reported
    as a recall abandoned at the deadline.
    """

    reason = "wait"

    def __init__(self, note: str) -> None:
        """``note`` names the wait and how long it lasted."""
        super().__init__(note)
        self.note = note


class KeyOwnedError(MemoryInjectError, ValueError):
    """A write or forget was refused: the key's live row belongs to another scope.

    A row belongs to its scope: its namespace and session (or no session: the
    shared rows). A write from one scope never replaces, moves or forgets a row
    of another; nothing was changed. ``reason`` is ``"key_owned"``. The
    message never names the other scope.
    """

    reason = "key_owned"
