"""The writer guard: once this library has opened a file, an older one's writes to it fail.

A process of an older release that had the file open before this one upgraded it never
checks the schema again, and went on writing without doing what the upgrade's rows need
(a forget of schema 11 left the forgotten row's words in its neighbours' context, so a
forgotten secret was still recalled). Triggers on ``memories`` (insert, update, delete)
name a SQL function only this library registers on its connections (:func:`register`,
from :func:`~.migrations.connect`): a connection without it cannot even prepare a write
to the table, and the statement fails with ``no such function: <FUNCTION>``, a name that
says why. The triggers never run their body (``WHEN 0``): SQLite resolves the name when
it compiles the statement, so a write of ours pays no call.

The number in the name is the *writer generation* (``storage/_writer_generation.py``):
an upgrade that changes what every write must do (not each schema version) raises it,
and the first open by the newer library replaces the triggers, so the older writers
still running fail from then on. No schema version: the triggers are checked on every open
(:func:`ensure`), put in before a migration's steps (:func:`ensure_in_transaction`), and
a file guarded for a newer generation is refused (:class:`SchemaMismatchError`).
"""

from __future__ import annotations

import re
import sqlite3

from memory_inject.exceptions import SchemaMismatchError
from memory_inject.storage._writer_generation import WRITER_GENERATION

__all__ = ["FUNCTION", "WRITER_GENERATION", "ensure", "ensure_in_transaction", "register"]

#: The function the triggers name: an older writer's error is ``no such function: ...``.
FUNCTION = f"memory_inject_writer_{WRITER_GENERATION}__file_upgraded_restart_on_new_release"
_PREFIX = "memory_inject_writer_"
_NAME = re.compile(r"memory_inject_writer_(\d+)_(insert|update|delete)")


def _writer() -> int:
    return WRITER_GENERATION


def register(conn: sqlite3.Connection) -> None:
    """Let ``conn`` write to a guarded file: every connection the library opens has it.

    A script repairing a file with its own SQL calls it too, and must then keep what
    the library keeps (a forget refreshes its neighbours' context: ``neighbours.py``).
    """
    conn.create_function(FUNCTION, 0, _writer, deterministic=True)


def _generations(conn: sqlite3.Connection) -> set[int]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memories' "
        "AND name LIKE ?",
        (f"{_PREFIX}%",),
    ).fetchall()
    return {int(m.group(1)) for (name,) in rows if (m := _NAME.fullmatch(str(name)))}


def _check(generations: set[int], label: str) -> None:
    if generations and max(generations) > WRITER_GENERATION:
        raise SchemaMismatchError(
            f"{label}: written by a newer memory-inject (writer generation "
            f"{max(generations)}, this one writes {WRITER_GENERATION}); upgrade memory-inject"
        )


def ensure_in_transaction(conn: sqlite3.Connection, label: str) -> None:
    """Inside the caller's write transaction: put this generation's triggers in (dropping
    an older generation's) if the file has ``memories`` and lacks them."""
    if not conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories'"
    ).fetchone():
        return
    generations = _generations(conn)
    _check(generations, label)
    if WRITER_GENERATION in generations:
        return
    for old in sorted(generations):
        for op in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {_PREFIX}{old}_{op}")
    for op in ("insert", "update", "delete"):
        conn.execute(
            f"CREATE TRIGGER {_PREFIX}{WRITER_GENERATION}_{op} BEFORE {op.upper()} ON memories "
            f"WHEN 0 BEGIN SELECT {FUNCTION}(); END"
        )


def ensure(conn: sqlite3.Connection, label: str) -> None:
    """At open: the triggers of this generation, written only when missing (a read when
    they are there; not at all in a file this process may only read); a file guarded for
    a newer one raises :class:`SchemaMismatchError`."""
    generations = _generations(conn)
    _check(generations, label)
    if WRITER_GENERATION in generations:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            ensure_in_transaction(conn, label)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:
        # A file this process may only read (its recalls work, its writes fail anyway):
        # the next opener that may write puts the guard in.
        if "readonly" not in str(exc):
            raise
