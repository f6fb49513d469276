"""Query-term statistics for calibrated keyword scores on the SQLite store.

FTS5's ``bm25()`` is a sum over the query's phrases of ``idf * tf-part``; it
is comparable between rows of one query, not between queries. Dividing it by
the query's *ideal* (:func:`memory_inject.storage.calibration.keyword_score`)
needs each phrase's idf, which needs the phrase's tokens exactly as the
index's ``porter unicode61`` tokenizer makes them ("Deploys" -> ``deploi``,
``foo_bar`` -> ``foo bar``). A plain ASCII word is stemmed in Python exactly as
FTS5 stems it (:mod:`.porter`, held to SQLite's tokenizer by a test); any other word
is tokenised by a private in-memory FTS5 table (once: both are cached), and
the store's own index answers document frequencies through an ``fts5vocab``
table and the row count through FTS5's averages record.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from memory_inject.storage.sqlite.ddl import FTS_COLUMNS
from memory_inject.storage.sqlite.ddl_live import TOKENIZE
from memory_inject.storage.sqlite.porter import ascii_row_counts, ascii_tokens

__all__ = [
    "COLUMN_NAMES",
    "FTS_COLUMNS",
    "RowTokenizer",
    "corpus_size",
    "document_frequencies",
    "ensure_vocab",
    "grouped_counts",
    "row_length",
    "tokens_of",
    "tokens_of_all",
    "varints",
]

#: The index's columns, in order.
COLUMN_NAMES = tuple(c.strip() for c in FTS_COLUMNS.split(","))
_COL = {name: i for i, name in enumerate(COLUMN_NAMES)}

_tok_lock = threading.Lock()
_tok_conn: sqlite3.Connection | None = None
_parents: list[sqlite3.Connection] = []  # a parent's tokenizer, never used or closed here


def _after_fork_in_child() -> None:
    """A child of ``fork()`` makes its own tokenizer (``forks.py``): a parent's thread may
    have held the lock, or been inside the parent's connection."""
    global _tok_lock, _tok_conn
    if _tok_conn is not None:
        _parents.append(_tok_conn)
    _tok_lock, _tok_conn = threading.Lock(), None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _tokenizer() -> sqlite3.Connection:
    global _tok_conn  # noqa: PLW0603 - one private connection per process, made on first use
    if _tok_conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize={TOKENIZE})")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        _tok_conn = conn
    return _tok_conn


#: Words up to this long are cached: a prompt's real words are short, and a cache keyed by
#: words of any length kept megabytes per distinct long prompt, for good (issue 25). With
#: at most :data:`_CACHED` entries the cache holds a few tens of MB at the very most.
_CACHED_WORD = 64
_CACHED = 65536


#: A query word longer than this is searched for nothing: no stored word is that long,
#: and FTS5 cuts a token at 32 KiB inside a character, after which its vocabulary cannot
#: be read ("Could not decode to UTF-8 column 'term'": a prompt holding 10,923 CJK
#: characters in one run failed every recall).
MAX_WORD_CHARS = 1024


def tokens_of(word: str) -> tuple[str, ...]:
    """The index tokens of one query word, in order (empty when it has none)."""
    if len(word) > MAX_WORD_CHARS:
        return ()
    if len(word) > _CACHED_WORD:
        return _tokenize(word)
    return _cached_tokens(word)


def tokens_of_all(words: Sequence[str]) -> list[tuple[str, ...]]:
    """:func:`tokens_of` of each word; the cached-size words not seen before are
    tokenised together first (a new prompt's words cost one round trip, not one each)."""
    if _cached_tokens.cache_info().currsize < len(_seen):
        # The cache was cleared (``cache_clear``): what it held is not seen any more.
        _seen.clear()
    fresh = [w for w in dict.fromkeys(words) if len(w) <= _CACHED_WORD and w not in _seen]
    if len(fresh) > 1:
        _prefetched.tokens = dict(zip(fresh, _tokenize_many(fresh), strict=True))
        try:
            return [tokens_of(w) for w in words]
        finally:
            _prefetched.tokens = None
    return [tokens_of(w) for w in words]


