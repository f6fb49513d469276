"""The gated rerank arm: blend, eligibility, duplicate collapse, MMR, floor, trim.

Output is exactly the spec's (section 5, stage 3b), which orders the whole pool
with a cubic MMR and compares all pairs for near-duplicates. This version does
far less work for the same result:

* near-duplicates are found through an inverted index of bigram shingles, so
  only entries that share a shingle with a kept entry are compared
  (``_dedupe.Candidates``);
* MMR keeps each candidate's redundancy (max similarity to the selected set)
  up to date incrementally, one similarity per candidate per pick;
* MMR picks are produced lazily and stop once ``final_limit`` entries have
  passed the floor (all the spec's trim would keep), or fewer when the context
  says the renderer cannot use more (``StageContext.demand``).

``tests/reference_rerank.py`` holds the straightforward version; a hypothesis
test proves both give the same entries in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from attrs import frozen

from memory_inject._skip_keys import any_key_skip, key_skip_reason
from memory_inject.config import MAX_CANDIDATE_POOL, RerankConfig
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.stages._base import StageContext, StageResult, format_score
from memory_inject.stages._dedupe import Candidates, split_ws
from memory_inject.stages.filters import (
    age_days,
    decay_factor,
    is_chat_memory,
)
from memory_inject.stages.owners import owner_drops

__all__ = [
    "Rerank",
    "blended",
    "bounded_pool_cap",
    "rerank_recall_limit",
]

_EPS = 2.220446049250313e-16  # f64::EPSILON


def bounded_final_limit(n: int) -> int:
    """``n`` clamped to ``1..MAX_CANDIDATE_POOL``."""
    return max(1, min(n, MAX_CANDIDATE_POOL))


def bounded_pool_cap(final_limit: int, cap: int, ceiling: int = MAX_CANDIDATE_POOL) -> int:
    """``cap`` limited to ``ceiling``, but never below the bounded ``final_limit`` (nor 1)."""
    return max(min(cap, ceiling), bounded_final_limit(final_limit), 1)


def rerank_recall_limit(limit: int, rc: RerankConfig) -> int:
    """How many candidates to ask each scope for when the rerank arm is on."""
    final = bounded_final_limit(limit)
    pool_cap = bounded_pool_cap(final, final * max(rc.candidate_multiplier, 1), rc.pool_cap)
    requested = max(limit * rc.candidate_multiplier, limit, pool_cap)
    return bounded_pool_cap(max(limit, final), requested, rc.pool_cap)


def recency_factor(e: MemoryEntry, now: datetime, half_life: float = 7.0) -> float:
    """The blend's recency term: 1 for core or undated entries, else the decay for their age.

    ``half_life`` is in days.
    """
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


class _Words:
    """Word sets of the raw content as int bitsets, built on first use."""

    def __init__(self, pool: Sequence[MemoryEntry]) -> None:
        self.pool = pool
        self.bits: dict[str, int] = {}
        self.sets: dict[int, tuple[int, int]] = {}

    def __getitem__(self, i: int) -> tuple[int, int]:
        hit = self.sets.get(i)
        if hit is None:
            mask = 0
            bits = self.bits
            for w in set(split_ws(self.pool[i].content)):
                b = bits.get(w)
                if b is None:
                    b = bits[w] = 1 << len(bits)
                mask |= b
            hit = self.sets[i] = (mask, mask.bit_count())
        return hit


def _bit_jaccard(a: tuple[int, int], b: tuple[int, int]) -> float:
    if not a[1] or not b[1]:
        return 0.0
    inter = (a[0] & b[0]).bit_count()
    return inter / (a[1] + b[1] - inter)


def mmr_order(cands: Candidates, scores: Sequence[float | None], lam: float) -> Iterator[int]:
    """Yield pool indices in the spec's MMR order, lazily.

    Per pick, candidates are scanned in score order and the scan stops once
    ``lam * relevance`` (an upper bound of every later candidate's MMR value)
    is below the best value found: those candidates cannot win, not even a
    tie. Redundancy (max similarity to the selected set) is brought up to date
    only for scanned candidates, one similarity per newly selected entry.
    Ties go to the last candidate, as Rust's ``max_by`` does.
    """
    seed = cands.get(0)
    if seed is None:
        return
    lam = _clamp(lam)
    words = _Words(cands.pool)
    selected = [seed]
    red: dict[int, float] = {}  # index -> max similarity to the selected entries seen so far
    upto: dict[int, int] = {}  # index -> how many selected entries ``red`` accounts for
    remaining: list[int] = []
    pulled = 1
    yield seed
    while True:
        best_pos = -1
        best_val = 0.0
        pos = 0
        while True:
            if pos == len(remaining):
                nxt = cands.get(pulled)
                if nxt is None:
                    break
                pulled += 1
                remaining.append(nxt)
            i = remaining[pos]
            bound = lam * (scores[i] or 0.0)
            if best_pos >= 0 and bound < best_val:
                break
            done = upto.get(i, 0)
            if done < len(selected):
                wi = words[i]
                r = red.get(i, 0.0)
                for s in selected[done:]:
                    r = max(r, _bit_jaccard(wi, words[s]))
                red[i] = r
                upto[i] = len(selected)
            val = bound - (1.0 - lam) * red[i]
            if best_pos < 0 or not (best_val > val):
                best_pos, best_val = pos, val
            pos += 1
        if best_pos < 0:
            return
        picked = remaining.pop(best_pos)
        selected.append(picked)
        yield picked


def _in_order(cands: Candidates) -> Iterator[int]:
    pos = 0
    while (i := cands.get(pos)) is not None:
        yield i
        pos += 1


@frozen(slots=True)
class Rerank:
    """The rerank arm of spec stage 3b, replacing decay.

    Entries the arm never had to pick (the renderer was full first) are reported
    by the floor or a key's skip rule when they fail one, else as
    ``rerank:final_limit`` or ``budget:max_entries``.
    """

    config: RerankConfig
    recall_limit: int
    floor: float

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        """Blend, collapse duplicates, pick (MMR or in order) until the renderer is full."""
        return _rerank(self.config, self.recall_limit, self.floor, ctx, entries)


def _rerank(
    rc: RerankConfig,
    recall_limit: int,
    floor: float,
    ctx: StageContext,
    entries: Sequence[MemoryEntry],
) -> StageResult:
    limit = recall_limit or rc.pool_cap
    final_limit = bounded_final_limit(limit)
    pool_cap = bounded_pool_cap(
        final_limit, final_limit * max(rc.candidate_multiplier, 1), rc.pool_cap
    )
    dropped: dict[str, str] = {e.key: "rerank:pool_cap" for e in entries[pool_cap:]}
    pool = entries[:pool_cap]

    now = ctx.now
    iw, rw = rc.importance_weight, rc.recency_weight
    scores: list[float | None] = []
    for e in pool:
        if e.score is None:
            scores.append(None)
            continue
        r = _clamp(recency_factor(e, now))
        scores.append(blended(_clamp(e.score), _clamp(e.importance or 0.0), r, iw, rw))
    order = sorted(range(len(pool)), key=lambda i: -(scores[i] or 0.0))
    cands = Candidates(pool, order, rc.near_duplicate_threshold, ctx.exclude_conversation, dropped)

    picks: Iterator[int]
    if rc.strategy == "mmr" and (rc.threshold <= 0 or cands.get(rc.threshold - 1) is not None):
        picks = mmr_order(cands, scores, rc.mmr_lambda)
    else:
        picks = _in_order(cands)

    # The owner rule (``owners``) runs in the relevance filter after the arm; applied to
    # the picks here too, a fact it drops never takes a slot the renderer would fill.
    owned = (
        owner_drops(
            ctx.query,
            pool,
            [e for e, s in zip(pool, scores, strict=True) if s is None or s >= floor],
        )
        if "'" in ctx.query or "\u2019" in ctx.query  # no possessive, no owner (most turns)
        else {}
    )
    need = final_limit if ctx.demand is None else min(final_limit, ctx.demand)
    unseen_reason = "rerank:final_limit" if need == final_limit else "budget:max_entries"
    out: list[MemoryEntry] = []
    seen: set[int] = set()
    if need > 0:
        for i in picks:
            seen.add(i)
            s = scores[i]
            if s is not None and s < floor:
                dropped[pool[i].key] = f"below_relevance:{format_score(s)}"
                continue
            e = pool[i]
            if e.key in owned:
                dropped[e.key] = owned[e.key]
                continue
            out.append(e if s == e.score else e.with_score(s))
            if len(out) >= need:
                break
    # The entries the picks never reached get the rules that are cheap to apply to every
    # one, in the pipeline's order (the key's skip rules, the conversation exclusion, the
    # floor), and the trim's
    # reason only when they fail none: "rerank:final_limit" on an autosave or a 0.17 was
    # untrue of it. The content's skip rules (an image marker...) are left to the trim's
    # reason: read for a pool of 1,024 they doubled the arm's cost.
    exclude = ctx.exclude_conversation
    unseen = [i for i in order if i not in seen and pool[i].key not in dropped]
    # One search over every key first: most pools hold no autosave or history key.
    skips = any_key_skip(pool[i].key for i in unseen)
    for i in unseen:
        e = pool[i]
        s = scores[i]
        if skips and (skip := key_skip_reason(e.key)) is not None:
            dropped[e.key] = skip
        elif exclude and is_chat_memory(e):
            dropped[e.key] = "conversation_excluded"
        elif s is not None and s < floor:
            dropped[e.key] = f"below_relevance:{format_score(s)}"
        elif e.key in owned:
            dropped[e.key] = owned[e.key]
        else:
            dropped[e.key] = unseen_reason
    return StageResult(out, dropped)
