"""A plain ASCII word's index token, computed in Python, is SQLite's ``porter unicode61``'s."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest

from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.porter import MAX_TOKEN, ascii_tokens

_ROOT = Path(__file__).resolve().parents[2]
# Suffixes every step of the algorithm looks at, and stems that make its conditions differ.
_SUFFIXES = (
    "s es ies sses ss ed eed ing at bl iz ational tional enci anci izer logi bli alli entli eli "
    "ousli ization ation ator alism iveness fulness ousness aliti iviti biliti icate ative alize "
    "iciti ical ful ness al ance ence er ic able ible ant ement ment ent ion sion tion ou ism ate "
    "iti ous ive ize y ly ily e le ll"
).split()
_STEMS = "a b y ya ay bab xyz sy tr hop fil tann conflat feed agre plaster motor sing hope".split()


def _vocabulary() -> list[str]:
    """The words of this repository's docs and benchmark prompts, the suffix grid, and
    random strings (seeded) of vowel-heavy, mixed-case and digit alphabets."""
    words: set[str] = set()
    for pattern in ("docs/*.md", "benchmarks/*.json", "benchmarks/*.txt", "README.md"):
        for path in _ROOT.glob(pattern):
            words |= set(re.findall(r"[A-Za-z0-9]+", path.read_text(encoding="utf-8")))
    words |= {stem + suffix for stem in _STEMS for suffix in _SUFFIXES}
    rng = random.Random(29)
    alphabets = ("aeiouyxwszlbtdnmrcg", string.ascii_letters + string.digits, "ayesl")
    for i in range(40_000):
        alphabet = alphabets[i % len(alphabets)]
        words.add("".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14))))
    words |= {"y" * n for n in range(1, 8)} | {"ab" * 33, "x" * MAX_TOKEN, "x" * (MAX_TOKEN + 1)}
    return sorted(words)


def test_every_word_gets_sqlites_token() -> None:
    words = _vocabulary()
    assert len(words) > 40_000
    fallbacks = 0
    for start in range(0, len(words), 1000):
        part = words[start : start + 1000]
        for word, real in zip(part, _terms._sql_tokenize_many(part), strict=True):
            ours = ascii_tokens(word)
            if ours is None:
                fallbacks += 1
                continue
            assert ours == real, word
    assert fallbacks < 20  # only stems FTS5 itself reads past (below)


@pytest.mark.parametrize("word", ["aed", "eing", "oed", "ied"])
def test_a_stem_under_two_letters_is_left_to_sqlite(word: str) -> None:
    assert ascii_tokens(word) is None
    assert _terms._tokenize(word) == _terms._sql_tokenize(word)


@pytest.mark.parametrize(
    "word", ["foo_bar", "ünïcode", "naïve", "c++", "node.js", "", "tab\there", "Ａ", "٣٤٥"]
)
def test_other_words_are_left_to_sqlite(word: str) -> None:
    assert ascii_tokens(word) is None
    assert _terms._tokenize(word) == _terms._sql_tokenize(word)


def test_short_and_long_tokens_pass_through_lower_cased() -> None:
    assert ascii_tokens("Go") == ("go",)
    assert ascii_tokens("X" * (MAX_TOKEN + 1)) == ("x" * (MAX_TOKEN + 1),)
    assert ascii_tokens("Deploys") == ("deploi",) == _terms._sql_tokenize("Deploys")
