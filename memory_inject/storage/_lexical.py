"""Tokenising and light stemming shared by the pure-Python store and the SQLite LIKE fallback."""

from __future__ import annotations

import re

from memory_inject._stopwords import STOPWORDS

__all__ = ["STOPWORDS", "stem", "tokenize"]

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