#: The words handed to the cache so far (cleared with it in size, and when the cache
#: was cleared: it never holds fewer words than this set unless ``cache_clear`` ran):
#: which of a prompt's words :func:`tokens_of_all` tokenises together. A word the
#: cache has let go since is simply tokenised alone again.
_seen: set[str] = set()
#: This thread's words :func:`tokens_of_all` just tokenised, for :func:`_cached_tokens`.
_prefetched = threading.local()


@functools.lru_cache(maxsize=_CACHED)
def _cached_tokens(word: str) -> tuple[str, ...]:
    if len(_seen) >= _CACHED:
        _seen.clear()
    _seen.add(word)
    ready = getattr(_prefetched, "tokens", None)
    if ready is not None and word in ready:
        return ready[word]  # type: ignore[no-any-return]
    return _tokenize(word)


def _tokenize_many(words: Sequence[str]) -> list[tuple[str, ...]]:
    """The index tokens of each of ``words``: plain ASCII words in Python
    (:func:`.porter.ascii_tokens`), the others in one round trip (see :func:`_tokenize`)."""
    fast = [ascii_tokens(w) for w in words]
    rest = [w for w, t in zip(words, fast, strict=True) if t is None]
    if not rest:
        return fast  # type: ignore[return-value]
    asked = iter(_sql_tokenize_many(rest))
    return [t if t is not None else next(asked) for t in fast]


def _sql_tokenize_many(words: Sequence[str]) -> list[tuple[str, ...]]:
    with _tok_lock:
        conn = _tokenizer()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(words, 1))
            rows = conn.execute("SELECT doc, term FROM v ORDER BY doc, offset").fetchall()
        finally:
            conn.execute("ROLLBACK")
    out: list[list[str]] = [[] for _ in words]
    for doc, term in rows:
        out[int(doc) - 1].append(str(term))
    return [tuple(t) for t in out]


def _tokenize(word: str) -> tuple[str, ...]:
    fast = ascii_tokens(word)
    return fast if fast is not None else _sql_tokenize(word)


def _sql_tokenize(word: str) -> tuple[str, ...]:
    with _tok_lock:
        conn = _tokenizer()
        # Rolled back, not deleted: half the cost (FTS5 re-tokenises a deleted row).
        conn.execute("BEGIN")
        try:
            conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (word,))
            rows = conn.execute("SELECT term FROM v ORDER BY offset").fetchall()
        finally:
            conn.execute("ROLLBACK")
    return tuple(str(r[0]) for r in rows)


#: ``{rid: {token: instances per column}}``: rows as the index's tokenizer sees them.
RowTokens = dict[int, dict[str, list[int]]]


def instance_counts(rows: Iterable[tuple[Any, ...]]) -> RowTokens:
    """:data:`RowTokens` from ``fts5vocab`` instance rows ``(term, doc, col)``."""
    out: RowTokens = {}
    width = len(COLUMN_NAMES)
    for term, doc, col in rows:
        per_row = out.get(doc)
        if per_row is None:
            per_row = out[doc] = {}
        per_col = per_row.get(term)
        if per_col is None:
            per_col = per_row[term] = [0] * width
        per_col[_COL[col]] += 1
    return out


def grouped_counts(rows: Iterable[tuple[Any, ...]]) -> dict[str, dict[int, list[int]]]:
    """``{term: {rid: instances per column}}`` from ``(term, doc, col, instances)`` rows
    (``fts5vocab`` instance rows grouped by term, doc and column)."""
    out: dict[str, dict[int, list[int]]] = {}
    width = len(COLUMN_NAMES)
    for term, doc, col, n in rows:
        per_term = out.get(term)
        if per_term is None:
            per_term = out[term] = {}
        per_col = per_term.get(doc)
        if per_col is None:
            per_col = per_term[doc] = [0] * width
        per_col[_COL[col]] += n
    return out


