"""The in-process copy of a small keyword index, and FTS5's arithmetic over it.

:class:`MirrorIndex` holds every row's id, length and scope tokens and the
postings of the tokens asked for so far; :func:`bm25_scores` is ``bm25()``
computed the way FTS5 computes it (:mod:`.keyword_arrays` ranks by it),
:func:`~.keyword_scores.kept_scores` the coverage scores of the rows kept.
:class:`~.keyword_mirror.KeywordMirror` builds, patches and reads it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memory_inject.storage.calibration import fts5_idf
from memory_inject.storage.sqlite.changes import LogPosition
from memory_inject.storage.sqlite.keyword_phrases import K1, OWN_MASK, B
from memory_inject.storage.sqlite.keyword_postings import (
    SCOPE_COL,
    Posting,
    posting_of,
    shared,
)
from memory_inject.storage.sqlite.keyword_scores import kept_scores
from memory_inject.storage.sqlite.keyword_terms import tokens_of, tokens_of_all

if TYPE_CHECKING:
    from memory_inject.storage.sqlite.keyword_arrays import IndexArrays

__all__ = [
    "MirrorIndex",
    "bm25_scores",
    "bm25_term",
    "kept_scores",
    "single_tokens",
]


class MirrorIndex:
    """Every row's id, length and scope, and the postings of the tokens asked for so far.

    Current at ``memories_log`` position ``seq``. A token's postings are read
    from the index the first time a query holds it and kept current from
    then on, so what is read grows with the vocabulary of the prompts, not
    with the store; ``loaded`` says which of those tokens each row holds.
    """

    __slots__ = (
        "_scopes",
        "_shares",
        "_space_df",
        "arrays",
        "by_scope",
        "heavy",
        "held",
        "ids",
        "loaded",
        "near",
        "near_rows",
        "postings",
        "read",
        "rids",
        "scope",
        "seq",
        "size",
        "space",
        "space_rows",
        "total",
    )

    def __init__(self, seq: LogPosition) -> None:
        """An empty index at ``seq``."""
        self.seq = seq
        self.ids: dict[int, str] = {}
        # Each held rid's one int object, which every posting of the row keys on (a rid read
        # with a token's instances is a new object: 32 bytes a posting).
        self.rids: dict[int, int] = {}
        self.size: dict[int, int] = {}  # tokens in the row, every column (bm25()'s D)
        self.scope: dict[int, frozenset[str]] = {}  # the row's ctx_scope tokens
        # The rows of each ctx_scope token: a session's rows without walking every row.
        self.by_scope: dict[str, set[int]] = {}
        self.near: dict[int, bool] = {}  # whether a row has near context (``ctx_near``)
        self.near_rows = 0  # how many rows do
        self.total = 0
        self.postings: dict[str, dict[int, Posting]] = {}  # loaded tokens only
        self.held = 0  # postings held, every token
        self.heavy: set[str] = set()  # tokens found too common to read (never read again)
        # The loaded tokens each row holds, a list per row (a set costs about four times the
        # memory, and a row holds a few dozen of the tokens asked for).
        self.loaded: dict[int, list[str]] = {}
        # The entry columns of rows recalls read, until the row changes (:mod:`.keyword_rows`).
        self.read: dict[int, tuple[Any, ...]] = {}
        self._scopes: dict[tuple[str, ...], tuple[frozenset[str], set[int]]] = {}
        # Each loaded token's bm25() term per row, while no row and no posting changes.
        self._shares: dict[str, dict[int, float]] = {}
        # The same numbers as numpy arrays, once a ranking asks (:mod:`.keyword_arrays`),
        # told of every change below.
        self.arrays: IndexArrays | None = None
        self.space: dict[int, str] = {}  # each row's namespace
        self.space_rows: dict[str, int] = {}  # each namespace's rows
        # Each loaded token's rows per namespace, while its postings do not change (asked
        # only on an index of several namespaces).
        self._space_df: dict[str, dict[str, int]] = {}

    def in_scope(self, scope_tokens: tuple[str, ...]) -> set[int]:
        """The rows whose ``ctx_scope`` holds one of ``scope_tokens`` (cached, kept current)."""
        cached = self._scopes.get(scope_tokens)
        if cached is None:
            wanted = frozenset(t for s in scope_tokens for t in tokens_of(s))
            by_scope = self.by_scope
            rows = set().union(*(by_scope[t] for t in wanted if t in by_scope))
            if len(self._scopes) >= 64:
                self._scopes.clear()
            cached = self._scopes[scope_tokens] = (wanted, rows)
        return cached[1]

    def shares(self, token: str) -> dict[int, float]:
        """``{rid: token's term of bm25()}`` for every row holding ``token`` (cached).

        The term FTS5's ``fts5Bm25Function`` adds for the token's phrase: its idf
        over every row times the row's weighted count over its length part, in
        the same operations and order, so the sum over a query's phrases is
        FTS5's to the bit. A changed row forgets every token's terms (the
        idf, the lengths and the average move), a reloaded token its own, and
        dropped postings theirs: at most one number per posting held.
        """
        cached = self._shares.get(token)
        if cached is not None:
            return cached
        posting = self.postings.get(token)
        if not posting:
            return {}
        n = len(self.ids)
        size = self.size
        avgdl = self.total / n if n else 1.0
        idf = fts5_idf(n, len(posting))
        cached = {rid: bm25_term(idf, f, size[rid], avgdl) for rid, (f, _) in posting.items()}
        self._shares[token] = cached
        return cached

    def space_df(self, token: str) -> dict[str, int]:
        """``{namespace: rows holding token}`` of a loaded ``token`` (cached)."""
        cached = self._space_df.get(token)
        if cached is None:
            cached = {}
            space = self.space
            for rid in self.postings.get(token, ()):
                name = space[rid]
                cached[name] = cached.get(name, 0) + 1
            self._space_df[token] = cached
        return cached

    def set_row(
        self,
        rid: int,
        key: str,
        size: int,
        scope: frozenset[str],
        near: bool = False,
        namespace: str = "",
    ) -> None:
        """Hold row ``rid``: its id, length, scope tokens, whether it has near context
        (``ctx_near``) and its namespace; postings come separately."""
        self._shares.clear()
        namespace = sys.intern(namespace)  # one string object per namespace, not per row
        self.space_rows[namespace] = self.space_rows.get(namespace, 0) + 1
        self.space[rid] = namespace
        self.read.pop(rid, None)
        for wanted, rows in self._scopes.values():
            if scope & wanted:
                rows.add(rid)
        self.near_rows += near - self.near.get(rid, False)
        self.near[rid] = near
        self.ids[rid] = key
        self.rids.setdefault(rid, rid)
        self.size[rid] = size
        self.total += size
        self._unscope(rid)
        self.scope[rid] = scope
        for token in scope:
            self.by_scope.setdefault(token, set()).add(rid)
        if self.arrays is not None:
            self.arrays.row_set(self, rid, size)

    def _unscope(self, rid: int) -> None:
        for token in self.scope.pop(rid, ()):
            rows = self.by_scope[token]
            rows.discard(rid)
            if not rows:
                del self.by_scope[token]

    def keeper(self, tokens: Sequence[str]) -> Callable[[int], bool]:
        """Whether a recall of ``tokens`` (their postings held) may return a row: one
        without near context, or one holding a token in its own columns (``ddl.OWN_MATCH``
        on the SQL path)."""
        near, held = self.near, [self.postings.get(t, {}) for t in dict.fromkeys(tokens)]

        def keep(rid: int) -> bool:
            if not near.get(rid):
                return True
            for posting in held:
                p = posting.get(rid)
                if p is not None and p[1] & OWN_MASK:
                    return True
            return False

        return keep

    def load(self, token: str, posting: dict[int, Posting]) -> dict[int, Posting]:
        """Keep ``token``'s postings (:func:`~.keyword_postings.posting_of` of each row
        holding it, or the same pair from its instances), each on the row's one rid
        object and with the one equal pair (:func:`~.keyword_postings.shared`)."""
        self._shares.pop(token, None)  # the other tokens' terms do not move
        self._space_df.pop(token, None)
        if self.arrays is not None:
            self.arrays.token_changed(token)
        if token in self.postings:
            self._drop(token)
        rids, share = self.rids, shared
        posting = {rids.get(rid, rid): share(p) for rid, p in posting.items()}
        self.held += len(posting)
        self.postings[token] = posting
        loaded = self.loaded
        for rid in posting:
            held = loaded.get(rid)
            if held is None:
                loaded[rid] = [token]
            else:
                held.append(token)
        return posting

    def add(
        self,
        rid: int,
        key: str,
        size: int,
        counts: dict[str, list[int]],
        near: bool = False,
        namespace: str = "",
    ) -> None:
        """Hold row ``rid`` from ``{token: instances per column}`` (a changed row)."""
        scope = frozenset(t for t, per_col in counts.items() if per_col[SCOPE_COL])
        self.set_row(rid, key, size, scope, near, namespace)
        held = [t for t in counts if t in self.postings]
        spaces, name = self._space_df, self.space[rid]
        for token in held:
            new = rid not in self.postings[token]
            self.held += new
            if new and token in spaces:  # kept current: a write never recounts a token
                spaces[token][name] = spaces[token].get(name, 0) + 1
            pair = self.postings[token][rid] = posting_of(counts[token])
            if self.arrays is not None:
                self.arrays.posting_set(token, rid, pair[0], new)
        if held:
            self.loaded[rid] = held

    def remove(self, rid: int) -> None:
        """Drop row ``rid`` (nothing if it is not held)."""
        self.read.pop(rid, None)
        if rid not in self.ids:
            return
        self._shares.clear()
        for _, rows in self._scopes.values():
            rows.discard(rid)
        del self.ids[rid]
        del self.rids[rid]
        name = self.space.pop(rid)
        self.space_rows[name] -= 1
        if not self.space_rows[name]:
            del self.space_rows[name]
        self.near_rows -= self.near.pop(rid, False)
        self._unscope(rid)
        self.total -= self.size.pop(rid)
        if self.arrays is not None:
            self.arrays.row_removed(rid, self.loaded.get(rid, ()))
        spaces = self._space_df
        for token in self.loaded.pop(rid, ()):
            gone = self.postings[token].pop(rid, None) is not None
            self.held -= gone
            if gone and token in spaces:
                spaces[token][name] -= 1

    def touch(self, tokens: Iterable[str]) -> None:
        """Mark the loaded ``tokens`` as just used: :meth:`evict` drops them last."""
        postings = self.postings
        for token in tokens:
            posting = postings.pop(token, None)
            if posting is not None:
                postings[token] = posting  # to the end: ``postings`` is oldest-used first

    def evict(self, keep: Collection[str], tokens: int, postings: int) -> None:
        """Forget the least recently used tokens' postings but ``keep``'s until at most
        ``tokens`` tokens and ``postings`` postings are held (or only ``keep``'s are)."""
        for token in list(self.postings):
            if len(self.postings) <= tokens and self.held <= postings:
                return
            if token not in keep:
                self._drop(token)

    def _drop(self, token: str) -> None:
        posting = self.postings.pop(token)
        self._shares.pop(token, None)
        self._space_df.pop(token, None)
        if self.arrays is not None:
            self.arrays.token_changed(token)
        self.held -= len(posting)
        loaded = self.loaded
        for rid in posting:
            held = loaded.get(rid)
            if held is not None:
                held.remove(token)
                if not held:
                    del loaded[rid]


def bm25_term(idf: Any, f: Any, length: Any, avgdl: float) -> Any:
    """One phrase's term of FTS5's ``bm25()`` for a row: the same operations in the same
    order as ``fts5Bm25Function``, on floats or elementwise on numpy arrays (the same
    bits either way). The length part is ``K1 * (1 - B + B * D / avgdl)``."""
    return idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * length / avgdl)))


