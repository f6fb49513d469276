"""Score fusion and FTS query building, shared by the SQLite and PostgreSQL stores.

Everything here is pure: the stores run the keyword and vector stages and hand
the raw results to :func:`fuse`, so both engines rank the same way and the
renderer's relevance floor means the same thing on each (spec 7.4).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from attrs import Attribute, field, frozen

from memory_inject._stopwords import (
    REQUEST_WORDS,
    STOPWORDS,
    foreign_function_words,
    korean_term,
)
from memory_inject._words import TOKEN_PATTERN, strip_harakat
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage.calibration import hybrid_score

__all__ = [
    "MODEL_FUSION",
    "WEAK_FUSION",
    "Fusion",
    "RawScores",
    "RecallInfo",
    "build_fts_query",
    "content_words",
    "default_fusion",
    "fts_match",
    "fuse",
]

# A word, optionally followed by the ``*`` that asks for a prefix match.
_TOKEN = re.compile(rf"({TOKEN_PATTERN})(\*?)")
# The same for ASCII text, which holds no combining mark (the usual prompt: a third faster).
_ASCII_TOKEN = re.compile(r"(\w+)(\*?)")
# The markers hosts put before a prompt ("[cron:nightly Report] ...",
# "[Heartbeat Task | decision] ..."): who sent it, not what it asks.
_MARKERS = re.compile(r"^\s*(?:\[[^\[\]\n]{0,200}\]\s*)+")
# How a question is opened ("quick question: ...", "out of curiosity, ...", "by the way,
# ..."), at the prompt's start only: there it says how the question is asked; elsewhere
# its words ("question", "idea", "way") may be what it is about.
_OPENER = re.compile(
    r"^(?:[\s,:;.!?-]*+(?:(?:a |one )?quick (?:question|one)|one question|out of curiosity"
    r"|just curious|real quick|one more thing|(?:a )?question for you|i (?:have|had) a question"
    r"|i forgot to ask|wait|honestly|(?:so )?i was thinking|(?:do you )?happen to know"
    r"|not sure if you (?:remember|know)"
    r"|(?:let me|can i|may i|could i) ask(?: you)?(?: something)?|just checking|just wondering"
    r"|by the way|any ideas?|i (?:need|want) to know|i think you know this|help me out"
    r"|sorry|excuse me|pardon me"
    # interjections, so an opener after "hey, " or "ok so " is still the prompt's start
    r"|hey|hi|hello|hmm|hm|um|umm|uh|oh|ah|ok|okay|so|btw|lol|yeah|wow|yo"
    r")\b)+"
)
# A negated auxiliary ("don't", "won't", "isn't"), dropped whole: "don" and "won" alone
# are a name and a verb; the negation is no query word (``_stopwords._NEGATIONS``).
_NEGATED = re.compile(r"\b\w+n['\u2019]t\b")
# What a question asks for, not what it is about: "kind" of "what kind of music", "time" of
# "what time is standup" name the answer's kind, which the row holding the answer does
# not say ("loves jazz", "is at 9:30"), so they are no query words. LoCoMo dev
# (relevance.py): block recall 0.559 -> 0.566, R@5 / R@10 and false injections unchanged;
# "how often / long / many" were measured too and not kept (docs/performance.md). "What
# breed / colour" ask for a trait the same way ("is a golden retriever", "dyed it purple").
# "Name" and "called" in "what's my cat's name?" do too, but LoCoMo's answers say "their
# names are ...", so they stay (4 of its 10 name questions lost their evidence without).
_ANSWER_KIND = re.compile(
    r"\b(?:(?:what|which)\s+(?P<kind>kinds?|sorts?|types?)\s+of|what\s+(?P<time>time)"
    r"|(?:what|which)\s+(?P<trait>breed|colou?r))\b"
)


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

    Both stages' scores are calibrated (:mod:`.calibration`). ``mode="weighted"``
    ranks by their weighted mean, a modality that missed a row counting 0;
    ``mode="rrf"`` ranks by reciprocal rank fusion as PI does it but reports
    the same weighted mean as the score. ``mode="minmax"`` ranks by the
    weighted mean of the raw scores rescaled per query (BM25 over the best
    keyword hit, cosine min-max over every row of the scope; see
    :data:`MODEL_FUSION`) and also reports the calibrated weighted mean; a
    store that cannot give raw scores ranks it as ``"weighted"``.
    ``mode="max"`` reports and ranks by the larger of the two calibrated
    scores (the weights are not used): the fusion of a weak embedder
    (:data:`WEAK_FUSION`), whose cosine says little below its calibrated
    "unrelated" line, so a keyword hit keeps its keyword score and the vector
    stage adds only the rows it is sure of. ``search_mode`` picks the stages:
    ``"bm25"`` (keyword only), ``"embedding"`` (vector only, keyword when the
    embedder fails) or ``"hybrid"``. A store without an embedder is always keyword-only.
    """

    mode: str = field(default="weighted", validator=_one_of("weighted", "rrf", "minmax", "max"))
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


