"""``PostgresStore.embed_missing``: vectors for the rows written without the embedder.

A row written by a process without an embedder, or before one was set, has no vector:
the vector stage never finds it, and the prompt gate cannot tell how near it is
(``unembedded_rows`` on the event). SQLite's store has had ``embed_missing`` since its
vectors; this is PostgreSQL's. As there, only the vector is written, and only to a row
still as it was read (same id and content, still live, still without a vector), so a
``store()`` or ``forget()`` that returned meanwhile is never undone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from memory_inject.storage.postgres.errors import translate_errors
from memory_inject.storage.postgres.schema import COLUMNS, row_to_record

if TYPE_CHECKING:
    from memory_inject.storage.postgres.store import PostgresStore

__all__ = ["embed_missing"]


def embed_missing(store: PostgresStore, *, batch_size: int = 256) -> int:
    """Embed the live rows of ``store``'s namespace that have no vector, ``batch_size``
    at a time (by id, each read once); returns how many got one."""
    if store.embedder is None:
        return 0
    engine = store._engine
    q = engine.q
    pick = sql.SQL(
        "SELECT {cols} FROM {t} WHERE namespace = %s AND embedding IS NULL "
        "AND deleted_at IS NULL AND id > %s ORDER BY id LIMIT %s"
    ).format(cols=q.all, t=q.t)
    put = sql.SQL(
        "UPDATE {t} SET embedding = %s WHERE namespace = %s AND id = %s AND content = %s "
        "AND embedding IS NULL AND deleted_at IS NULL"
    ).format(t=q.t)
    done, after = 0, ""
    while True:
        with translate_errors("embed_missing"), engine.connections.connection(read=True) as conn:
            rows = conn.execute(pick, (q.ns, after, max(1, batch_size))).fetchall()
        if not rows:
            return done
        todo = [row_to_record(r, COLUMNS) for r in rows]
        after = todo[-1].id
        # Embedded before a connection is taken: a slow model must not hold one.
        made = store._embedded([r.evolve(embedding=None) for r in todo])
        with (
            translate_errors("embed_missing"),
            engine.connections.connection() as conn,
            conn.cursor() as cur,
        ):
            for new in made:
                if new.embedding is not None:
                    cur.execute(put, (list(new.embedding), q.ns, new.id, new.content))
                    done += max(0, cur.rowcount)
