"""One namespace's word statistics on a file that holds several (the FTS5 path's).

The calibrated keyword score weighs each query word by how many rows hold it
(``calibration.term_weight``), and a word no row holds weighs more. Counted
over the whole file, one namespace's rows would move another's scores across
the floor, and a tenant reading its own scores would learn whether another
namespace holds a word. So on a file holding rows of more than one namespace
the counts are the namespace's own: its live rows, and how many of them hold
each word. A file of one namespace (the common case) is never counted here:
its whole-file statistics (:class:`~.term_stats.TermStats`) are the
namespace's, to the bit, and cost nothing more.

Whether a file holds several namespaces is two index seeks (the least and the
greatest namespace of ``memories``, forgotten rows too: a file once shared is
counted per namespace, which gives the same numbers), made once per snapshot
change. The counts are cached per namespace and per (namespace, token) the way
:class:`~.term_stats.TermStats` caches the file's: up to its rid ``upto``, with
the rows written since counted again on each recall (a ``MATCH ... AND rowid >
upto`` joined to the rows' namespace: a seek to the end of each doclist), and
forgotten when :class:`~.term_stats.TermStats` bases its own again. A token no
``MATCH`` phrase counts (a stem that does not stem to itself) is counted from
the index's instances each time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

__all__ = ["SpaceCounts"]

#: Forget cached counts past this many (namespace, token) pairs (a bound, not a knob).
_MAX_CACHED = 50_000
#: Words counted by one statement (SQLite allows 500 arms of a compound SELECT).
_BATCH = 200

_SEVERAL = (
    "SELECT (SELECT min(namespace) FROM memories) IS NOT (SELECT max(namespace) FROM memories)"
)
#: The namespace's live rows written after ``upto`` (``rid > ?``: the unary + keeps the
#: planner on the rid range, not on the namespace's every row), or all of them.
_ROWS_AFTER = (
    "SELECT count(*) FROM memories WHERE rid > ? AND +namespace = ? AND deleted_at IS NULL"
)
_ROWS_ALL = "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL"
#: A word's rows of the namespace (the index holds live rows only), after a rid.
_ARM = (
    "SELECT ?, (SELECT count(*) FROM memories_fts CROSS JOIN memories AS m "
    "ON m.rid = memories_fts.rowid WHERE memories_fts MATCH ? AND memories_fts.rowid > ? "
    "AND m.namespace = ?)"
)
#: A token no phrase counts: its rows of the namespace from the index's instances.
_INSTANCES = (
    "SELECT count(DISTINCT i.doc) FROM temp.memories_instances AS i CROSS JOIN memories AS m "
    "ON m.rid = i.doc WHERE i.term = ? AND m.namespace = ?"
)


class SpaceCounts:
    """The per-namespace counts of one read connection (see the module docstring).

    Owned by a :class:`~.term_stats.TermStats`, which tells it when the snapshot
    changed (:meth:`changed`) and when its own cache was based again (:meth:`clear`).
    """

    def __init__(self) -> None:
        """Nothing known: the first :meth:`several` asks the file."""
        self._several: bool | None = None
        self._rows: dict[str, int] = {}  # live rows up to ``upto``, per namespace
        self._df: dict[tuple[str, str], int] = {}  # rows up to ``upto`` holding a token

    def changed(self) -> None:
        """The snapshot changed: whether the file holds several namespaces is asked again."""
        self._several = None

    def clear(self) -> None:
        """Forget every count (the owner's ``upto`` moved)."""
        self._rows.clear()
        self._df.clear()

    def several(self, conn: sqlite3.Connection) -> bool:
        """Whether the file holds rows of more than one namespace (cached per snapshot)."""
        if self._several is None:
            self._several = bool(conn.execute(_SEVERAL).fetchone()[0])
        return self._several

    def counts(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        tokens: Sequence[str],
        upto: int,
        tail: bool,
        countable: dict[str, bool],
    ) -> tuple[int, dict[str, int]]:
        """``(live rows, {token: rows holding it})`` of ``namespace`` in ``conn``'s snapshot.

        ``upto`` is the owner's base rid, ``tail`` whether rows were written after it,
        ``countable`` which tokens a ``MATCH`` phrase counts exactly.
        """
        new_rows = 0
        if tail:
            new_rows = int(conn.execute(_ROWS_AFTER, (upto, namespace)).fetchone()[0])
        rows = self._rows.get(namespace)
        if rows is None:
            total = int(conn.execute(_ROWS_ALL, (namespace,)).fetchone()[0])
            rows = self._rows[namespace] = total - new_rows
        wanted = list(dict.fromkeys(tokens))
        phrased = [t for t in wanted if countable[t]]
        missing = [t for t in phrased if (namespace, t) not in self._df]
        new = self._matching(conn, namespace, phrased, upto) if tail else {}
        if missing:
            if len(self._df) > _MAX_CACHED:
                self._df.clear()
            found = self._matching(conn, namespace, missing, -1)
            for t in missing:
                self._df[(namespace, t)] = found[t] - new.get(t, 0)
        out = {t: self._df[(namespace, t)] + new.get(t, 0) for t in phrased}
        others = [t for t in wanted if not countable[t]]
        if others:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_instances "
                "USING fts5vocab(main, memories_fts, instance)"
            )
            for t in others:
                out[t] = int(conn.execute(_INSTANCES, (t, namespace)).fetchone()[0])
        return rows + new_rows, out

    @staticmethod
    def _matching(
        conn: sqlite3.Connection, namespace: str, tokens: Sequence[str], after: int
    ) -> dict[str, int]:
        """``{token: rows of the namespace after rid ``after`` holding it}``."""
        out: dict[str, int] = {}
        for i in range(0, len(tokens), _BATCH):
            batch = tokens[i : i + _BATCH]
            sql = " UNION ALL ".join([_ARM] * len(batch))
            args = [a for t in batch for a in (t, f'"{t}"', after, namespace)]
            out.update((str(t), int(n)) for t, n in conn.execute(sql, args))
        return out