def bm25_scores(
    index: MirrorIndex, phrases: Sequence[str], allowed: set[int] | None
) -> dict[int, float]:
    """FTS5's ``bm25()`` over ``phrases`` (higher is better) of every row holding one.

    The same arithmetic in the same order as ``fts5Bm25Function`` (idf over
    every row of the index), so the scores are FTS5's to the bit. With
    ``allowed`` only those rows are scored (what ANDing the scope's MATCH does).
    """
    scores: dict[int, float] = {}
    get = scores.get
    for token in phrases:
        shares = index.shares(token)
        if allowed is None:
            for rid, share in shares.items():
                scores[rid] = get(rid, 0.0) + share
        else:
            for rid, share in shares.items():
                if rid in allowed:
                    scores[rid] = get(rid, 0.0) + share
    return scores


def single_tokens(
    words: Sequence[tuple[str, bool]], groups: Sequence[int] | None
) -> tuple[list[str], list[int] | None] | None:
    """The mirror's phrases: each word's one index token (a word with none is left out),
    and each one's word when ``groups`` says some spell one; None when a word is a
    prefix or several tokens (the SQL path answers those)."""
    phrases, by_word = [], []
    for (_, star), tokens, g in zip(
        words, tokens_of_all([w for w, _ in words]), groups or range(len(words)), strict=True
    ):
        if not tokens:
            continue
        if star or len(tokens) > 1:
            return None
        phrases.append(tokens[0])
        by_word.append(g)
    return phrases, None if groups is None else by_word
