"""The index's tokens of a plain ASCII word, computed in Python: no SQL round trip.

The store's index tokenises with FTS5's ``porter unicode61``. For a word of ASCII
letters and digits only, ``unicode61`` yields one token, the word in lower case,
and ``porter`` stems it when it is 3 to 64 characters long. :func:`ascii_tokens`
computes that token with the Porter algorithm as FTS5 applies it: a suffix rule
matches only when the word is longer than the suffix; of a step's rules, the first
whose suffix matches is the only one tried (FTS5 picks a step's rules by the word's
next-to-last letter, so the rules below are grouped and ordered the same way);
``y`` is a vowel after a consonant when measuring, and anywhere but the first
letter when looking for a vowel. Any other word, or a stem that becomes shorter
than two letters on the way (FTS5 would read before its buffer), gets None: the
caller asks SQLite (:func:`.keyword_terms.tokens_of`). :func:`ascii_row_counts` counts
a whole row's tokens the same way, for the mirror's patches after a write. Tests hold
this module to SQLite's own tokenizer over tens of thousands of words, random strings
and random rows.

A new word costs a few microseconds here against about 20 for the SQL round trip
(an in-memory FTS5 insert, a vocabulary read and a rollback), and a cold recall
asks for one or two (``benchmarks/keyword_sizes.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MAX_TOKEN", "ascii_row_counts", "ascii_tokens", "stem"]

#: FTS5 passes longer tokens through unstemmed (as it does tokens under 3 bytes).
MAX_TOKEN = 64


def ascii_tokens(word: str) -> tuple[str, ...] | None:
    """The index's tokens of ``word`` when it is ASCII letters and digits only, else None."""
    if not word.isascii() or not word.isalnum():
        return None
    token = word.lower()
    if len(token) < 3 or len(token) > MAX_TOKEN:
        return (token,)
    stemmed = stem(token)
    return None if stemmed is None else (stemmed,)


#: A run of the characters ``unicode61`` keeps in a token, in ASCII text.
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
#: Rows with longer words go to SQLite (FTS5's own limits stay its own).
_LONGEST_WORD = 1000


def ascii_row_counts(
    columns: Sequence[Any], width: int, tokens_of: Callable[[str], tuple[str, ...]]
) -> tuple[dict[str, list[int]], int] | None:
    """``({token: instances per column}, tokens in all)`` of one row's ``width`` index
    columns, as FTS5's ``porter unicode61`` counts them, when every column is plain ASCII
    text (or empty); None otherwise. In ASCII, ``unicode61`` keeps runs of letters and
    digits: each run is one word, whose token ``tokens_of`` gives (the query words' cached
    :func:`.keyword_terms.tokens_of`: this module's stem, or SQLite's where it stops)."""
    counts: dict[str, list[int]] = {}
    size = 0
    for col, text in enumerate(columns):
        if text is None:
            continue
        if not isinstance(text, str) or not text.isascii() or "\x00" in text:
            return None
        for word in _ASCII_WORD.findall(text):
            if len(word) > _LONGEST_WORD:
                return None
            for token in tokens_of(word):
                per_col = counts.get(token)
                if per_col is None:
                    per_col = counts[token] = [0] * width
                per_col[col] += 1
                size += 1
    return counts, size


def _is_vowel(c: str, y_is_vowel: bool) -> bool:
    return c in "aeiou" or (y_is_vowel and c == "y")


def _vc_end(s: str, start: int, end: int, prev_consonant: bool) -> int:
    """Where one vowels-then-consonants run of ``s[start:end]`` ends (an index past it,
    relative to ``start``); 0 when the run is not complete."""
    consonant = prev_consonant
    i = start
    while i < end:
        consonant = not _is_vowel(s[i], consonant)
        if not consonant:
            break
        i += 1
    i += 1
    while i < end:
        consonant = not _is_vowel(s[i], consonant)
        if consonant:
            return i - start + 1
        i += 1
    return 0


def _m_gt0(s: str, n: int) -> bool:
    return _vc_end(s, 0, n, False) > 0


def _m_gt1(s: str, n: int) -> bool:
    first = _vc_end(s, 0, n, False)
    return first > 0 and _vc_end(s, first, n, True) > 0


def _m_eq1(s: str, n: int) -> bool:
    first = _vc_end(s, 0, n, False)
    return first > 0 and _vc_end(s, first, n, True) == 0


def _o_star(s: str, n: int) -> bool:
    """Consonant, vowel, consonant at the end, the last not ``w``, ``x`` or ``y``."""
    if s[n - 1] in "wxy":
        return False
    mask = 0
    consonant = False
    for i in range(n):
        consonant = not _is_vowel(s[i], consonant)
        mask = (mask << 1) + consonant
    return (mask & 7) == 5


