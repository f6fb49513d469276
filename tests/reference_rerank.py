"""A straightforward transcription of the spec's rerank arm (section 5, stage 3b).

Quadratic collapse, cubic MMR over the whole pool, floor, then trim. Slow on
purpose: it is the oracle the optimised ``memory_inject.stages.rerank`` is checked
against.
"""

from __future__ import annotations

import math
from datetime import datetime

from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.stages import eligibility_reason

LN2 = math.log(2.0)
EPS = 2.220446049250313e-16


def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return max(lo, min(hi, x))


def rust_split(s: str) -> list[str]:
    out, cur = [], ""
    for ch in s:
        if ch.isspace() and ch not in "\x1c\x1d\x1e\x1f":
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def recency(e: MemoryEntry, now: datetime) -> float:
    if e.category == MemoryCategory.CORE or e.timestamp is None:
        return 1.0
    d = now - e.timestamp
    secs = d.days * 86400 + d.seconds
    return math.exp(-(max(0, secs) / 86400) / 7.0 * LN2)


def blended(h: float, i: float, r: float, iw: float, rw: float) -> float:
    if abs(iw - 0.2) < EPS and abs(rw - 0.1) < EPS:
        return clamp(0.7 * h + 0.2 * i + 0.1 * r)
    iw, rw = clamp(iw), clamp(rw)
    ret = max(0.0, 1 - iw - rw)
    total = ret + iw + rw
    if total < EPS:
        return h
    return (h * ret + i * iw + r * rw) / total


def normalize(c: str) -> str:
    return ascii_lower(" ".join(rust_split(c)))


def shingles(c: str) -> set[str]:
    toks = c.split()
    if len(toks) < 2:
        return set(toks)
    return {f"{toks[k]} {toks[k + 1]}" for k in range(len(toks) - 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def reference_rerank(
    pool: list[MemoryEntry],
    *,
    now: datetime,
    final_limit: int,
    pool_cap: int,
    threshold: int,
    strategy: str,
    lam: float,
    iw: float,
    rw: float,
    floor: float,
    exclude_conversation: bool,
    near_dup: float = 0.92,
) -> list[tuple[str, float | None]]:
    final_limit = max(1, min(final_limit, 1024))
    pool = pool[:pool_cap]
    items: list[tuple[MemoryEntry, float | None]] = []
    for e in pool:
        s = e.score
        if s is not None:
            s = blended(clamp(s), clamp(e.importance or 0.0), clamp(recency(e, now)), iw, rw)
        items.append((e, s))
    items = [(e, s) for e, s in items if eligibility_reason(e, exclude_conversation) is None]
    items = sorted(items, key=lambda p: -(p[1] or 0.0))
    kept: list[tuple[MemoryEntry, float | None]] = []
    exact: set[str] = set()
    for e, s in items:
        n = normalize(e.content)
        if n in exact:
            continue
        exact.add(n)
        if any(jaccard(shingles(n), shingles(normalize(k.content))) >= near_dup for k, _ in kept):
            continue
        kept.append((e, s))
    cands = sorted(kept, key=lambda p: -(p[1] or 0.0))
    if len(cands) >= threshold and strategy == "mmr" and len(cands) > 1:
        lam = clamp(lam)
        selected = [cands.pop(0)]
        while cands:
            best = None
            best_val = 0.0
            for idx, (c, s) in enumerate(cands):
                rel = s or 0.0
                red = max(
                    jaccard(set(rust_split(c.content)), set(rust_split(x.content)))
                    for x, _ in selected
                )
                val = lam * rel - (1 - lam) * red
                if best is None or not (best_val > val):
                    best, best_val = idx, val
            assert best is not None
            selected.append(cands.pop(best))
        cands = selected
    cands = [(e, s) for e, s in cands if s is None or s >= floor]
    return [(e.key, s) for e, s in cands[:final_limit]]