#: The fusion a store uses with a sentence-embedding model (MiniLM and the like):
#: rank by ``0.5 * bm25 / max(bm25) + 0.5 * minmax(cosine)``, report the
#: calibrated mean. On LoCoMo dev with MiniLM it is the one fusion measured
#: that adds to the keyword stage (docs/storage.md has the figures).
MODEL_FUSION: Fusion = Fusion(mode="minmax", vector_weight=0.5, keyword_weight=0.5)

#: The fusion a store uses with :class:`~memory_inject.embedders.HashingEmbedder`:
#: each hit scores the larger of its calibrated keyword and vector scores. Its
#: character n-gram cosines are noise up to its ``calibration``'s "unrelated"
#: line (which depends on ``dim``), and on LoCoMo dev a question's evidence sits
#: below that line more often than not, so a weighted mean only pulled keyword
#: hits under the floor: block recall 0.297 with ``Fusion()`` at 256 dimensions,
#: 0.559 with this one, the same as without an embedder (docs/performance.md).
WEAK_FUSION: Fusion = Fusion(mode="max")


def default_fusion(embedder: object | None) -> Fusion:
    """The fusion a store uses when none is given (and an agent file's ``fusion: auto``).

    ``Fusion()`` (zeroclaw's weighted mean) without an embedder, where only
    the keyword stage runs; :data:`WEAK_FUSION` with the character n-gram
    :class:`~memory_inject.embedders.HashingEmbedder`; :data:`MODEL_FUSION`
    with any other embedder (a sentence model).
    """
    if embedder is None:
        return Fusion()
    if isinstance(embedder, HashingEmbedder):
        return WEAK_FUSION
    return MODEL_FUSION


@frozen(slots=True)
class RawScores:
    """What ``mode="minmax"`` ranks by: the stages' uncalibrated scores for one query.

    ``bm25`` holds each keyword hit's BM25 (higher is better); ``cosine`` the
    cosine of every candidate the store could score (vector hits and keyword
    hits alike); ``low`` and ``high`` the least and greatest cosine over the
    whole scope, so the rescaling does not depend on how many rows were shown.
    """

    bm25: Mapping[str, float]
    cosine: Mapping[str, float]
    low: float = 0.0
    high: float = 0.0


@frozen(slots=True)
class RecallInfo:
    """What the last ``recall`` did, so the renderer can report a degraded recall.

    ``strategy`` is ``"recent"`` (time-only query), ``"keyword"``, ``"vector"``,
    ``"hybrid"``, ``"like"`` (substring fallback) or ``"none"``. ``degraded`` is
    ``None`` or a short reason such as ``"embedder_failed: <message>"``.
    ``similarity`` is the calibrated vector score (0..1) of the scope's row
    nearest the query, None when no vector stage ran or the scope held no vector.
    """

    strategy: str = "none"
    keyword_hits: int = 0
    vector_hits: int = 0
    degraded: str | None = None
    similarity: float | None = None


