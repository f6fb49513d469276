"""Opening a SQLite file, checking that it is ours and current, and bringing it forward.

The schema version lives in ``PRAGMA user_version`` and our files carry
``PRAGMA application_id`` so that a database of another program (founder-os
also keeps a ``memories`` table in ``.memory/memory.db``) is refused rather
than migrated. Migrations (:data:`~.ddl.MIGRATIONS`) only ever run forward,
each in its own ``BEGIN IMMEDIATE`` transaction together with the version bump.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from pathlib import Path

from memory_inject.exceptions import (
    SchemaMismatchError,
    StorageError,
    StoreCorruptError,
    StoreMissingError,
)
from memory_inject.storage.sqlite import neighbours, writers
from memory_inject.storage.sqlite.ddl import MIGRATIONS, SCHEMA_VERSION
from memory_inject.storage.sqlite.errors import wrap_error

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "access_hint", "connect", "migrate", "prepare"]

#: "MINJ": marks a file as ours, next to the version in ``user_version``.
APPLICATION_ID = 0x4D494E4A

_REQUIRED_TABLES = ("memories", "memories_fts")
#: Every SQLite database file starts with a header of this many bytes.
_HEADER_BYTES = 100


def connect(
    path: str, *, create: bool, busy_timeout_ms: int, links: bool = True
) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode for use from any thread (callers hold a lock).

    Parent directories are created when ``create`` is true; with ``create``
    false the file is opened ``mode=rw`` so SQLite cannot create it either.
    A file with more than one name (hard links) is refused: SQLite keeps a
    write-ahead log per name, so writers through two names overwrite each
    other's commits (sqlite.org, "How To Corrupt An SQLite Database File", 2.5),
    and a tester's 30 returned writes of one process were lost that way. The store
    checks at open; ``links`` false (its read connections, opened later) does not, so
    a link made under an open store does not fail its reads while its writes go on.
    """
    timeout = busy_timeout_ms / 1000.0
    if path == ":memory:":
        conn = sqlite3.connect(
            ":memory:", timeout=timeout, isolation_level=None, check_same_thread=False
        )
        writers.register(conn)
        return conn
    if not isinstance(path, str):
        raise TypeError(f"'path' must be a str or os.PathLike[str] (got {path!r:.80})")
    if "\0" in path:  # the URI would end the name there and create another file
        raise ValueError(f"'path' must not hold a NUL character (got {path!r:.80})")
    p = Path(path)
    _check_file(p, path, create, links)
    mode = "rwc" if create else "rw"
    uri = f"file:{urllib.parse.quote(str(p.absolute()))}?mode={mode}"
    try:
        conn = sqlite3.connect(
            uri, timeout=timeout, isolation_level=None, check_same_thread=False, uri=True
        )
    except sqlite3.Error as exc:
        raise wrap_error(exc, f"{path}: cannot open{access_hint(p)}") from exc
    writers.register(conn)  # this library's writes pass the writer guard (writers.py)
    return conn


def _check_file(p: Path, path: str, create: bool, links: bool) -> None:
    """Refuse what SQLite would open badly or report unclearly: a directory, a missing
    file (``create`` false), a file with several names; create the parent directories."""
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:  # a name too long, a loop of links, no permission on a directory
        raise StorageError(f"{path}: cannot open: {exc.strerror}") from exc
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise StoreMissingError(f"{path}: is a directory, not a database file")
    if st is not None and stat.S_ISREG(st.st_mode) and 0 < st.st_size < _HEADER_BYTES:
        # SQLite reads a 1-byte file as an empty database and writes its own over it.
        raise StoreCorruptError(
            f"{path}: file is not a database ({st.st_size} bytes, shorter than SQLite's "
            f"{_HEADER_BYTES}-byte header); nothing was written"
        )
    if links and st is not None and st.st_nlink > 1:
        real = os.path.realpath(path)
        named = path if real == os.path.abspath(path) else f"{path} (the file {real})"
        raise StorageError(
            f"{named}: the file has {st.st_nlink} names (hard links); SQLite keeps a "
            "write-ahead log per name, so writes through another name overwrite this one's: "
            "remove the other names (a copy is safe)"
        )
    if st is None:
        if not create:
            raise StoreMissingError(f"{path}: no such database (create=False)")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreMissingError(f"{path}: cannot create its directory: {exc}") from exc


