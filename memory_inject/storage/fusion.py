"""Score fusion and FTS query building, shared by the SQLite and PostgreSQL stores.

Everything here is pure: the stores run the keyword and vector stages and hand
the raw results to :func:`fuse`, so both engines rank the same way and the
renderer's relevance floor means the same thing on each (spec 7.4).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from attrs import Attribute, field, frozen

from memory_inject.storage._lexical import STOPWORDS

__all__ = ["Fusion", "RecallInfo", "build_fts_query", "fuse"]

#: Below this the keyword batch maximum is treated as "no signal" (spec: max<eps -> 1).
_EPS = 1e-12

# A word, optionally followed by the ``*`` that asks for a prefix match.
_TOKEN = re.compile(r"(\w+)(\*?)", re.UNICODE)


_Validator = Callable[[Any, "Attribute[Any]", Any], None]


def _one_of(*allowed: str) -> _Validator:
    def check(_inst: Any, attribute: Attribute[Any], value: Any) -> None:
        if value not in allowed:
            choices = ", ".join(repr(a) for a in allowed)
            raise ValueError(f"'{attribute.name}' must be one of {choices} (got {value!r})")

    return check


def _non_negative(_inst: Any, attribute: Attribute[Any], value: float) -> None:
    if not value >= 0.0:
        raise ValueError(f"'{attribute.name}' must be >= 0 (got {value!r})")


def _rrf_k(_inst: Any, _attribute: Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"'rrf_k' must be an integer >= 0 (got {value!r})")


@frozen(slots=True)
class Fusion:
    """How a store combines its keyword and vector stages.

    ``mode="weighted"`` is zeroclaw's weighted mean over the modalities present
    for an id (spec 7.4); ``mode="rrf"`` is reciprocal rank fusion as PI does it,
    scaled to 0..1. ``search_mode`` picks the stages: ``"bm25"`` (keyword only),
    ``"embedding"`` (vector only, keyword when the embedder fails) or
    ``"hybrid"``. A store without an embedder is always keyword-only.
    """

    mode: str = field(default="weighted", validator=_one_of("weighted", "rrf"))
    vector_weight: float = field(default=0.7, converter=float, validator=_non_negative)
    keyword_weight: float = field(default=0.3, converter=float, validator=_non_negative)
    rrf_k: int = field(default=60, validator=_rrf_k)
    search_mode: str = field(default="hybrid", validator=_one_of("bm25", "embedding", "hybrid"))

    def __attrs_post_init__(self) -> None:
        if self.vector_weight + self.keyword_weight <= 0.0:
            raise ValueError(
                "'vector_weight' + 'keyword_weight' must be > 0 "
                f"(got {self.vector_weight!r} + {self.keyword_weight!r})"
            )


@frozen(slots=True)
class RecallInfo:
    """What the last ``recall`` did, so the renderer can report a degraded recall.

    ``strategy`` is ``"recent"`` (time-only query), ``"keyword"``, ``"vector"``,
    ``"hybrid"``, ``"like"`` (substring fallback) or ``"none"``. ``degraded`` is
    ``None`` or a short reason such as ``"embedder_failed: <message>"``.
    """

    strategy: str = "none"
    keyword_hits: int = 0
    vector_hits: int = 0
    degraded: str | None = None


def fuse(
    keyword: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    fusion: Fusion,
    limit: int,
) -> list[tuple[str, float]]:
    """Combine raw keyword scores (BM25, higher is better) and cosine similarities.

    Returns ``(id, score)`` pairs with scores in 0..1, best first, ties broken by
    id ascending, at most ``limit`` of them. An id listed twice in one input
    keeps its best score.
    """
    if limit <= 0:
        return []
    kw = _best(keyword)
    vec = _best(vector)
    scored = _rrf(kw, vec, fusion) if fusion.mode == "rrf" else _weighted(kw, vec, fusion)
    ranked = sorted(scored.items(), key=lambda p: (-p[1], p[0]))
    return ranked[:limit]


def _best(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, score in pairs:
        s = float(score)
        if key not in out or s > out[key]:
            out[key] = s
    return out


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _weighted(kw: dict[str, float], vec: dict[str, float], fusion: Fusion) -> dict[str, float]:
    if not vec:
        top = max(kw.values(), default=0.0)
        if top <= 0.0:
            return dict.fromkeys(kw, 0.0)
        return {k: _clamp(s / top) for k, s in kw.items()}
    if not kw:
        return {k: _clamp(s) for k, s in vec.items()}
    top = max(kw.values())
    if top < _EPS:
        top = 1.0
    vw, kwt = fusion.vector_weight, fusion.keyword_weight
    out: dict[str, float] = {}
    for key in kw.keys() | vec.keys():
        num = den = 0.0
        if key in vec:
            num += vw * _clamp(vec[key])
            den += vw
        if key in kw:
            num += kwt * _clamp(kw[key] / top)
            den += kwt
        out[key] = num / den if den > 0.0 else 0.0
    return out


def _ranks(scores: dict[str, float]) -> dict[str, int]:
    order = sorted(scores.items(), key=lambda p: (-p[1], p[0]))
    return {key: i + 1 for i, (key, _) in enumerate(order)}


def _rrf(kw: dict[str, float], vec: dict[str, float], fusion: Fusion) -> dict[str, float]:
    k = fusion.rrf_k
    candidates = ((_ranks(kw), fusion.keyword_weight), (_ranks(vec), fusion.vector_weight))
    lists = [(ranks, weight) for ranks, weight in candidates if ranks]
    # The best an id can do is rank 1 in every list that ran, so dividing by
    # that keeps scores in 0..1 whether or not the vector stage was live.
    best = sum(w / (k + 1) for _, w in lists)
    out: dict[str, float] = {}
    for ranks, weight in lists:
        for key, rank in ranks.items():
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    if best <= 0.0:
        return dict.fromkeys(out, 0.0)
    return {key: _clamp(s / best) for key, s in out.items()}


def build_fts_query(text: str, *, max_terms: int = 64) -> str | None:
    """An FTS5 MATCH expression for a free-text prompt, or ``None`` if it has no words.

    The raw prompt never reaches MATCH: bare words are ANDed and ``? , . / :``
    raise syntax errors, which is why PI's prompts mostly matched nothing. Each
    word is double-quoted (so FTS operators are inert), ``word*`` becomes the
    prefix query ``"word"*``, and the words are ORed. Stopwords are dropped
    unless nothing else is left. ``max_terms`` bounds the cost of a pasted log.
    """
    terms: list[tuple[str, bool]] = []
    seen: set[tuple[str, bool]] = set()
    for word, star in _TOKEN.findall(text.lower()):
        term = (word, bool(star))
        if term not in seen:
            seen.add(term)
            terms.append(term)
    if not terms:
        return None
    kept = [t for t in terms if t[0] not in STOPWORDS] or terms
    return " OR ".join(f'"{w}"*' if star else f'"{w}"' for w, star in kept[:max_terms])
