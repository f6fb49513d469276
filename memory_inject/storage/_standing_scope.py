"""Which rows a turn's standing read may return: its sessions, the render's session rule.

The render drops rows bound to other sessions after the read
(``stages.filters.session_scope``); a read that took the newest ``limit``
rows of the whole profile first could lose the turn's own rows under another
session's (40 of a DM's daily notes push the shared one out of a cron turn's
Daily Log). So the stores filter before they limit, with the stage's rule:

* ``sessions`` (the turn's own, not empty): rows bound to no session, rows of
  those sessions, and a profile's session records (``session:<id>``, bound to
  a profile: Today's Sessions shows the profile's sessions of the day);
* else ``shared_only`` (a scheduled turn): rows bound to no session;
* else every row (a turn that names no session).

:func:`turn_sees` is the rule in Python (the in-memory store); :func:`scope_sql`
its SQLite ``WHERE`` clause; PostgreSQL spells the same clause in
``postgres.standing``.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_inject.records import MemoryRecord

__all__ = ["SESSION_RECORD_PREFIX", "scope_sql", "turn_sees"]

#: The key prefix of a session record (``memory_inject.sessions.SESSION_KEY_PREFIX``,
#: which storage may not import; a test keeps the two equal).
SESSION_RECORD_PREFIX = "session:"


def turn_sees(record: MemoryRecord, sessions: Sequence[str], shared_only: bool) -> bool:
    """True when a turn of ``sessions`` (or a ``shared_only`` one) may see ``record``."""
    sid = record.session_id
    if sid is None:
        return True
    if sessions:
        return sid in sessions or (
            str(record.category) == "session"
            and record.profile_id is not None
            and record.key == SESSION_RECORD_PREFIX + sid
        )
    return not shared_only


def scope_sql(sessions: Sequence[str], shared_only: bool) -> tuple[str, list[str]]:
    """The SQLite ``AND ...`` clause of :func:`turn_sees` and its parameters ("" without one)."""
    if sessions:
        marks = ", ".join("?" * len(sessions))
        return (
            f" AND (session_id IS NULL OR session_id IN ({marks}) OR (category = 'session' "
            "AND profile_id IS NOT NULL AND key = ? || session_id))",
            [*sessions, SESSION_RECORD_PREFIX],
        )
    return (" AND session_id IS NULL", []) if shared_only else ("", [])
