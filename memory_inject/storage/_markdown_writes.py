"""The write path of ``MarkdownStore``: the folder's lock, and the order files are replaced in.

**The lock.** A write holds an advisory ``flock`` (where ``fcntl`` exists) on the
folder itself and on its ``.lock`` file. The folder's lock is the one a cleanup
cannot take away: ``.lock`` is an untracked file, and ``git clean -fdx`` on a
notes repository deleted it while a writer held it, so the next writer created
a new ``.lock``, locked that one at once and wrote alongside the first (84 of
300 acknowledged writes were lost). ``.lock`` is still taken, for a process of
an older release, which locks only it. Each lock is checked after ``flock``
returns: the file locked must still be the one at its path (device and inode),
else it was deleted or replaced while this process waited, and the lock is
taken again. A file system whose ``flock`` refuses a folder (NFS) has ``.lock`` only.

**The order.** A memory stored again into another file (``core`` to ``daily``,
another day, a supersession whose new memory lands in another file) changes
two files, and each is replaced atomically, one after the other. The files
were written in name order, so ``MEMORY.md`` lost the block before the daily
file had it: a kill or a full disk in between lost the key, or left a memory
superseded by one that did not exist. Now the files that gain a block are
written first, still holding the blocks they are about to lose, then every
file as it should end. At every moment each key is in at least one file and a
supersession's target exists before anything points at it. A key found in two
files (a writer stopped in between) is read as its later update (ties: the
first file, ``MEMORY.md`` then the days in order), the same rule reads and
writes use; the next write of the folder removes the other copy. This was
chosen over an intent journal replayed at open: readers take no lock across
processes and read the files as they are, and a journal would leave them a
state only a replay makes whole.

**Errors.** An ``OSError`` (a full disk, a read-only folder, no permission) is
a :class:`~memory_inject.exceptions.StorageError` naming the file, what was
asked and the reason: ``notes/MEMORY.md: store: No space left on device``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path

from memory_inject.exceptions import StorageError
from memory_inject.storage._markdown_format import Doc, render_doc, write_atomic
from memory_inject.storage.records import MemoryRecord

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lock only
    fcntl = None  # type: ignore[assignment]

__all__ = ["drop_stale", "folder_locked", "storage_error", "write_docs"]

_Key = tuple[str, str]


def storage_error(exc: OSError, path: str | os.PathLike[str], op: str) -> StorageError:
    """``exc`` as a ``StorageError``: ``<file>: <op>: <reason>`` (the file the OS named,
    else ``path``)."""
    name = exc.filename if exc.filename is not None else path
    return StorageError(f"{os.fsdecode(name)}: {op}: {exc.strerror or exc}")


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not deleted, not replaced)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def _lock(path: Path, folder: bool) -> int | None:
    """An fd of ``path`` holding its exclusive ``flock``, taken again until the file locked
    is the one at the path; None for a folder whose file system refuses the lock."""
    while True:
        if folder:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            os.close(fd)
            if folder:  # NFS emulates flock with a byte-range lock: no folder
                return None
            raise
        if _same_file(fd, path):
            return fd
        os.close(fd)  # deleted or replaced while this process waited: lock the new one


@contextlib.contextmanager
def folder_locked(root: Path) -> Iterator[None]:
    """The folder's cross-process lock (module docstring), made first if missing; the
    caller holds the in-process lock."""
    root.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fds: list[int | None] = []
    try:
        fds.append(_lock(root, folder=True))
        fds.append(_lock(root / ".lock", folder=False))
        yield
    finally:
        for fd in reversed(fds):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _winner(a: MemoryRecord, b: MemoryRecord) -> MemoryRecord:
    """Of two copies of one key, the one reads take: the later update (ties: ``a``)."""
    return b if (b.updated_at or b.timestamp) > (a.updated_at or a.timestamp) else a


def drop_stale(docs: Mapping[Path, Doc]) -> None:
    """Remove every copy of a key but the one reads take (a writer stopped between two
    files left both): each namespace's keys, in ``docs`` order."""
    best: dict[_Key, MemoryRecord] = {}
    for doc in docs.values():
        for r in doc.records:
            k = (r.namespace, r.key)
            best[k] = r if k not in best else _winner(best[k], r)
    for doc in docs.values():
        keep = [r for r in doc.records if best[(r.namespace, r.key)] is r]
        if len(keep) != len(doc.records):
            doc.records = keep


def _keys(records: list[MemoryRecord]) -> set[_Key]:
    return {(r.namespace, r.key) for r in records}


def write_docs(
    docs: Mapping[Path, Doc],
    before: Mapping[Path, tuple[str, list[MemoryRecord]]],
    op: str,
) -> None:
    """Write back the documents that changed since ``before`` (each file's text and
    records as read), gaining files first (module docstring)."""
    on_disk: MutableMapping[Path, str] = {p: text for p, (text, _) in before.items()}
    for p, doc in docs.items():
        old = before.get(p, ("", []))[1]
        new_keys = _keys(doc.records)
        if not new_keys - _keys(old):
            continue
        kept = [r for r in old if (r.namespace, r.key) not in new_keys]
        text = render_doc(Doc(foreign=doc.foreign, records=[*doc.records, *kept]))
        _write(p, text, on_disk, op)
    for p, doc in docs.items():
        _write(p, render_doc(doc), on_disk, op)


def _write(path: Path, text: str, on_disk: MutableMapping[Path, str], op: str) -> None:
    if on_disk.get(path) == text:
        return
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise storage_error(exc, path, op) from exc
    on_disk[path] = text