def _has_vowel(s: str, n: int) -> bool:
    return any(_is_vowel(s[i], i > 0) for i in range(n))


def _m_gt1_s_or_t(s: str, n: int) -> bool:
    return s[n - 1] in "st" and _m_gt1(s, n)


# Each step's rules by the next-to-last letter of the suffix: (suffix, replacement).
_STEP2 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "g": (("logi", "log"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
}
_STEP3 = {
    "a": (("ical", "ic"),),
    "s": (("ness", ""),),
    "t": (("icate", "ic"), ("iciti", "ic")),
    "u": (("ful", ""),),
    "v": (("ative", ""),),
    "z": (("alize", "al"),),
}
_STEP4 = {
    "a": ("al",),
    "c": ("ance", "ence"),
    "e": ("er",),
    "i": ("ic",),
    "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"),
    "o": ("ion", "ou"),
    "s": ("ism",),
    "t": ("ate", "iti"),
    "u": ("ous",),
    "v": ("ive",),
    "z": ("ize",),
}
_STEP1B2 = {"a": ("at", "ate"), "b": ("bl", "ble"), "i": ("iz", "ize")}


def _matching(word: str, suffixes: tuple[str, ...]) -> str | None:
    """The first of ``suffixes`` that ``word`` ends with and is longer than."""
    n = len(word)
    for suffix in suffixes:
        if n > len(suffix) and word.endswith(suffix):
            return suffix
    return None


def _replace_step(word: str, rules: dict[str, tuple[tuple[str, str], ...]]) -> str:
    """Steps 2 and 3: the first matching rule, applied when the stem's measure is > 0."""
    group = rules.get(word[-2])
    if group is None:
        return word
    for suffix, replacement in group:
        if len(word) > len(suffix) and word.endswith(suffix):
            stem_len = len(word) - len(suffix)
            if _m_gt0(word, stem_len):
                return word[:stem_len] + replacement
            return word
    return word


def stem(token: str) -> str | None:
    """FTS5's porter stem of a lower-case ASCII token of 3 to 64 letters and digits;
    None where FTS5's own code would read before its buffer (a stem under 2 letters)."""
    w = token
    # Step 1a.
    if w[-1] == "s":
        if w[-2] == "e":
            n = len(w)
            if (n > 4 and w[-4] == "s" and w[-3] == "s") or (n > 3 and w[-3] == "i"):
                w = w[:-2]
            else:
                w = w[:-1]
        elif w[-2] != "s":
            w = w[:-1]
    # Step 1b.
    removed = False
    if w[-2] == "e":
        suffix = _matching(w, ("eed", "ed"))
        if suffix == "eed":
            if _m_gt0(w, len(w) - 3):
                w = w[:-1]
        elif suffix == "ed" and _has_vowel(w, len(w) - 2):
            w, removed = w[:-2], True
    elif w[-2] == "n" and _matching(w, ("ing",)) and _has_vowel(w, len(w) - 3):
        w, removed = w[:-3], True
    if removed:
        if len(w) < 2:
            return None
        rule = _STEP1B2.get(w[-2])
        if rule is not None and len(w) > 2 and w.endswith(rule[0]):
            w = w[:-2] + rule[1]
        else:
            c = w[-1]
            if not _is_vowel(c, False) and c not in "lsz" and c == w[-2]:
                w = w[:-1]
            elif _m_eq1(w, len(w)) and _o_star(w, len(w)):
                w += "e"
    # Step 1c.
    if w[-1] == "y" and _has_vowel(w, len(w) - 1):
        w = w[:-1] + "i"
    if len(w) < 2:
        return None
    # Steps 2 and 3.
    w = _replace_step(w, _STEP2)
    w = _replace_step(w, _STEP3)
    # Step 4.
    suffix = _matching(w, _STEP4.get(w[-2], ()))
    if suffix is not None:
        stem_len = len(w) - len(suffix)
        check = _m_gt1_s_or_t if suffix == "ion" else _m_gt1
        if check(w, stem_len):
            w = w[:stem_len]
    # Step 5a.
    n = len(w)
    if w[-1] == "e" and (_m_gt1(w, n - 1) or (_m_eq1(w, n - 1) and not _o_star(w, n - 1))):
        w = w[:-1]
    # Step 5b.
    n = len(w)
    if n > 1 and w[-1] == "l" and w[-2] == "l" and _m_gt1(w, n - 1):
        w = w[:-1]
    return w
