"""Which files an open store writes to, and the check that they are still whole (F6).

SQLite keeps writing to the files it opened. Once the database file, its write-ahead
log (``-wal``) or its WAL index (``-shm``) is deleted or replaced (a restore, a ``mv``,
a cleanup job), writes land in an unlinked inode and are lost at the next open (a
crash never checkpoints the unlinked log), although each one returned.
:class:`OpenFiles` remembers what was opened; :meth:`OpenFiles.check` refuses a write
when the path holds something else.

A file truncated in place keeps its inode, so it needs a check of its own
(:meth:`OpenFiles.damage`: the ``-shm`` file before every read, both before every write
and after a read's error):

* the ``-shm`` file is mapped into memory by SQLite, and touching a mapped page past
  the end of a truncated file kills the process with ``SIGBUS``. While a connection
  holds it, SQLite never shrinks it (only the first opener resets it), so a size under
  the index's first region (32 KiB) or under the largest size seen is damage;
* the ``-wal`` file may be emptied or shortened by another process's checkpoint
  (``wal_checkpoint(TRUNCATE)``, ``journal_size_limit``), but SQLite always resets the
  index's header (frame count 0, new salts) before it cuts the log. So a log shorter
  than the frames the header counts, with the same header before and after the
  ``stat``, lost committed frames: reads would fail with ``disk I/O error`` and writes
  would append after a hole that no restart can read, each one returned.

The header is read with ``pread`` on SQLite's own descriptor of the ``-shm`` file,
found once in ``/dev/fd``: a descriptor of our own could not be closed without
dropping every POSIX lock SQLite holds on the file in this process.
"""

from __future__ import annotations

import contextlib
import os
import struct

from memory_inject.exceptions import StoreCorruptError, StoreMissingError

__all__ = ["SHM_REGION", "OpenFiles", "file_id"]

_SIDES = ("-wal", "-shm")
#: SQLite maps its WAL index in regions of this size, the header in the first one.
SHM_REGION = 32 * 1024
#: Two copies of the 48-byte WAL-index header (``WalIndexHdr``), in native byte order:
#: version, unused, change counter, isInit, bigEndCksum, page size, mxFrame.
_HDR = struct.Struct("=IIIBBHI")
_HDR_SIZE = 48
#: A log's header, and each frame's header before its page.
_WAL_HDR = 32
_FRAME_HDR = 24


def file_id(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _find_fd(ident: tuple[int, int] | None) -> int | None:
    """A descriptor this process already has open on the file ``ident`` (SQLite's)."""
    if ident is None:
        return None
    try:
        names = os.listdir("/dev/fd")
    except OSError:
        return None
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            st = os.fstat(int(name))
            if (st.st_dev, st.st_ino) == ident:
                return int(name)
    return None


def _stat(
    fd: int | None, ident: tuple[int, int] | None, path: str
) -> tuple[os.stat_result | None, int | None]:
    """The status of the file ``ident``, by ``fd`` or else at ``path`` (None when neither
    is that file: gone, or replaced, F6's case), and ``fd`` if it still is that file."""
    for how in (fd, path):
        if how is None:
            continue
        try:
            st = os.stat(how)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == ident:
            return st, fd if how == fd else None
    return None, None


def _grow(fd: int, size: int) -> None:
    """Make the file ``fd`` at least ``size`` bytes long, zeros at the end; never shorter."""
    with contextlib.suppress(OSError):
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        elif os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)


class OpenFiles:
    """The database file at ``path`` (None: in memory) and its log files, as opened."""

    __slots__ = (
        "_damage",
        "_main",
        "_path",
        "_shm_fd",
        "_shm_id",
        "_shm_size",
        "_sides",
        "_wal_fd",
        "_wal_id",
    )

    def __init__(self, path: str | None) -> None:
        """Read the identities now, once the connection has opened the files."""
        self._path = path
        self._main = None if path is None else file_id(path)
        self._sides = () if path is None else tuple((s, file_id(path + s)) for s in _SIDES)
        ids = dict(self._sides)
        self._wal_id, self._shm_id = ids.get("-wal"), ids.get("-shm")
        # SQLite's own descriptors (an fstat is half a path's stat), None if not found.
        self._shm_fd = _find_fd(self._shm_id)
        self._wal_fd = _find_fd(self._wal_id)
        self._shm_size = SHM_REGION
        # The first damage seen: it stays until the store is opened again.
        self._damage: str | None = None

    def check(self, label: str, what: str) -> None:
        """Raise :class:`StoreMissingError` (``label: what: ...``) when a file changed,
        :class:`StoreCorruptError` when one was truncated (:meth:`damage`)."""
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
        if (damage := self.damage(label, what)) is not None:
            raise damage

    def damage(self, label: str, what: str, *, log: bool = True) -> StoreCorruptError | None:
        """The :class:`StoreCorruptError` to raise when the ``-shm`` file (and, with
        ``log``, the ``-wal`` file) was truncated under the store, found before SQLite
        touches either; None when they are whole. Once seen, damage stays (until the
        store is opened again).

        Reads leave out the log (two system calls fewer): a read of a frame past a cut
        fails in SQLite, without harm, and the read's error asks again with ``log``.
        """
        if self._path is None or self._main is None:
            return None
        if self._damage is None:
            self._damage = self._shm_cut() or (self._wal_cut() if log else None)
            if self._damage is None:
                return None
        return StoreCorruptError(
            f"{label}: {what}: {self._damage}; nothing was read or written (close the "
            "store and open it again)"
        )

    def _shm_cut(self) -> str | None:
        # A descriptor that is no longer SQLite's is dropped: no header is read from it.
        st, fd = _stat(self._shm_fd, self._shm_id, f"{self._path}-shm")
        self._shm_fd = fd
        if st is None:
            return None
        if st.st_size >= self._shm_size:
            self._shm_size = st.st_size
            return None
        if fd is not None:
            # Zeros where the index was, not a hole: a thread already past this check (or
            # SQLite's close) reads an empty header and rebuilds it from the log, where
            # it would have died of SIGBUS. The file only ever grows here.
            _grow(fd, self._shm_size)
        return (
            f"its -shm file (SQLite's WAL index, mapped in memory) was truncated from "
            f"{self._shm_size} to {st.st_size} bytes while the store was open"
        )

    def _header(self) -> bytes | None:
        """The index's header while both copies agree (None: unknown, or being written)."""
        fd = self._shm_fd
        if fd is None:
            return None
        try:
            raw = os.pread(fd, 2 * _HDR_SIZE, 0)
        except OSError:
            return None
        if len(raw) < 2 * _HDR_SIZE or raw[:_HDR_SIZE] != raw[_HDR_SIZE:]:
            return None
        return raw[:_HDR_SIZE]

    def _wal_cut(self) -> str | None:
        before = self._header()
        if before is None:
            return None
        _, _, _, init, _, page, frames = _HDR.unpack_from(before)
        if not init or not frames:
            return None
        st, self._wal_fd = _stat(self._wal_fd, self._wal_id, f"{self._path}-wal")
        if st is None:
            return None
        page = (page & 0xFE00) + ((page & 0x0001) << 16)
        need = _WAL_HDR + frames * (_FRAME_HDR + page)
        if st.st_size >= need or self._header() != before:
            # Long enough, or the header changed meanwhile: a checkpoint restarted the
            # log (it resets the header before it cuts the file).
            return None
        return (
            f"its -wal file was truncated to {st.st_size} bytes while the store was open, "
            f"but its index counts {frames} committed frames ({need} bytes): what was "
            "written since the last checkpoint is lost"
        )
