"""How the SQLite store names what went wrong: driver errors and damaged rows.

A driver error becomes the :class:`~memory_inject.exceptions.StorageError`
subclass that says what happened (locked, corrupt, missing); a row whose
columns cannot be decoded is skipped or read as empty and noted for this
thread, and the recall that met it says so (``damaged_rows: ...``) on its
:class:`~memory_inject.storage.fusion.RecallInfo`.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading

import attrs

from memory_inject.exceptions import (
    StorageError,
    StoreCorruptError,
    StoreLockedError,
    StoreMissingError,
)
from memory_inject.storage.fusion import RecallInfo

__all__ = [
    "DamagedRowError",
    "is_locked",
    "note_damaged",
    "out_of_files",
    "take_damaged",
    "with_damaged",
    "wrap_error",
]


def is_locked(exc: sqlite3.Error) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def wrap_error(exc: sqlite3.Error, what: str) -> StorageError:
    """The :class:`StorageError` subclass for a driver error (raise it ``from exc``)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    message = f"{what}: {exc}"
    if is_locked(exc):
        return StoreLockedError(f"{what}: database is locked (after one retry): {exc}")
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT) or "not a database" in str(exc):
        return StoreCorruptError(message)
    if code == sqlite3.SQLITE_CANTOPEN:
        if (full := out_of_files()) is not None:
            # The file is there: the process (or the system) has no file left to open it.
            return StorageError(f"{what}: {full.strerror} (no file descriptor left): {exc}")
        return StoreMissingError(message)
    return StorageError(message)


def out_of_files() -> OSError | None:
    """The error opening one more file gives when the process or the system has no file
    descriptor left (``EMFILE``, ``ENFILE``); None when one can be opened.

    SQLite says only "unable to open database file" (``SQLITE_CANTOPEN``) for that, as
    for a missing file, which sent an operator looking for a deleted database.
    """
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError as exc:
        return exc if exc.errno in (errno.EMFILE, errno.ENFILE) else None
    os.close(fd)
    return None


class DamagedRowError(ValueError):
    """A row whose columns cannot be decoded (JSON edited by hand, a foreign writer...)."""


_damaged = threading.local()


def note_damaged(what: str) -> None:
    """Note a damaged row for this thread's next :func:`take_damaged` (the last 10 kept)."""
    skipped: list[str] = getattr(_damaged, "rows", [])
    _damaged.rows = [*skipped[-9:], what]


def take_damaged() -> list[str]:
    """The damaged rows this thread's fetches skipped since the last call (at most 10)."""
    rows: list[str] = getattr(_damaged, "rows", [])
    _damaged.rows = []
    return rows


def with_damaged(info: RecallInfo) -> RecallInfo:
    """``info`` naming the rows this thread's recall could not decode (``damaged_rows: ...``)."""
    damaged = take_damaged()
    if not damaged:
        return info
    note = "damaged_rows: " + "; ".join(damaged)
    return attrs.evolve(info, degraded=f"{info.degraded}; {note}" if info.degraded else note)
