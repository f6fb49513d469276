"""The mirror's best rows, read through the store's scope, and the rows it has read kept.

:func:`pick` turns the mirror's ranking into the ``k`` best rows a recall may
return: the store's scope is SQL's (a session, a time window, the namespace,
what is forgotten), so the ranked row ids are checked against it in a
statement. Turning a row's 29 entry columns into Python values is most of that
statement's cost (about 75 us for 22 rows of a 1k-record store, 18 us for the
ids alone), and a store's prompts bring back the same rows again and again.
So the index keeps the columns of the rows it has read (``MirrorIndex.read``,
at most :data:`MAX_KEPT` rows of at most :data:`MAX_KEPT_CHARS` characters of
content), and a recall whose rows are all kept asks SQL for the ids in scope
only; the rows not kept are read by id in the same snapshot. A kept row is
dropped when the change log says the row changed (any column: a use count, a
status, a forget), exactly when the index's own numbers for it are, so what a
recall returns is what the row holds in the recall's snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memory_inject.storage.sqlite.codec import ENTRY_COLUMNS

if TYPE_CHECKING:
    from memory_inject.storage.sqlite.keyword_arrays import Ranking
    from memory_inject.storage.sqlite.keyword_index import MirrorIndex

__all__ = ["MAX_KEPT", "MAX_KEPT_CHARS", "pick"]

#: At most this many rows' columns are kept per index (the oldest read go first).
MAX_KEPT = 2048
#: A row whose content is longer than this is read every time, never kept.
MAX_KEPT_CHARS = 4096

_ENTRY = ", ".join(f"m.{c}" for c in ENTRY_COLUMNS)
_ID = ENTRY_COLUMNS.index("id")
_CONTENT = ENTRY_COLUMNS.index("content")
# CROSS JOIN: the listed rowids drive the lookups (the planner would otherwise
# walk the namespace's whole index and test each row against the list).
_LISTED = "FROM json_each(?) AS j CROSS JOIN memories AS m ON m.rid = j.value"
_BY_RID = f"SELECT m.rid, {_ENTRY} {_LISTED}"


def pick(
    conn: sqlite3.Connection,
    index: MirrorIndex,
    where: tuple[str, str, Sequence[Any]],
    ranked: Ranking,
    k: int,
    rows: dict[str, tuple[Any, ...]] | None,
    keep: Callable[[int], bool],
) -> list[int]:
    """The ``k`` best rows (or fewer) in the store's scope, by score then id.

    The scope is SQL's: the best rows are read with it in batches (the first
    just over ``k``, then four times more), so a row the scope drops is
    replaced by the next. A row ``keep`` refuses (near context and no query
    token in its own columns: ``ddl.OWN_MATCH`` on the SQL path) is never read.
    ``rows`` receives the kept rows' entry columns by id.
    """
    namespace, scope, params = where
    whole = f"SELECT m.rid, {_ENTRY} {_LISTED} WHERE m.namespace = ? AND {scope}"
    ids = f"SELECT m.rid {_LISTED} WHERE m.namespace = ? AND {scope}"
    read = index.read
    kept: list[int] = []
    done = 0
    batch = k + 2  # the scope rarely drops one of the best: the ids were pre-filtered
    while len(kept) < k and done < len(ranked):
        chunk: list[int] = []
        # Rows with near context refuse about half of a ranking's best (``keep``): where
        # the index has any, ask for twice the batch, not one sort per refused row.
        ask = 2 * batch if index.near_rows else batch
        while len(chunk) < batch and done < len(ranked):  # refused rows: ranked further
            top = ranked.best(done + ask)
            for rid in top[done:]:
                done += 1
                if keep(rid):
                    chunk.append(rid)
                    if len(chunk) == batch:
                        break
            ask = 2 * (batch - len(chunk))
        args = (json.dumps(chunk), namespace, *params)
        if any(rid in read for rid in chunk):
            inside = [int(r[0]) for r in conn.execute(ids, args).fetchall()]
            unread = [rid for rid in inside if rid not in read]
            found = {rid: read[rid] for rid in inside if rid in read}
            if unread:
                fresh = conn.execute(_BY_RID, (json.dumps(unread),)).fetchall()
                found.update(_kept(read, fresh))
        else:
            found = _kept(read, conn.execute(whole, args).fetchall())
        for rid in chunk:
            entry = found.get(rid)
            if entry is not None:
                kept.append(rid)
                if rows is not None:
                    rows[entry[_ID]] = entry
        batch *= 4
    return kept[:k]


def _kept(read: dict[int, tuple[Any, ...]], fresh: list[Any]) -> dict[int, tuple[Any, ...]]:
    """``fresh`` rows (``rid`` first) by rid, each kept in ``read`` unless it is long."""
    found = {int(r[0]): r[1:] for r in fresh}
    for rid, entry in found.items():
        content = entry[_CONTENT]
        if content is None or len(content) <= MAX_KEPT_CHARS:
            if len(read) >= MAX_KEPT:
                del read[next(iter(read))]
            read[rid] = entry
    return found
