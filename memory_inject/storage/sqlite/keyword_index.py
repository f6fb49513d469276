"""The in-process copy of a small keyword index, and FTS5's arithmetic over it.

:class:`MirrorIndex` holds every row's id, length and scope tokens and the
postings of the tokens asked for so far; :func:`bm25_scores` is ``bm25()``
computed the way FTS5 computes it, :func:`best_rows` the order FTS5 gives
(score, then id), :func:`present_weight` what a posting proves for the
coverage score. :class:`~.keyword_mirror.KeywordMirror` builds, patches and
reads it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from memory_inject.storage.calibration import fts5_idf
from memory_inject.storage.sqlite.changes import LogPosition
from memory_inject.storage.sqlite.keyword_phrases import BM25_WEIGHTS, COVERAGE_WEIGHTS, K1, B
from memory_inject.storage.sqlite.keyword_terms import COLUMN_NAMES, tokens_of

__all__ = [
    "POSTINGS_SELECT",
    "SCOPE_COL",
    "MirrorIndex",
    "Posting",
    "best_rows",
    "bm25_scores",
    "posting_of",
    "present_weight",
]

#: The ``ctx_scope`` column's position, by the names fts5vocab reports.
SCOPE_COL = COLUMN_NAMES.index("ctx_scope")

#: One posting: (the token's weighted count in the row, a bit per text column it is in).
Posting = tuple[float, int]


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
        "held",
        "ids",
        "loaded",
        "postings",
        "scope",
        "seq",
        "size",
        "total",
    )

    def __init__(self, seq: LogPosition) -> None:
        """An empty index at ``seq``."""
        self.seq = seq
        self.ids: dict[int, str] = {}
        self.size: dict[int, int] = {}  # tokens in the row, every column (bm25()'s D)
        self.scope: dict[int, frozenset[str]] = {}  # the row's ctx_scope tokens
        self.total = 0
        self.postings: dict[str, dict[int, Posting]] = {}  # loaded tokens only
        self.held = 0  # postings held, every token
        self.loaded: dict[int, set[str]] = {}
        self._scopes: dict[tuple[str, ...], tuple[frozenset[str], set[int]]] = {}
        # Each loaded token's bm25() term per row, while no row and no posting changes.
        self._shares: dict[str, dict[int, float]] = {}

    def in_scope(self, scope_tokens: tuple[str, ...]) -> set[int]:
        """The rows whose ``ctx_scope`` holds one of ``scope_tokens`` (cached, kept current)."""
        cached = self._scopes.get(scope_tokens)
        if cached is None:
            wanted = frozenset(t for s in scope_tokens for t in tokens_of(s))
            rows = {rid for rid, toks in self.scope.items() if toks & wanted}
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
        cached = {
            # bm25()'s length part is K1 * (1 - B + B * D / avgdl).
            rid: idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * size[rid] / avgdl)))
            for rid, (f, _) in posting.items()
        }
        self._shares[token] = cached
        return cached

    def set_row(self, rid: int, key: str, size: int, scope: frozenset[str]) -> None:
        """Hold row ``rid``: its id, length and scope tokens (postings come separately)."""
        self._shares.clear()
        for wanted, rows in self._scopes.values():
            if scope & wanted:
                rows.add(rid)
        self.ids[rid] = key
        self.size[rid] = size
        self.total += size
        self.scope[rid] = scope

    def load(self, token: str, posting: dict[int, Posting]) -> dict[int, Posting]:
        """Keep ``token``'s postings (:func:`posting_of` of each row holding it, or the
        same pair computed in SQL: :data:`POSTINGS_SELECT`)."""
        self._shares.pop(token, None)  # the other tokens' terms do not move
        self.held += len(posting) - len(self.postings.get(token, ()))
        self.postings[token] = posting
        for rid in posting:
            self.loaded.setdefault(rid, set()).add(token)
        return posting

    def add(self, rid: int, key: str, size: int, counts: dict[str, list[int]]) -> None:
        """Hold row ``rid`` from ``{token: instances per column}`` (a changed row)."""
        scope = frozenset(t for t, per_col in counts.items() if per_col[SCOPE_COL])
        self.set_row(rid, key, size, scope)
        held = [t for t in counts if t in self.postings]
        for token in held:
            self.held += rid not in self.postings[token]
            self.postings[token][rid] = posting_of(counts[token])
        if held:
            self.loaded[rid] = set(held)

    def remove(self, rid: int) -> None:
        """Drop row ``rid`` (nothing if it is not held)."""
        if rid not in self.ids:
            return
        self._shares.clear()
        for _, rows in self._scopes.values():
            rows.discard(rid)
        del self.ids[rid]
        self.scope.pop(rid)
        self.total -= self.size.pop(rid)
        for token in self.loaded.pop(rid, ()):
            self.held -= self.postings[token].pop(rid, None) is not None

    def drop_postings(self) -> None:
        """Forget every loaded token's postings (read again as queries ask for them)."""
        self.postings.clear()
        self.loaded.clear()
        self._shares.clear()
        self.held = 0


#: :func:`posting_of` of every (token, row) of an ``fts5vocab`` instance table, in SQL:
#: ``(term, doc, weighted count, text-column mask)``, one row per token and row, so a
#: common word's postings reach Python as pairs rather than as instances. The weights
#: are dyadic, so the sum is exactly :func:`posting_of`'s whatever the order; the
#: mask is the sum of the distinct column bits. ``{table}`` and ``{marks}`` are
#: filled in by the caller.
POSTINGS_SELECT = (
    "SELECT term, doc, sum(CASE col "  # noqa: S608 - constants
    + " ".join(f"WHEN '{c}' THEN {BM25_WEIGHTS[i]!r}" for i, c in enumerate(COLUMN_NAMES))
    + " END), sum(DISTINCT CASE col "
    + " ".join(f"WHEN '{c}' THEN {1 << i}" for i, c in enumerate(COLUMN_NAMES) if c != "ctx_scope")
    + " ELSE 0 END) FROM {table} WHERE term IN ({marks}) GROUP BY term, doc"
)


def posting_of(per_col: list[int]) -> Posting:
    """``(weighted count, text-column mask)`` from a token's instances per column."""
    f, mask = 0.0, 0
    for col, n in enumerate(per_col):
        if n:
            f += BM25_WEIGHTS[col] * n  # dyadic weights: the same sum as one per instance
            if col != SCOPE_COL:
                mask |= 1 << col
    return f, mask


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


def best_rows(scores: dict[int, float], ids: dict[int, str], m: int) -> list[int]:
    """The ``m`` best rids by score then id (every row tied with the m-th weighed by id)."""
    if len(scores) > 2 * m:
        best = heapq.nlargest(m, scores.values())
        cut = best[-1]
        pool = [r for r, sc in scores.items() if sc >= cut]
    else:
        pool = list(scores)
    pool.sort(key=lambda r: (-scores[r], ids[r]))
    return pool[:m]


#: What a hit in each text column proves (``COVERAGE_WEIGHTS``), per column mask.
_MASK_WEIGHTS: dict[int, float] = {}


def present_weight(posting: Posting | None) -> float:
    """The best coverage weight among the columns a posting's token is in."""
    if posting is None:
        return 0.0
    mask = posting[1]
    weight = _MASK_WEIGHTS.get(mask)
    if weight is None:
        weight = max((w for c, w in enumerate(COVERAGE_WEIGHTS) if mask >> c & 1), default=0.0)
        _MASK_WEIGHTS[mask] = weight
    return weight