def fuse(
    keyword: Sequence[tuple[str, float]],
    vector: Sequence[tuple[str, float]],
    fusion: Fusion,
    limit: int,
    raw: RawScores | None = None,
) -> list[tuple[str, float]]:
    """Combine calibrated keyword and vector scores (both 0..1, see :mod:`.calibration`).

    Returns ``(id, score)`` pairs, best first, at most ``limit`` of them; ties
    keep the inputs' order (keyword hits first, as ranked by the store). With
    one modality, its scores; with both, the weighted mean, a modality that
    did not find an id counting 0 (``mode="max"``: the larger of the two).
    ``mode="rrf"`` orders by reciprocal rank instead but reports the same
    calibrated score, so the floor keeps its meaning. ``mode="minmax"`` with
    ``raw`` orders by :func:`_minmax` over the union of both inputs and
    reports the same calibrated score too. An id listed twice in one input
    keeps its best score.
    """
    if limit <= 0:
        return []
    kw = _best(keyword)
    vec = _best(vector)
    scored = _weighted(kw, vec, fusion)
    if fusion.mode == "rrf" and kw and vec:
        order = _rrf(kw, vec, fusion)
        ranked = sorted(scored.items(), key=lambda p: -order[p[0]])
    elif fusion.mode == "minmax" and raw is not None and vec:
        order = _minmax(scored, raw, fusion)
        ranked = sorted(scored.items(), key=lambda p: -order[p[0]])
    else:
        ranked = sorted(scored.items(), key=lambda p: -p[1])
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
        return {k: _clamp(s) for k, s in kw.items()}
    if not kw:
        return {k: _clamp(s) for k, s in vec.items()}
    keys = list(kw) + [k for k in vec if k not in kw]
    if fusion.mode == "max":
        return {key: _clamp(max(kw.get(key, 0.0), vec.get(key, 0.0))) for key in keys}
    kwt, vw = fusion.keyword_weight, fusion.vector_weight
    return {key: _clamp(hybrid_score(kw.get(key), vec.get(key), kwt, vw)) for key in keys}


def _ranks(scores: dict[str, float]) -> dict[str, int]:
    order = sorted(scores.items(), key=lambda p: (-p[1], p[0]))
    return {key: i + 1 for i, (key, _) in enumerate(order)}


def _rrf(kw: dict[str, float], vec: dict[str, float], fusion: Fusion) -> dict[str, float]:
    k = fusion.rrf_k
    out: dict[str, float] = {}
    for ranks, weight in ((_ranks(kw), fusion.keyword_weight), (_ranks(vec), fusion.vector_weight)):
        for key, rank in ranks.items():
            out[key] = out.get(key, 0.0) + weight / (k + rank)
    return out


def _minmax(scored: Mapping[str, float], raw: RawScores, fusion: Fusion) -> dict[str, float]:
    """``kw * bm25 / max(bm25) + vw * (cos - low) / (high - low)``, weights summing to 1.

    A row the keyword stage did not find counts BM25 0; a row without a
    cosine counts the scope's lowest.
    """
    kwt, vw = fusion.keyword_weight, fusion.vector_weight
    total = kwt + vw
    best = max((b for b in raw.bm25.values() if b > 0.0), default=0.0)
    span = raw.high - raw.low
    out: dict[str, float] = {}
    for key in scored:
        b = raw.bm25.get(key, 0.0)
        k = b / best if best > 0.0 and b > 0.0 else 0.0
        c = raw.cosine.get(key)
        v = (c - raw.low) / span if c is not None and span > 0.0 else 0.0
        out[key] = (kwt * k + vw * v) / total
    return out


#: The letters a word of these languages ends with when inflected ("verifico",
#: "verifica"; "meses"; "Termine").
_INFLECTION_END = frozenset("aeiouáéíóúàèìòùâêôãõs")


def _romance_stem(word: str) -> str:
    """``word`` without up to two inflected final letters, kept 4 letters long or more."""
    stem = word
    for _ in range(2):
        if len(stem) > 4 and stem[-1] in _INFLECTION_END:
            stem = stem[:-1]
    return stem


