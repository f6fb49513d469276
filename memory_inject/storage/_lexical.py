"""Tokenising and light stemming of the pure-Python store (`InMemoryStore`)."""

from __future__ import annotations

import re

__all__ = ["stem", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (unicode ``\\w+``)."""
    return _WORD.findall(text.lower())


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
