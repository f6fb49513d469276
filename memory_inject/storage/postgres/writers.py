"""The writer guard: once this library has opened a table, an older one's writes to it fail.

A process of an older release that had the table open before this one upgraded it never
checks the schema again, and went on writing without doing what the upgrade's rows need
(a forget of schema 9 left the forgotten row's words in its neighbours' context). A
statement-level trigger on the table (insert, update, delete; one check a statement, not
a row) raises unless the session's ``memory_inject.writer`` setting is at least this
library's writer generation; every connection of the store starts with it
(:data:`OPTION`, in ``options.session_options``), the opening transaction sets it for
itself (:func:`ensure`). An older library sets nothing, and its writes fail with
:data:`REASON`.

The generation is ``storage/_writer_generation.py``'s: the first open by a library of a
newer one replaces the trigger (no schema version), and a table guarded for a newer
generation than this library's is refused (:class:`SchemaMismatchError`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from memory_inject.exceptions import SchemaMismatchError
from memory_inject.storage._writer_generation import WRITER_GENERATION
from memory_inject.storage.postgres.schema import TableNames, relation_exists

__all__ = ["OPTION", "REASON", "SETTING", "ensure"]

#: The session setting a writer of this library carries.
SETTING = "memory_inject.writer"
#: The startup option that sets it on every connection of the store.
OPTION = f"-c {SETTING}={WRITER_GENERATION}"
#: What an older writer's statement fails with (``%`` is the table).
REASON = (
    "table % was upgraded by a newer memory-inject (writer generation {gen}); this "
    "process runs an older release that does not keep what its writes must: restart it "
    "on the new release"
)
_TRIGGER = "memory_inject_writer_"
_NAME = re.compile(r"memory_inject_writer_(\d+)")

_FUNCTION = """CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $guard$
DECLARE w text := current_setting('memory_inject.writer', true);
BEGIN
  IF (CASE WHEN w ~ '^[0-9]{{1,9}}$' THEN w::int ELSE 0 END) < {gen} THEN
    RAISE EXCEPTION {reason}, TG_TABLE_NAME USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  RETURN NULL;
END $guard$"""


def _generations(conn: psycopg.Connection[Any], names: TableNames) -> set[int]:
    rows = conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal",
        (names.ident().as_string(conn),),
    ).fetchall()
    return {int(m.group(1)) for (name,) in rows if (m := _NAME.fullmatch(str(name)))}


def ensure(
    conn: psycopg.Connection[Any],
    names: TableNames,
    bound: Callable[[psycopg.Connection[Any]], None],
) -> None:
    """In the opening transaction (under its lock): let it write, and put this
    generation's trigger on the table (replacing an older one's) if it lacks it, after
    ``bound`` (the migrations' lock wait) when it changes the table."""
    conn.execute("SELECT set_config(%s, %s, true)", (SETTING, str(WRITER_GENERATION)))
    if not relation_exists(conn, names.ident()):
        return
    generations = _generations(conn, names)
    if generations and max(generations) > WRITER_GENERATION:
        raise SchemaMismatchError(
            f"table {names.table!r} is written by a newer memory-inject (writer generation "
            f"{max(generations)}, this one writes {WRITER_GENERATION}); upgrade memory_inject"
        )
    if WRITER_GENERATION in generations:
        return
    bound(conn)
    table = names.ident()
    for old in sorted(generations):
        conn.execute(
            sql.SQL("DROP TRIGGER {tg} ON {t}").format(
                tg=sql.Identifier(f"{_TRIGGER}{old}"), t=table
            )
        )
        conn.execute(sql.SQL("DROP FUNCTION IF EXISTS {fn}()").format(fn=names.ident(f"_w{old}")))
    fn = names.ident(f"_w{WRITER_GENERATION}")
    reason = sql.Literal(REASON.format(gen=WRITER_GENERATION))
    conn.execute(sql.SQL(_FUNCTION).format(fn=fn, gen=WRITER_GENERATION, reason=reason))
    conn.execute(
        sql.SQL(
            "CREATE TRIGGER {tg} BEFORE INSERT OR UPDATE OR DELETE ON {t} "
            "FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
        ).format(tg=sql.Identifier(f"{_TRIGGER}{WRITER_GENERATION}"), t=table, fn=fn)
    )
