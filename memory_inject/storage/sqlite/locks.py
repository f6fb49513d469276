"""Who holds a SQLite file's WAL-index lock: the cause of a read that waited past its deadline.

A reader of a WAL database takes a shared lock on one of the WAL index's read
slots (bytes 123-127 of the ``-shm`` file) and, when the index must be
rebuilt, the recovery lock (122). While another process holds those bytes
exclusively (a process in WAL recovery, a backup tool, a stuck network file
system), SQLite retries in a sleep loop for about ten seconds before it fails,
outside its busy handler and progress handler: no deadline of ours reaches it.
The render abandons such a recall at its deadline; this module names the
cause on the recall event, from ``/proc/locks`` (Linux), without opening the
``-shm`` file (closing any descriptor of a file drops every POSIX lock this
process holds on it, SQLite's own included).
"""

from __future__ import annotations

import os

__all__ = ["foreign_wal_lock", "wal_lock_note"]

#: The ``-shm`` bytes whose exclusive lock stops a reader: recovery, the five
#: read slots and the dead-man switch (the writer and checkpointer locks,
#: 120 and 121, never do).
_FIRST, _LAST = 122, 128
_PROC_LOCKS = "/proc/locks"


def foreign_wal_lock(db_path: str, proc_locks: str = _PROC_LOCKS) -> int | None:
    """The pid of another process that holds the WAL-index lock of ``db_path``, if any.

    None when nothing is found, the file has no ``-shm``, or the system keeps
    no ``/proc/locks``. A pid of 0 means a process of another pid namespace.
    """
    try:
        st = os.stat(db_path + "-shm")
        with open(proc_locks, encoding="ascii", errors="replace") as fh:
            listed = fh.read()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    me = os.getpid()
    for line in listed.splitlines():
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 15710 fe:00:2386241 120 127" ("->" marks a waiter)
        if len(parts) < 8 or parts[1] == "->" or parts[3] != "WRITE" or parts[5] != device:
            continue
        try:
            pid, start = int(parts[4]), int(parts[6])
            end = _LAST if parts[7] == "EOF" else int(parts[7])
        except ValueError:
            continue
        if pid != me and start <= _LAST and end >= _FIRST:
            return pid
    return None


def wal_lock_note(db_path: str) -> str | None:
    """``wal_lock: ...`` naming the process that holds the WAL-index lock, or None."""
    pid = foreign_wal_lock(db_path)
    if pid is None:
        return None
    who = f"process {pid}" if pid else "a process of another pid namespace"
    return (
        f"wal_lock: {who} holds the WAL-index lock of {db_path} (a WAL recovery, a backup "
        "tool or a stuck file system); SQLite waits for it outside any timeout, so the "
        "recall was left waiting on a recall thread"
    )
