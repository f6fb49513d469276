"""Duplicate collapse for the rerank arm: normalised text, bigram shingles, the lazy pool.

The spec compares every pair of entries for near-duplicates (bigram-shingle
Jaccard). :class:`Candidates` gives the same result judging entries one by
one in score order, through an inverted index of shingles, so only entries
that share a shingle with a kept entry are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from memory_inject._skip_keys import ascii_lower
from memory_inject.models import MemoryEntry
from memory_inject.stages.filters import eligibility_reason

__all__ = ["Candidates", "split_ws"]

_NON_RUST_WS = "\x1c\x1d\x1e\x1f"


def split_ws(text: str) -> list[str]:
    """``str.split()`` with Rust's whitespace set (``\\x1c``-``\\x1f`` are not spaces)."""
    if not any(c in text for c in _NON_RUST_WS):
        return text.split()
    out: list[str] = []
    cur: list[str] = []
    for ch in text:
        if ch.isspace() and ch not in _NON_RUST_WS:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _tokens(content: str) -> list[str]:
    """``content``'s whitespace tokens (Rust's set), ASCII lower-cased, for comparing."""
    return split_ws(ascii_lower(content))


def _shingle_keys(toks: list[str]) -> list[tuple[str, ...]]:
    # Tuples stand for the spec's "a b" strings: tokens hold no spaces, so the
    # two are in one-to-one correspondence, and a lone token is a 1-tuple.
    if len(toks) < 2:
        return [tuple(toks)] if toks else []
    return list(pairwise(toks))


class Candidates:
    """The eligible, de-duplicated pool, produced lazily in score order.

    Equivalent to the spec's eligibility filter followed by ``collapse``: an
    entry's fate depends only on higher-scored entries, so entries are judged
    one by one as the consumer (MMR or the trim) asks for more. Each judged
    entry's shingle set is an int bitset (Jaccard is two popcounts), and an
    inverted index finds the kept entries that share a shingle with it.
    """

    def __init__(
        self,
        pool: Sequence[MemoryEntry],
        order: list[int],
        threshold: float,
        exclude_conversation: bool,
        dropped: dict[str, str],
    ) -> None:
        """``order`` lists ``pool`` indices best first; each drop's reason goes into ``dropped``.

        ``threshold`` is the bigram Jaccard at which an entry duplicates a kept one.
        """
        self.pool = pool
        self.order = order
        self.threshold = threshold
        self.exclude = exclude_conversation
        self.dropped = dropped
        self.kept: list[int] = []
        self.judged = 0
        self._exact: dict[str, int] = {}
        self._ids: dict[tuple[str, ...], int] = {}
        self._masks: list[int] = []
        self._sizes: list[int] = []
        self._index: dict[int, list[int]] = {}  # shingle id -> positions in ``kept``

    def get(self, pos: int) -> int | None:
        """The ``pos``-th kept index, judging more entries as needed; None when exhausted."""
        while len(self.kept) <= pos:
            if self.judged >= len(self.order):
                return None
            self._judge(self.order[self.judged])
            self.judged += 1
        return self.kept[pos]

    def _judge(self, i: int) -> None:
        e = self.pool[i]
        reason = eligibility_reason(e, self.exclude)
        if reason is not None:
            self.dropped[e.key] = reason
            return
        toks = _tokens(e.content)
        n = " ".join(toks)
        first = self._exact.get(n)
        if first is not None:
            self.dropped[e.key] = f"duplicate_of:{self.pool[first].key}"
            return
        self._exact[n] = i
        ids = self._ids
        sh = {ids.setdefault(k, len(ids)) for k in _shingle_keys(toks)}
        mask = 0
        for x in sh:
            mask |= 1 << x
        hit = self._near_duplicate(sh, mask)
        if hit is not None:
            self.dropped[e.key] = f"duplicate_of:{self.pool[self.kept[hit]].key}"
            # Its exact copies are dropped too (the spec's order); they name the entry
            # that stayed, not this one.
            self._exact[n] = self.kept[hit]
            return
        pos = len(self.kept)
        self.kept.append(i)
        self._masks.append(mask)
        self._sizes.append(len(sh))
        for x in sh:
            self._index.setdefault(x, []).append(pos)

    def _near_duplicate(self, sh: set[int], mask: int) -> int | None:
        candidates: set[int] = set()
        for x in sh:
            hits = self._index.get(x)
            if hits:
                candidates.update(hits)
        n = len(sh)
        for pos in sorted(candidates):
            inter = (mask & self._masks[pos]).bit_count()
            if inter / (n + self._sizes[pos] - inter) >= self.threshold:
                return pos
        return None
