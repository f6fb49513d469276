"""The reads of ``memories_log``, the change log the readers' caches follow (schema 6 and 7).

Triggers log the rid of every row any connection or process inserts,
updates or deletes, each entry with a random stamp: a cache current at a
:data:`LogPosition` re-reads only the rows logged since, and sees a history
it did not follow (a restored backup) by the stamp.
"""

from __future__ import annotations

import sqlite3

__all__ = ["LogPosition", "log_position", "logged_since"]

#: A place in ``memories_log``: its ``seq`` and that entry's random ``stamp``
#: (schema 7; None for an empty log or an entry written before the stamps).
LogPosition = tuple[int, int | None]


def log_position(conn: sqlite3.Connection) -> LogPosition:
    """The newest ``memories_log`` entry as a :data:`LogPosition` (``(0, None)`` when empty)."""
    row = conn.execute("SELECT seq, stamp FROM memories_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (0, None) if row is None else (int(row[0]), row[1])


def logged_since(
    conn: sqlite3.Connection, since: LogPosition, head: LogPosition, cap: int
) -> list[int] | None:
    """The rids logged after ``since`` up to ``head``; None when a cache at ``since`` must rebuild.

    None when the log went back (a file replaced under the store), when the
    entry at ``since`` is not the one the cache saw (its stamp differs: a
    history that diverged, such as a backup restored into the live file, even
    one that went further), when entries after it were pruned, or when more
    than ``cap`` rows changed.
    """
    seq, stamp = since
    if head == since:
        return []
    if head[0] < seq:
        return None
    if stamp is not None or seq > 0:
        row = conn.execute("SELECT stamp FROM memories_log WHERE seq = ?", (seq,)).fetchone()
        if row is None or row[0] != stamp:
            return None
    if head[0] == seq:  # the same entry, another stamp: caught above
        return []
    first = conn.execute("SELECT min(seq) FROM memories_log").fetchone()[0]
    if first is None or int(first) > seq + 1:
        return None
    rids = [
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT rid FROM memories_log WHERE seq > ? LIMIT ?", (seq, cap + 1)
        )
    ]
    return None if len(rids) > cap else rids
