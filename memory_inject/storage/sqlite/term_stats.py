"""One read connection's index statistics for the FTS5 path, kept across writes.

FTS5's ``bm25()`` uses the row count and average length (its averages record,
one read); the keyword stage also needs each query word's document frequency,
which only ``fts5vocab`` answers, by walking the word's whole doclist: about a
millisecond for a word in 20,000 rows of a 1M store, 8 ms for a name in
150,000. They are cached per token.

An agent writes a turn and recalls the next one, so a cache that a write
emptied would walk every query word's doclist again on almost every recall
(at 1M records, 8 ms of a 28 ms recall). Instead the cache holds, for each
token, how many rows *up to a rid* (:attr:`TermStats.upto`, the newest row
when the cache was based) hold it, and stays valid while the change log
(``memories_log``) says every row changed since is newer than that rid: new
rows do not change the old rows' counts. A recall then adds what the new rows
hold, one ``MATCH ... AND rowid > upto`` count per word in one statement,
which FTS5 answers by seeking to the end of each doclist (about 15 us a word).
A change to an older row (an update, a forget), a log that went back or was
pruned, or more than :data:`TAIL_ROWS` new rows base the cache again. (An
earlier form counted the new rows by tokenising them and was dropped: FTS5's
own count of each word's newest postings needs no tokenising and is exact by
construction.)

Counting by ``MATCH`` needs a phrase that tokenises to the token itself. A
stemmed token usually does ("camp" stems to "camp"), but about 2% do not
("agre" stems to "agr"): those are cached only until the next write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memory_inject.storage.sqlite.changes import LogPosition, log_position, logged_since
from memory_inject.storage.sqlite.keyword_terms import (
    document_frequencies,
    ensure_vocab,
    tokens_of,
    varints,
)
from memory_inject.storage.sqlite.space_counts import SpaceCounts

__all__ = ["TAIL_ROWS", "TermStats"]

#: Forget cached document frequencies past this many tokens (a bound, not a tuning knob).
_MAX_CACHED = 50_000
#: Longer tokens are never cached, so the cache holds at most about 50,000 x 64 characters.
_MAX_CACHED_CHARS = 64
#: Past this many rows written since the cache was based, it is read afresh:
#: the new rows' counts are a seek and a walk of each word's newest postings.
TAIL_ROWS = 1000
#: Words counted by one statement (SQLite allows 500 arms of a compound SELECT).
_TAIL_BATCH = 200

#: FTS5's averages record, then the connection's ``data_version``: one statement, whose
#: first read opens the snapshot the version is then read in.
_AVERAGES_AND_VERSION = (
    "SELECT (SELECT block FROM memories_fts_data WHERE id = 1), "
    "(SELECT data_version FROM pragma_data_version)"
)
_TAIL_ARM = "SELECT ?, (SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ? AND rowid > ?)"


class TermStats:
    """One read connection's index statistics (see the module docstring).

    ``rows`` and ``avgdl`` are ``bm25()``'s, re-read by :meth:`refresh` inside
    each read transaction when ``PRAGMA data_version`` says another connection
    committed or this connection changed rows itself (``total_changes``).
    :meth:`document_frequencies` answers exact counts in the recall's snapshot.
    """

    def __init__(self) -> None:
        """An empty cache; the first :meth:`refresh` fills ``rows`` and ``avgdl``."""
        self.rows = 0
        self.avgdl = 0.0
        #: The rid up to which the cached counts count rows (None: not based yet).
        self.upto: int | None = None
        self._df: dict[str, int] = {}
        self._version: tuple[int, int] | None = None
        self._vocab = False
        self._stale = False  # the snapshot changed since the cache was last checked
        self._seen: LogPosition = (0, None)
        self._tail = 0  # rows logged since the cache was based (an upper bound)
        self._uncounted: set[str] = set()  # cached tokens no MATCH phrase counts
        #: One namespace's counts, on a file of several (:mod:`.space_counts`).
        self.spaces = SpaceCounts()

    def ready_vocab(self, conn: sqlite3.Connection) -> None:
        """Make ``conn``'s vocabulary view once, before its read transaction begins."""
        if not self._vocab:
            ensure_vocab(conn)
            self._vocab = True

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Re-read the averages if the snapshot changed; the cache is checked when next read.

        Reading the averages first opens the read snapshot, so the version read
        next is the snapshot's.
        """
        block, dv = conn.execute(_AVERAGES_AND_VERSION).fetchone()
        version = (int(dv), conn.total_changes)
        if version == self._version:
            return
        self._version = version
        self._stale = True
        self.spaces.changed()
        values = varints(bytes(block)) if block else []
        self.rows = values[0] if values else 0
        self.avgdl = sum(values[1:]) / self.rows if self.rows else 0.0
        if not self._vocab:
            ensure_vocab(conn)
            self._vocab = True

    def document_frequencies(
        self, conn: sqlite3.Connection, tokens: Sequence[str]
    ) -> dict[str, int]:
        """``{token: rows containing it}`` in ``conn``'s snapshot (absent tokens are 0).

        Called in the read transaction :meth:`refresh` ran in.
        """
        if self._stale:
            self._settle(conn)
        df = self._df
        missing = [t for t in set(tokens) if t not in df]
        new = self._new_rows(conn, [t for t in set(tokens) if t not in self._uncounted])
        if not missing:
            return {t: df[t] + new.get(t, 0) for t in tokens}
        if len(df) > _MAX_CACHED:
            df.clear()
            self._uncounted.clear()
        found = document_frequencies(conn, missing)
        for t in missing:
            # Only word-sized tokens are kept: a prompt's 1 MB run of letters is one
            # token, and keeping it would make the cache's size the prompts' size.
            if len(t) > _MAX_CACHED_CHARS:
                continue
            if not _countable(t):  # no phrase counts its new rows: kept until a write
                self._uncounted.add(t)
            df[t] = found.get(t, 0) - new.get(t, 0)
        return {t: df[t] + new.get(t, 0) if t in df else found.get(t, 0) for t in tokens}

    def namespace_counts(
        self, conn: sqlite3.Connection, namespace: str, tokens: Sequence[str]
    ) -> tuple[int, dict[str, int]] | None:
        """``(live rows, {token: rows holding it})`` of ``namespace`` alone, in the read
        transaction :meth:`refresh` ran in; None when the file holds one namespace only
        (then :attr:`rows` and :meth:`document_frequencies` are its own).

        The calibrated score weighs words by these on a file of several namespaces, so
        one namespace's rows never move another's scores (:mod:`.space_counts`).
        """
        if not self.spaces.several(conn):
            return None
        if self._stale or self.upto is None:
            self._settle(conn)
        countable = {t: len(t) <= _MAX_CACHED_CHARS and _countable(t) for t in tokens}
        upto = self.upto or 0
        return self.spaces.counts(conn, namespace, tokens, upto, bool(self._tail), countable)

    def _settle(self, conn: sqlite3.Connection) -> None:
        """Keep the cache if only rows newer than :attr:`upto` changed; else base it again."""
        self._stale = False
        head = log_position(conn)
        if self.upto is not None and self._tail < TAIL_ROWS:
            rids = logged_since(conn, self._seen, head, TAIL_ROWS - self._tail)
            if rids is not None and all(r > self.upto for r in rids):
                self._seen = head
                if rids:
                    self._tail += len(rids)
                    for t in self._uncounted:
                        self._df.pop(t, None)
                    self._uncounted.clear()
                return
        self._df.clear()
        self._uncounted.clear()
        self.spaces.clear()
        self._seen, self._tail = head, 0
        self.upto = int(conn.execute("SELECT coalesce(max(rid), 0) FROM memories").fetchone()[0])

    def _new_rows(self, conn: sqlite3.Connection, tokens: Sequence[str]) -> dict[str, int]:
        """``{token: rows after upto holding it}`` for the tokens a phrase counts; empty when
        no row was written since the cache was based (no statement then)."""
        if not self._tail or self.upto is None:
            return {}
        countable = [t for t in tokens if len(t) <= _MAX_CACHED_CHARS and _countable(t)]
        out: dict[str, int] = {}
        for i in range(0, len(countable), _TAIL_BATCH):
            batch = countable[i : i + _TAIL_BATCH]
            sql = " UNION ALL ".join([_TAIL_ARM] * len(batch))
            args = [a for t in batch for a in (t, f'"{t}"', self.upto)]
            out.update((str(t), int(n)) for t, n in conn.execute(sql, args))
        return out


def _countable(token: str) -> bool:
    """Whether the phrase ``"token"`` matches exactly the rows holding ``token``."""
    return tokens_of(token) == (token,)