class RowTokenizer:
    """Rows tokenised as the store's index tokenises them: a private FTS5 table, same tokenizer.

    For caches that follow writes: a changed row's tokens without re-reading the index.
    """

    def __init__(self) -> None:
        """Nothing is opened until the first :meth:`tokenise`."""
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def tokenise(self, rows: Sequence[tuple[Any, ...]]) -> tuple[RowTokens, dict[int, int]]:
        """``(tokens, lengths)`` of ``rows``, each ``(rid, *the index's column texts)``.

        A row whose columns are plain ASCII text is split and stemmed in Python
        (:func:`ascii_row_counts`); the others go through the private FTS5 table."""
        counts: RowTokens = {}
        sizes: dict[int, int] = {}
        rest = []
        for row in rows:
            got = ascii_row_counts(row[1:], len(COLUMN_NAMES), tokens_of)
            if got is None:
                rest.append(row)
            else:
                counts[int(row[0])], sizes[int(row[0])] = got
        if rest:
            more, more_sizes = self._sql_tokenise(rest)
            counts.update(more)
            sizes.update(more_sizes)
        return counts, sizes

    def _sql_tokenise(self, rows: Sequence[tuple[Any, ...]]) -> tuple[RowTokens, dict[int, int]]:
        with self._lock:
            if self._conn is None:
                conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
                conn.execute(
                    f"CREATE VIRTUAL TABLE t USING fts5({FTS_COLUMNS}, tokenize={TOKENIZE})"
                )
                conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
                self._conn = conn
            conn = self._conn
            marks = ", ".join("?" * (1 + len(COLUMN_NAMES)))
            # Rolled back, not deleted: FTS5 tokenises a deleted row again.
            conn.execute("BEGIN")
            try:
                conn.executemany(
                    f"INSERT INTO t(rowid, {FTS_COLUMNS}) VALUES ({marks})",  # noqa: S608
                    rows,
                )
                counts = instance_counts(conn.execute("SELECT term, doc, col FROM v"))
                sizes = {
                    int(rid): row_length(bytes(sz))
                    for rid, sz in conn.execute("SELECT id, sz FROM t_docsize")
                }
            finally:
                conn.execute("ROLLBACK")
        return counts, sizes


def ensure_vocab(conn: sqlite3.Connection) -> None:
    """Create this connection's ``temp.memories_vocab`` view of the index (idempotent)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_vocab "
        "USING fts5vocab(main, memories_fts, row)"
    )


def document_frequencies(conn: sqlite3.Connection, tokens: Sequence[str]) -> dict[str, int]:
    """``{token: rows containing it}`` for the tokens the index holds (absent ones are 0)."""
    wanted = sorted(set(tokens))
    if not wanted:
        return {}
    marks = ", ".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT term, doc FROM temp.memories_vocab WHERE term IN ({marks})",  # noqa: S608
        wanted,
    ).fetchall()
    return {str(t): int(d) for t, d in rows}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """SQLite's varint (big-endian 7-bit groups, a full 9th byte) at ``pos``."""
    value = 0
    for i in range(9):
        if pos + i >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos + i]
        if i == 8:
            return (value << 8) | byte, pos + 9
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, pos + i + 1
    raise AssertionError("unreachable")  # pragma: no cover


def varints(data: bytes) -> list[int]:
    """Every varint of ``data``, in order (an FTS5 averages or docsize record)."""
    out, pos = [], 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        out.append(value)
    return out


def row_length(data: bytes) -> int:
    """A docsize record's varints summed: the row's tokens, every column (bm25()'s D).
    Each column of fewer than 128 tokens is one byte under 0x80, so most records are
    summed as they are (``isascii``: every byte under 0x80) without decoding them in
    Python (the mirror's build at 20k rows: 126 → 63 ms with the joined read)."""
    return sum(data) if data.isascii() else sum(varints(data))


def corpus_size(conn: sqlite3.Connection) -> int:
    """The row count FTS5's ``bm25()`` uses (the first varint of its averages record)."""
    row = conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0
    return _varint(bytes(row[0]), 0)[0]
