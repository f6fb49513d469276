"""Which files an open store writes to, and the check that they are still at its path (F6).

SQLite keeps writing to the files it opened. Once the database file, its write-ahead
log (``-wal``) or its WAL index (``-shm``) is deleted or replaced (a restore, a ``mv``,
a cleanup job), writes land in an unlinked inode and are lost at the next open (a
crash never checkpoints the unlinked log), although each one returned.
:class:`OpenFiles` remembers what was opened; :meth:`OpenFiles.check` refuses a write
when the path holds something else.
"""

from __future__ import annotations

import os

from memory_inject.exceptions import StoreMissingError

__all__ = ["OpenFiles", "file_id"]

_SIDES = ("-wal", "-shm")


def file_id(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class OpenFiles:
    """The database file at ``path`` (None: in memory) and its log files, as opened."""

    __slots__ = ("_main", "_path", "_sides")

    def __init__(self, path: str | None) -> None:
        """Read the identities now, once the connection has opened the files."""
        self._path = path
        self._main = None if path is None else file_id(path)
        self._sides = () if path is None else tuple((s, file_id(path + s)) for s in _SIDES)

    def check(self, label: str, what: str) -> None:
        """Raise :class:`StoreMissingError` (``label: what: ...``) when a file changed."""
        if self._path is None or self._main is None:
            return
        if file_id(self._path) != self._main:
            raise StoreMissingError(
                f"{label}: {what}: the database file was deleted or replaced while the "
                "store was open; nothing was written (open the store again)"
            )
        for suffix, known in self._sides:
            if known is not None and file_id(self._path + suffix) != known:
                raise StoreMissingError(
                    f"{label}: {what}: its {suffix} file was deleted or replaced while "
                    "the store was open; nothing was written (close the store and open it "
                    "again: a clean close keeps what was written before)"
                )
