"""Tokenising and BM25 scoring shared by the pure-Python store and the SQLite LIKE fallback."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from memory_inject._stopwords import STOPWORDS

__all__ = ["STOPWORDS", "bm25_scores", "normalize_batch", "stem", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)


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