def content_words(text: str, *, max_terms: int = 64) -> list[tuple[str, bool]]:
    """The query's distinct ``(word, prefix)`` terms, lowercased, stopwords dropped.

    ``prefix`` is true for ``word*``. Stopwords (with negations, contraction parts and
    interjections), :data:`REQUEST_WORDS` and the answer's kind a question names ("kind"
    of "what kind of", "time" of "what time", "breed" of "what breed") are kept only when
    nothing else is left;
    at most ``max_terms`` terms (a pasted log stays cheap). Leading ``[...]`` markers, a
    leading opener ("hey, quick question: ") and negated auxiliaries ("don't") are
    skipped when words are left without them.
    """
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)  # "zu\u0308rich" is one word, not "zu rich"
    lowered = strip_harakat(text.lower())  # "لَيْلَى" asks for "ليلى", as users type it
    token = _ASCII_TOKEN if lowered.isascii() else _TOKEN
    if "\u0307" in lowered:  # "İ".lower() is "i" and a combining dot, which split "i̇zmir"
        lowered = lowered.replace("i\u0307", "i")
    if "'" in lowered or "\u2019" in lowered:
        affirmed = _NEGATED.sub(" ", lowered)
        lowered = affirmed if token.search(affirmed) else lowered
    unmarked = _MARKERS.sub("", lowered, count=1)
    opener = _OPENER.match(unmarked := unmarked.lstrip())
    if opener and token.search(unmarked, opener.end()):
        unmarked = unmarked[opener.end() :]
    kinds = (
        {w for m in _ANSWER_KIND.finditer(lowered) for w in m.groups() if w}
        if ("what" in lowered or "which" in lowered)
        and any(w in lowered for w in ("kind", "sort", "type", "time", "breed", "colo"))
        else ()
    )
    terms: list[tuple[str, bool]] = []
    kept: list[tuple[str, bool]] = []
    topic: list[tuple[str, bool]] = []
    seen: set[tuple[str, str]] = set()
    tokens = token.findall(unmarked if token.search(unmarked) else lowered)
    # A prompt in French, German, Spanish, Italian or Portuguese drops its own function words.
    words = [w for w, _ in tokens]
    if "¿" in lowered or "¡" in lowered:  # Spanish opens its questions and exclamations
        words.append("¿")
    foreign = foreign_function_words(words)
    for word, star in tokens:
        if (word, star) in seen:
            continue
        seen.add((word, star))
        term = (word, bool(star))
        terms.append(term)
        if word in STOPWORDS or word in REQUEST_WORDS or word in foreign:
            continue
        if "\uac00" <= word[0] <= "\ud7af":  # Hangul: the stem without its particle
            korean = korean_term(word)
            if korean is None:
                continue
            term = (korean[0], bool(star) or korean[1])
        elif foreign and len(word) > 4:
            term = (_romance_stem(word), True)
        kept.append(term)
        if word not in kinds:
            topic.append(term)
            if len(topic) >= max_terms:  # enough: the rest of a pasted log is not read
                break
    return (topic or kept or terms)[:max_terms]


def fts_match(words: Sequence[tuple[str, bool]]) -> str | None:
    """The FTS5 MATCH expression ORing ``words`` (see :func:`build_fts_query`)."""
    if not words:
        return None
    return " OR ".join(f'"{w}"*' if star else f'"{w}"' for w, star in words)


def build_fts_query(text: str, *, max_terms: int = 64) -> str | None:
    """An FTS5 MATCH expression for a free-text prompt, or ``None`` if it has no words.

    The raw prompt never reaches MATCH: bare words are ANDed and ``? , . / :``
    raise syntax errors, which is why PI's prompts mostly matched nothing. Each
    word is double-quoted (so FTS operators are inert), ``word*`` becomes the
    prefix query ``"word"*``, and the words are ORed. Stopwords are dropped
    unless nothing else is left. ``max_terms`` bounds the cost of a pasted log.
    """
    return fts_match(content_words(text, max_terms=max_terms))