def access_hint(p: Path) -> str:
    """Why SQLite could not open ``p``, when it is the permissions: said plainly."""
    if p.exists() and not os.access(p, os.R_OK | os.W_OK):
        return " (permission denied: the file must be readable and writable)"
    parent = p.absolute().parent
    if not os.access(parent, os.W_OK | os.X_OK):
        return (
            f" (permission denied: its directory {str(parent)!r} must be writable, for "
            "the -wal and -shm files SQLite keeps beside the database)"
        )
    return ""


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION, label: str = "") -> int:
    """Bring the file forward to ``target``, one transaction per step; returns the version.

    The version is re-read under the write lock, so two processes opening a
    new file at once apply each step once. The writer guard goes in with the first
    step (``writers.py``): an older process still writing fails from that commit on.
    """
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _pragma(conn, "user_version")
            if version >= target:
                conn.execute("COMMIT")
                return version
            writers.ensure_in_transaction(conn, label)
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
            writers.ensure_in_transaction(conn, label)  # a step that made the table
            if version + 1 == _LIVE_INDEX:
                _forgotten_context(conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


#: The schema whose keyword index holds live rows only (``ddl_live``).
_LIVE_INDEX = 12


def _forgotten_context(conn: sqlite3.Connection) -> None:
    """Schema 12, once its index is built: the live rows that took a forgotten row's text
    as context before it get theirs again, as a forget now does (a helper's upgraded file
    held 722 such rows, and a forgotten password still lifted the row after it)."""
    spaces = conn.execute("SELECT DISTINCT namespace FROM memories WHERE deleted_at IS NOT NULL")
    for (namespace,) in spaces.fetchall():
        gone = conn.execute(
            f"SELECT {neighbours.ANCHOR} FROM memories "  # noqa: S608 - a constant
            "WHERE namespace = ? AND deleted_at IS NOT NULL",
            (namespace,),
        ).fetchall()
        neighbours.refresh(conn, namespace, gone)


def prepare(conn: sqlite3.Connection, *, create: bool, label: str) -> None:
    """Check that the file is ours and current, migrating it forward if it is older.

    Raises :class:`SchemaMismatchError` for a newer schema or another program's
    database, :class:`StoreMissingError` for an empty file when ``create`` is
    false, :class:`StoreCorruptError` when our tables are missing afterwards.
    """
    # The version, the tables and the id from one snapshot: read one by one, another
    # process creating the file could commit its first step between them, and a version
    # of 0 beside its tables would read as another program's database.
    conn.execute("BEGIN")
    try:
        version = _pragma(conn, "user_version")
        tables = _tables(conn) if version == 0 else []
        app_id = _pragma(conn, "application_id")
    finally:
        conn.execute("COMMIT")
    if version > SCHEMA_VERSION:
        raise SchemaMismatchError(
            f"{label}: schema version {version} is newer than this memory-inject "
            f"supports ({SCHEMA_VERSION}); upgrade memory-inject"
        )
    if version == 0:
        if tables:
            raise SchemaMismatchError(
                f"{label}: not a memory-inject database (it has tables "
                f"{', '.join(tables[:5])} and no memory-inject schema version)"
            )
        if not create:
            raise StoreMissingError(f"{label}: the database is empty and create=False")
    elif app_id != APPLICATION_ID:
        raise SchemaMismatchError(
            f"{label}: not a memory-inject database "
            f"(application_id {app_id:#x}, user_version {version})"
        )
    if version < SCHEMA_VERSION:
        migrate(conn, label=label)
    writers.ensure(conn, label)
    missing = [t for t in _REQUIRED_TABLES if t not in _tables(conn)]
    if missing:
        raise StoreCorruptError(
            f"{label}: schema incomplete, missing table(s) {', '.join(missing)}"
        )
