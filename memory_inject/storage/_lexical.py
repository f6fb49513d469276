"""Tokenising and BM25 scoring shared by the pure-Python store and the SQLite LIKE fallback."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["STOPWORDS", "bm25_scores", "normalize_batch", "stem", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words only (no negations): enough that "what is the ..." does not
# dominate an OR-query, few enough that no content word is lost. The longer
# list lifted LoCoMo R@5 from 0.539 to 0.547 (benchmarks/locomo.py).
_MORE_FUNCTION_WORDS = (
    "about above after again against all am any because been before being below between both "
    "but could doing down during each few further having he her here hers herself him himself "
    "his if into itself me more most my myself off once only other ought our ours ourselves out "
    "over own same she should some such than then there these those through too under until up "
    "very we would yours yourself yourselves also"
).split(" ")

STOPWORDS = frozenset(_MORE_FUNCTION_WORDS) | frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "s",
        "so",
        "t",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)


def tokenize(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """Lower-cased word tokens (unicode ``\\w+``)."""
    words = _WORD.findall(text.lower())
    if drop_stopwords:
        kept = [w for w in words if w not in STOPWORDS]
        return kept or words
    return words


_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A light suffix stripper: "publishing" and "published" both become "publish".

    Far cruder than the Porter stemmer of SQLite's FTS5, but enough that the
    in-process store matches the common inflections the persistent stores match.
    """
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def bm25_scores(
    query_terms: Sequence[str],
    documents: Sequence[Sequence[str]],
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> list[float]:
    """Okapi BM25 of each tokenised document against the query terms."""
    n = len(documents)
    if n == 0 or not query_terms:
        return [0.0] * n
    avgdl = sum(len(d) for d in documents) / n or 1.0
    terms = set(query_terms)
    df: Counter[str] = Counter()
    counts = []
    for doc in documents:
        c = Counter(t for t in doc if t in terms)
        counts.append(c)
        df.update(c.keys())
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scores = []
    for doc, c in zip(documents, counts, strict=True):
        dl = len(doc)
        s = 0.0
        for t, tf in c.items():
            s += idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
        scores.append(s)
    return scores


def normalize_batch(raw: Iterable[float]) -> list[float]:
    """Divide by the batch maximum and clamp to 0..1 (the spec's keyword normalisation)."""
    values = list(raw)
    top = max(values, default=0.0)
    if top <= 0.0:
        return [0.0 for _ in values]
    return [min(1.0, max(0.0, v / top)) for v in values]
