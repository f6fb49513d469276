"""A plain ASCII word's index token, computed in Python, is SQLite's ``porter unicode61``'s."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.sqlite import keyword_terms as _terms
from memory_inject.storage.sqlite.porter import MAX_TOKEN, ascii_row_counts, ascii_tokens

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


def _row_text(rng: random.Random) -> str | None:
    """ASCII text of words, digits, punctuation, control characters and long runs."""
    if rng.random() < 0.1:
        return None
    parts = []
    for _ in range(rng.randrange(0, 30)):
        kind = rng.random()
        if kind < 0.6:
            parts.append(
                "".join(rng.choice(string.ascii_letters) for _ in range(rng.randrange(1, 12)))
            )
        elif kind < 0.7:
            parts.append(str(rng.randrange(10**6)))
        elif kind < 0.9:
            parts.append(
                "".join(rng.choice(string.punctuation + " \t\n\r\x01\x7f") for _ in range(3))
            )
        else:
            parts.append("x" * rng.randrange(60, 80) + "ing")
    return rng.choice(["", " ", "-", "_"]).join(parts)


def test_ascii_rows_are_counted_as_fts5_counts_them() -> None:
    """The mirror's patches count a changed row's tokens per column in Python when the row
    is plain ASCII; the counts and the row's length are FTS5's own (its private table)."""
    rng = random.Random(7)
    rows: list[tuple[Any, ...]] = [
        (rid, *(_row_text(rng) for _ in _terms.COLUMN_NAMES)) for rid in range(1, 400)
    ]
    tokenizer = _terms.RowTokenizer()
    want_counts, want_sizes = tokenizer._sql_tokenise(rows)
    for row in rows:
        rid, columns = row[0], row[1:]
        got = ascii_row_counts(columns, len(_terms.COLUMN_NAMES), _terms.tokens_of)
        assert got is not None
        assert got[0] == want_counts.get(rid, {}), columns
        assert got[1] == want_sizes.get(rid, 0), columns
    # And through the public call, mixed with rows only SQLite tokenises.
    mixed = [*rows[:50], (900, "naïve café", None, "x", None, None, None, None)]
    assert tokenizer.tokenise(mixed) == tokenizer._sql_tokenise(mixed)


@pytest.mark.parametrize("text", ["naïve", "a\x00b", "ＡＢＣ", "x" * 1001])
def test_other_rows_are_left_to_sqlite(text: str) -> None:
    assert ascii_row_counts((text, None, None, None, None, None, None), 7, _terms.tokens_of) is None
