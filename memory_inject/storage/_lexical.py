"""Tokenising and light stemming of the pure-Python store (`InMemoryStore`)."""

from __future__ import annotations

import re
import unicodedata

from memory_inject._words import TOKEN_PATTERN, strip_harakat

__all__ = ["fold", "stem", "tokenize"]

_WORD = re.compile(TOKEN_PATTERN)
_ASCII_WORD = re.compile(r"\w+")  # ASCII text holds no combining mark: the faster pattern
_ACCENTS = re.compile("[\u0300-\u036f]")


def fold(text: str) -> str:
    """``text`` lower-cased without diacritics, as SQLite's ``unicode61`` reads it: "café"
    in NFC or NFD is "cafe", so a row and a prompt spelled in different normal forms meet
    (they did on SQLite and PostgreSQL, not here). Soft hyphens go too."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.replace("\u00ad", ""))
    # Only the Latin, Greek and Cyrillic accents (U+0300-U+036F): a kana's voicing mark
    # makes another word, not another spelling.
    # Arabic harakat too: users mostly type "ليلى" for "لَيْلَى".
    kept = strip_harakat(_ACCENTS.sub("", decomposed))
    return unicodedata.normalize("NFC", kept).lower()


def tokenize(text: str) -> list[str]:
    """Folded word tokens (``\\w`` and combining marks: :mod:`memory_inject._words`;
    :func:`fold`)."""
    folded = fold(text)
    return (_ASCII_WORD if folded.isascii() else _WORD).findall(folded)


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
