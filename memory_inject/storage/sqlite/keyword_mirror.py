"""A small store's keyword index, mirrored in process: BM25 and coverage without FTS5 calls.

On a store of a few hundred records a keyword recall through FTS5 costs about
three bare FTS5 queries: the ranking statement over seven weighted columns,
then ``highlight()`` over the hits (it re-tokenises every column of each hit,
the long context columns included) for the calibrated score. Both answers
follow from a few numbers per (token, row): the token's weighted count in the
row, the columns it is in, and the row's length. :class:`KeywordMirror` keeps
those in process, so a query is a few dictionary walks and one statement,
the one that applies the store's scope to the best rows and reads them.

It answers exactly what :func:`~memory_inject.storage.sqlite.keyword_rank.keyword_hits`
answers, computed the way FTS5 computes it: ``bm25()``'s idf over all rows,
its column weights, row length and average length, summed over the query's
phrases in order (so scores are bit-for-bit FTS5's whole-query bm25, the
exact order the SQL path approximates on large stores), ties by id, and
:func:`~memory_inject.storage.calibration.coverage` from the columns each
word is in, its weights counted over the namespace's own rows when the index
holds several namespaces (as :mod:`.space_counts` counts them for the SQL
path). A test holds the two together on random stores.

**When.** Only for an index of at most :data:`MAX_ROWS` rows, only once the
store has made :data:`AFTER_RECALLS` keyword recalls in this process (a
one-shot process never reads anything for it), and only for queries of plain
words (a ``word*`` prefix or a word that tokenises to several tokens goes to
the SQL path). Otherwise the caller uses the SQL path.

**What is read.** Every row's id, length (``memories_fts_docsize``) and
scope token, about 5 us a row; a token's postings the first time a query
holds it, from the index itself (``fts5vocab`` instances: the tokens FTS5
stored, so they are exact by construction). Prompts share most of their
words (names, places, the topics of the store), so after a few turns most
tokens are held; memory grows with the prompts' vocabulary, capped at
:data:`MAX_TOKENS` and :data:`MAX_POSTINGS` (past them the least recently used
tokens go, so a wide vocabulary never reloads the common words at once).

**Kept current** like the vector matrix: ``PRAGMA data_version`` and the read
connection's ``total_changes`` (each read connection's own) say something
changed, ``memories_log`` which rows; a changed row is tokenised by a private
FTS5 table with the index's tokenizer. It only ranks: the store's scope,
applied in SQL when the rows are read, still decides which rows a recall may
return. The index itself and FTS5's arithmetic over it live in
:mod:`.keyword_index`; this module decides when to use it, keeps it current
and reads the best rows through the scope.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from memory_inject.storage.calibration import term_weight
from memory_inject.storage.sqlite.changes import LogPosition, logged_since
from memory_inject.storage.sqlite.codec import ENTRY_COLUMNS
from memory_inject.storage.sqlite.keyword_arrays import ranking
from memory_inject.storage.sqlite.keyword_index import MirrorIndex, kept_scores, single_tokens
from memory_inject.storage.sqlite.keyword_postings import read_postings
from memory_inject.storage.sqlite.keyword_rows import pick
from memory_inject.storage.sqlite.keyword_terms import (
    FTS_COLUMNS,
    RowTokenizer,
    corpus_size,
    row_length,
    tokens_of,
)
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = ["AFTER_RECALLS", "MAX_ROWS", "KeywordMirror"]

#: Indexes of at most this many rows are mirrored: up to it the mirror's mean cost per
#: recall, common words' first reads included, is below the FTS5 path's (1.9 against
#: 2.4 ms at 20,000 chat records), and its p50 a third of it; its p99 is 3-5x the FTS5
#: path's while prompts bring new common words (``benchmarks/keyword_sizes.py --paths
#: [--writes]``). Once they are read, a long-lived process's recall is a quarter of the
#: FTS5 path's (``benchmarks/keyword_kept.py --passes 3``, docs/performance.md).
MAX_ROWS = 20_000
#: The mirror is built on this keyword recall of the process, not the first.
AFTER_RECALLS = 4
#: Past this many changed rows the mirror is read again rather than patched.
PATCH_MAX = 256
#: Past this many loaded tokens the least recently used ones' postings are
#: dropped (down to three quarters) and read again as asked for.
MAX_TOKENS = 50_000
#: Past this many postings (a token in a row) held in all, the same: about
#: 80 bytes each with their arrays and terms (pairs and rids shared:
#: ``keyword_postings``), so the postings never hold much more than 48 MB.
MAX_POSTINGS = 600_000
#: A query with an unloaded token that occurs more often than this in the index
#: (all rows, all columns) goes to the SQL path: reading its instances here
#: costs about a microsecond and a half each (a 10 MB row holding the word:
#: seconds), where FTS5 reads a row's matches in C. The reading stops at the
#: bound and the token is remembered as too common.
MAX_LOAD_INSTANCES = 50_000
#: A changed row longer than this (bytes, every indexed column) is not
#: tokenised into the mirror: the mirror is read again instead (ids, lengths
#: and scopes only), which costs the same whatever the rows hold.
PATCH_MAX_BYTES = 1 << 20
#: After a build fails (a deadline, a locked file), this many recalls use SQL first.
BACKOFF = 64

_CONTENT = ENTRY_COLUMNS.index("content")

#: The change log's head and the connection's ``data_version``, in one statement.
_HEAD_AND_VERSION = (
    "SELECT (SELECT max(seq) FROM memories_log), "
    "(SELECT stamp FROM memories_log ORDER BY seq DESC LIMIT 1), "
    "(SELECT data_version FROM pragma_data_version)"
)
#: The indexed columns, of ``m`` (``memories``).
_M_COLUMNS = ", ".join(f"m.{c}" for c in FTS_COLUMNS.replace(" ", "").split(","))
#: Every indexed column's length in bytes, summed (``m`` is ``memories``).
_ROW_BYTES = " + ".join(
    f"ifnull(length(CAST(m.{c} AS BLOB)), 0)" for c in FTS_COLUMNS.replace(" ", "").split(",")
)


class KeywordMirror:
    """One store's mirrored keyword index (see the module docstring), shared by its
    read connections; one recall uses it at a time (it is a few dictionary walks)."""

    def __init__(self, *, max_rows: int = MAX_ROWS, after: int = AFTER_RECALLS) -> None:
        """Nothing is read until :meth:`keyword_hits` decides a mirror pays."""
        self.max_rows = max_rows
        self.after = after
        self.builds = 0  # how many times the index was read whole (tests, benchmarks)
        self._lock = threading.Lock()
        self._index: MirrorIndex | None = None
        # (data_version, total_changes) per read connection when it last saw the index current.
        self._seen: dict[int, tuple[int, int]] = {}
        self._calls = 0
        self._not_before = 0
        self._tokenizer = RowTokenizer()

    def clear(self) -> None:
        """Forget the mirror (the next recall that needs one reads the index again)."""
        with self._lock:
            self._index = None
            self._seen.clear()

    def too_big(self, conn: sqlite3.Connection, stats: TermStats) -> bool:
        """True when no mirror is held and the index is past ``max_rows`` rows (``stats``,
        refreshed on ``conn`` in the recall's snapshot, count them as FTS5 does):
        :meth:`keyword_hits` would answer None, so the caller asks FTS5 at once."""
        if self._index is not None:
            return False
        stats.refresh(conn)
        return stats.rows > self.max_rows

    def keyword_hits(
        self,
        conn: sqlite3.Connection,
        where: tuple[str, str, Sequence[Any]],
        words: Sequence[tuple[str, bool]],
        k: int,
        *,
        scope_tokens: Sequence[str] | None = None,
        rows: dict[str, tuple[Any, ...]] | None = None,
        groups: Sequence[int] | None = None,
        named: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float, float]] | None:
        """What ``keyword_rank.keyword_hits`` returns, from the mirror; None to use SQL.

        ``where`` is ``(namespace, scope, params)``, ``scope_tokens`` the
        session's ``ctx_scope`` tokens (``ddl.scope_tokens``), and
        ``rows`` receives the hits' entry columns by id; ``groups`` names the
        word each of ``words`` spells (``_variants.with_variants``), ``named``
        which contents name a word of the prompt (``_names``). Runs inside
        the recall's read transaction.
        """
        single = single_tokens(words, groups)
        if single is None:
            return None
        phrases, by_word = single
        if not phrases:
            return []
        with self._lock:
            index = self._current(conn)
            if index is None:
                return None
            return _hits(conn, index, where, phrases, k, scope_tokens, rows, by_word, named)

    # -- keeping the index current ------------------------------------------

    def _current(self, conn: sqlite3.Connection) -> MirrorIndex | None:
        self._calls += 1
        index = self._index
        if index is None and (self._calls < self.after or self._calls < self._not_before):
            return None
        # Reading the log first opens the read snapshot: the version read next is its own.
        # One statement (each one lets another thread take the GIL): the log's head,
        # which opens the read snapshot, and this connection's data_version.
        head_row, stamp, dv = conn.execute(_HEAD_AND_VERSION).fetchone()
        head: LogPosition = (0, None) if head_row is None else (int(head_row), stamp)
        version = (int(dv), conn.total_changes)
        # Each read connection has its own data_version: the index is current for
        # this one when nothing changed since it last looked and the log agrees.
        if self._seen.get(id(conn)) == version and (index is None or index.seq == head):
            return index  # unchanged since the last look (None: the index is too big)
        try:
            index = self._refreshed(conn, index, head)
        except sqlite3.Error:
            self._index = None
            self._seen.clear()
            self._not_before = self._calls + BACKOFF
            raise
        if index is not self._index:
            self._seen.clear()
        self._index = index
        self._seen[id(conn)] = version
        return index

    def _refreshed(
        self, conn: sqlite3.Connection, index: MirrorIndex | None, head: LogPosition
    ) -> MirrorIndex | None:
        if index is not None:
            rids = logged_since(conn, index.seq, head, PATCH_MAX)
            if rids is not None and self._patch(conn, index, rids, head):
                return index if len(index.ids) <= self.max_rows else None
        if corpus_size(conn) > self.max_rows:
            return None
        return self._build(conn, head)

    def _build(self, conn: sqlite3.Connection, head: LogPosition) -> MirrorIndex:
        """Every row's id, scope and length; no postings yet (see :class:`MirrorIndex`)."""
        index = MirrorIndex(head)
        # One set of scope tokens per session, shared by its rows.
        scopes: dict[str, frozenset[str]] = {"": frozenset()}
        for rid, key, scope, near, sz, space in conn.execute(
            "SELECT m.rid, m.id, m.ctx_scope, m.ctx_near, d.sz, m.namespace FROM memories AS m "
            "LEFT JOIN memories_fts_docsize AS d ON d.id = m.rid WHERE m.deleted_at IS NULL"
        ):
            text = str(scope) if scope else ""
            tokens = scopes.get(text)
            if tokens is None:
                tokens = scopes[text] = frozenset(tokens_of(text))
            size = row_length(bytes(sz)) if sz else 0
            index.set_row(int(rid), str(key), size, tokens, near is not None, str(space))
        self.builds += 1
        return index

    def _patch(
        self, conn: sqlite3.Connection, index: MirrorIndex, rids: list[int], head: LogPosition
    ) -> bool:
        """Bring ``index`` to ``head``; False (nothing changed) when a changed row is too
        long to tokenise here (:data:`PATCH_MAX_BYTES`): the caller reads it again."""
        found: list[Any] = []
        if rids:
            # Each changed row with its indexed bytes (the last column), in one statement.
            found = conn.execute(
                f"SELECT m.rid, m.id, m.ctx_near, m.namespace, {_M_COLUMNS}, {_ROW_BYTES} "  # noqa: S608
                "FROM memories AS m WHERE m.rid IN (SELECT value FROM json_each(?)) "
                "AND m.deleted_at IS NULL",  # a forgotten row is not in the index (schema 12)
                (json.dumps(rids),),
            ).fetchall()
            if any(int(row[-1]) > PATCH_MAX_BYTES for row in found):
                return False
        for rid in rids:
            index.remove(rid)
        if rids:
            counts, sizes = self._tokenizer.tokenise([(row[0], *row[4:-1]) for row in found])
            for row in found:
                rid = int(row[0])
                near, space = row[2] is not None, str(row[3])
                index.add(rid, str(row[1]), sizes.get(rid, 0), counts.get(rid, {}), near, space)
        index.seq = head
        return True


def _hits(
    conn: sqlite3.Connection,
    index: MirrorIndex,
    where: tuple[str, str, Sequence[Any]],
    phrases: Sequence[str],
    k: int,
    scope_tokens: Sequence[str] | None,
    rows: dict[str, tuple[Any, ...]] | None,
    groups: Sequence[int] | None = None,
    named: Callable[[str], bool] | None = None,
) -> list[tuple[str, float, float]] | None:
    """``keyword_rank.keyword_hits`` from the mirror: the same draw, FTS5's arithmetic;
    None when the query's tokens are too common to read here (the SQL path answers).

    A word in at least half of the rows (``bm25()`` floors its idf at 1e-6)
    neither draws nor adds, as on the SQL path, unless fewer than ``k`` rows
    of the scope hold another word: then the whole query ranks.
    """
    missing = [t for t in dict.fromkeys(phrases) if t not in index.postings]
    if missing and not _load(conn, index, missing, phrases):
        return None  # FTS5 answers (see MAX_LOAD_INSTANCES)
    index.touch(phrases)
    n = len(index.ids)
    postings = index.postings
    df = [len(postings.get(t, ())) for t in phrases]
    scope = None if scope_tokens is None else tuple(scope_tokens)
    draw = [t for t, d in zip(phrases, df, strict=True) if 2 * d < n] or list(phrases)
    keep = index.keeper(phrases)
    ranked = ranking(index, draw, scope)
    kept = pick(conn, index, where, ranked, k, rows, keep)
    if len(kept) < k and len(draw) < len(phrases):
        ranked = ranking(index, phrases, scope)
        kept = pick(conn, index, where, ranked, k, rows, keep)
    mine = None
    if len(index.space_rows) > 1:  # the score counts the namespace's rows, not the file's
        namespace = where[0]
        n = index.space_rows.get(namespace, 0)
        df = [index.space_df(t).get(namespace, 0) for t in phrases]
        space = index.space
        mine = lambda rid: space[rid] == namespace  # noqa: E731
    weights = [term_weight(n, d) for d in df]
    naming = None
    if named is not None and rows is not None and 0 in df:  # absent words, in a named row
        naming = {r for r in kept if named(rows[index.ids[r]][_CONTENT])}
    scores = kept_scores(postings, phrases, weights, df, groups, kept, naming, mine)
    return [(index.ids[r], c, ranked.score(r)) for r, c in zip(kept, scores, strict=True)]


def _load(
    conn: sqlite3.Connection, index: MirrorIndex, missing: list[str], phrases: Sequence[str]
) -> bool:
    """Read the postings of the ``missing`` tokens of ``phrases`` into ``index``; False
    (nothing read) when they are too common to read here (:data:`MAX_LOAD_INSTANCES`).

    The instances stream in and stop at a token's bound, so no count is asked
    first; a token found too common is remembered and never read again by
    this index (a new index, after a rebuild, tries once more).
    """
    if not index.heavy.isdisjoint(missing):
        return False
    if len(index.postings) + len(missing) > MAX_TOKENS or index.held > MAX_POSTINGS:
        # The least recently used go, to three quarters of the bounds (not one token
        # a query); this query's own stay.
        index.evict(set(phrases), 3 * MAX_TOKENS // 4 - len(missing), 3 * MAX_POSTINGS // 4)
    # Each read connection has its own temp schema (only queries that load a token get here).
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_instances "
        "USING fts5vocab(main, memories_fts, instance)"
    )
    loaded = {}
    for token in missing:
        posting = read_postings(conn, "temp.memories_instances", token, MAX_LOAD_INSTANCES)
        if posting is None:
            index.heavy.add(token)
            return False
        loaded[token] = posting
    for token, posting in loaded.items():
        index.load(token, posting)
    return True
