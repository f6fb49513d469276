"""The gated rerank arm: blend, eligibility, duplicate collapse, MMR, floor, trim.

Output is exactly the spec's (section 5, stage 3b), which orders the whole pool
with a cubic MMR and compares all pairs for near-duplicates. This version does
far less work for the same result:

* near-duplicates are found through an inverted index of bigram shingles, so
  only entries that share a shingle with a kept entry are compared;
* MMR keeps each candidate's redundancy (max similarity to the selected set)
  up to date incrementally, one similarity per candidate per pick;
* MMR picks are produced lazily and stop once ``final_limit`` entries have
  passed the floor, which is all the spec's trim would keep.

``tests/reference_rerank.py`` holds the straightforward version; a hypothesis
test proves both give the same entries in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from itertools import pairwise

from memory_inject.config import MAX_CANDIDATE_POOL, RerankConfig
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.stages import (
    StageContext,
    StageResult,
    age_days,
    ascii_lower,
    decay_factor,
    eligibility_reason,
    format_score,
)

__all__ = [
    "blended",
    "bounded_pool_cap",
    "rerank",
    "rerank_recall_limit",
]

_EPS = 2.220446049250313e-16  # f64::EPSILON
_NON_RUST_WS = "\x1c\x1d\x1e\x1f"


def bounded_final_limit(n: int) -> int:
    return max(1, min(n, MAX_CANDIDATE_POOL))


def bounded_pool_cap(final_limit: int, cap: int, ceiling: int = MAX_CANDIDATE_POOL) -> int:
    return max(min(cap, ceiling), bounded_final_limit(final_limit), 1)


def rerank_recall_limit(limit: int, rc: RerankConfig) -> int:
    """How many candidates to ask each scope for when the rerank arm is on."""
    final = bounded_final_limit(limit)
    pool_cap = bounded_pool_cap(final, final * max(rc.candidate_multiplier, 1), rc.pool_cap)
    requested = max(limit * rc.candidate_multiplier, limit, pool_cap)
    return bounded_pool_cap(max(limit, final), requested, rc.pool_cap)


def recency_factor(e: MemoryEntry, now: datetime, half_life: float = 7.0) -> float:
    if e.category == MemoryCategory.CORE:
        return 1.0
    age = age_days(e.timestamp, now)
    return 1.0 if age is None else decay_factor(age, half_life)


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if x < lo else hi if x > hi else x


def blended(h: float, i: float, r: float, iw: float, rw: float) -> float:
    """``0.7*relevance + 0.2*importance + 0.1*recency`` for the default weights."""
    if abs(iw - 0.2) < _EPS and abs(rw - 0.1) < _EPS:
        return _clamp(0.7 * h + 0.2 * i + 0.1 * r)
    iw = _clamp(iw)
    rw = _clamp(rw)
    ret = max(0.0, 1.0 - iw - rw)
    total = ret + iw + rw
    if total < _EPS:
        return h
    return (h * ret + i * iw + r * rw) / total


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


def normalize(content: str) -> str:
    return ascii_lower(" ".join(split_ws(content)))


def shingles(normalized: str) -> frozenset[str]:
    toks = normalized.split(" ") if normalized else []
    if len(toks) < 2:
        return frozenset(toks)
    return frozenset(f"{a} {b}" for a, b in pairwise(toks))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def collapse(
    entries: Sequence[MemoryEntry], scores: Sequence[float], threshold: float
) -> tuple[list[int], dict[int, int]]:
    """Indices kept (score-desc order) and ``{dropped index: index it duplicates}``."""
    order = sorted(range(len(entries)), key=lambda i: -scores[i])
    kept: list[int] = []
    dups: dict[int, int] = {}
    exact: dict[str, int] = {}
    kept_shingles: list[frozenset[str]] = []
    index: dict[str, list[int]] = {}  # shingle -> positions in ``kept``
    for i in order:
        n = normalize(entries[i].content)
        first = exact.get(n)
        if first is not None:
            dups[i] = first
            continue
        exact[n] = i
        sh = shingles(n)
        hit = _near_duplicate(sh, kept_shingles, index, threshold)
        if hit is not None:
            dups[i] = kept[hit]
            continue
        pos = len(kept)
        kept.append(i)
        kept_shingles.append(sh)
        for s in sh:
            index.setdefault(s, []).append(pos)
    return kept, dups


def _near_duplicate(
    sh: frozenset[str],
    kept_shingles: list[frozenset[str]],
    index: dict[str, list[int]],
    threshold: float,
) -> int | None:
    if not sh:
        return None  # jaccard with an empty set is 0 < threshold (threshold > 0)
    overlap: dict[int, int] = {}
    for s in sh:
        for pos in index.get(s, ()):
            overlap[pos] = overlap.get(pos, 0) + 1
    best: int | None = None
    n = len(sh)
    for pos, inter in overlap.items():
        if best is not None and pos > best:
            continue
        if inter / (n + len(kept_shingles[pos]) - inter) >= threshold:
            best = pos
    return best


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return _jaccard(a, b)


def mmr_order(
    entries: Sequence[MemoryEntry], ranked: list[int], scores: Sequence[float | None], lam: float
) -> Iterator[int]:
    """Yield indices in MMR order (ties: the last candidate wins, as Rust's ``max_by``)."""
    if len(ranked) <= 1:
        yield from ranked
        return
    lam = _clamp(lam)
    words = {i: frozenset(split_ws(entries[i].content)) for i in ranked}
    rel = {i: (scores[i] or 0.0) for i in ranked}
    seed = ranked[0]
    yield seed
    remaining = ranked[1:]
    red = {i: _similarity(words[i], words[seed]) for i in remaining}
    while remaining:
        best_pos = 0
        best_val = math.nan
        for pos, i in enumerate(remaining):
            val = lam * rel[i] - (1.0 - lam) * red[i]
            if pos == 0 or not (best_val > val):
                best_pos, best_val = pos, val
        picked = remaining.pop(best_pos)
        yield picked
        wp = words[picked]
        for i in remaining:
            s = _similarity(words[i], wp)
            red[i] = max(red[i], s)


def rerank(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """The rerank arm of spec stage 3b, replacing decay."""
    cfg = ctx.config
    rc = cfg.rerank
    limit = cfg.recall_limit or rc.pool_cap
    final_limit = bounded_final_limit(limit)
    pool_cap = bounded_pool_cap(final_limit, final_limit * max(rc.candidate_multiplier, 1),
                                rc.pool_cap)
    dropped: dict[str, str] = {e.key: "rerank:pool_cap" for e in entries[pool_cap:]}
    pool = list(entries[:pool_cap])

    scores: list[float | None] = []
    for e in pool:
        if e.score is None:
            scores.append(None)
            continue
        h = _clamp(e.score)
        i = _clamp(e.importance or 0.0)
        r = _clamp(recency_factor(e, ctx.now))
        scores.append(blended(h, i, r, rc.importance_weight, rc.recency_weight))

    eligible: list[int] = []
    for idx, e in enumerate(pool):
        reason = eligibility_reason(e, ctx.exclude_conversation)
        if reason is None:
            eligible.append(idx)
        else:
            dropped[e.key] = reason
    sub = [pool[i] for i in eligible]
    sub_scores = [scores[i] for i in eligible]
    kept, dups = collapse(sub, [s or 0.0 for s in sub_scores], rc.near_duplicate_threshold)
    for i, of in dups.items():
        dropped[sub[i].key] = f"duplicate_of:{sub[of].key}"

    if len(kept) >= rc.threshold and rc.strategy == "mmr":
        order: Iterator[int] = mmr_order(sub, kept, sub_scores, rc.mmr_lambda)
    else:
        order = iter(kept)

    floor = rc_floor = cfg.min_relevance_score
    out: list[MemoryEntry] = []
    seen: set[int] = set()
    for i in order:
        if len(out) >= final_limit:
            break
        seen.add(i)
        s = sub_scores[i]
        if s is not None and s < rc_floor:
            dropped[sub[i].key] = f"below_relevance:{format_score(s)}"
            continue
        e = sub[i]
        out.append(e if s == e.score else e.with_score(s))
    for i in kept:
        if i in seen:
            continue
        s = sub_scores[i]
        if s is not None and s < floor:
            dropped[sub[i].key] = f"below_relevance:{format_score(s)}"
        else:
            dropped[sub[i].key] = "rerank:final_limit"
    return StageResult(out, dropped)
