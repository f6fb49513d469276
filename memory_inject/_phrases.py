"""The phrase matcher behind ``applies_when``, ``does_not_apply_when`` and ``known_exceptions``.

PI's matcher (spec 1.5) keeps a record's "publishing" exception firing on
"publish to npm registry", but it also fires on a raw substring of the whole
text, on any single word of a multi-word phrase, and on text words of one or
two letters, so "tokens" is excluded by "how *to* run tests", "api" by
"r*api*d" and "LMS frontend" by "build frontend". This matcher keeps the
documented behaviour and drops those false positives. The rule, in order:

1. **Words, never substrings.** Phrase and text are split into words: maximal
   runs of Unicode letters and digits, compared lowercased.
2. **Whole phrase.** The phrase's words appearing in the text as a contiguous
   word sequence is a match ("GitHub Packages" in "GitHub Packages publish
   workflow", "pi package" in "pi package test command").
3. **Every content word.** Otherwise *every* content word of the phrase must
   be found in the text, in any order. Content words are the phrase's words
   minus a short list of function words ("to", "the", "when", ...), so
   "publishing to npm registry" is found in "publish the npm registry" but not
   in "update the docker registry". A phrase made only of function words
   matches by rule 2 alone.
4. **How a content word is found.**

   a. A *name* is found only as the same word. A phrase word is a name when it
      is written with an uppercase letter, except that the first letter of a
      multi-word phrase is sentence case and does not count: "Windows",
      "GitHub", "LMS" and the "Packages" of "GitHub Packages" are names, the
      "Publishing" of "Publishing to npm" is not. This is what keeps PI's
      "Windows" (the system) from firing on "run it in a window" while
      lowercase "windows" still matches "window". Write single-word
      conditions in lowercase unless you mean a name.
   b. A word shorter than ``min_token_length`` ("pi", "npm", "api") is found
      only as the same word.
   c. Any other word is found as the same word or as a morphological variant:
      a text word such that both are *stem + ending*, with a shared stem of at
      least ``min_token_length`` characters and both endings in
      :data:`ENDINGS` (English inflections and a few derivations; a doubled
      final consonant is allowed, as in "commit"/"committed"). Two one-letter
      endings are not enough ("apple"/"apply"). So "publishing"/"publish",
      "deployment"/"deploy", "internationalization"/"internationally" and
      "tests"/"testing" match, while "form"/"format" and "port"/"portal" do
      not ("at" and "al" are not endings). The stem length makes the minimum
      length hold on both sides. Like any suffix rule it has its accidents
      ("care"/"career"); they need a shared stem of ``min_token_length``
      letters, not a stray letter.
"""

from __future__ import annotations

import functools
import re

from memory_inject._words import WORD

__all__ = ["ENDINGS", "context_text", "normalize", "phrase_matches", "slug"]

_WORD = WORD
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")

#: Endings a stem may carry on either side of a morphological match ("" is the bare stem).
ENDINGS: frozenset[str] = frozenset(
    (
        "",
        "s",
        "es",
        "e",
        "y",
        "ies",
        "ied",
        "ier",
        "iest",
        "ed",
        "d",
        "ing",
        "ings",
        "er",
        "ers",
        "est",
        "or",
        "ors",
        "ment",
        "ments",
        "ion",
        "ions",
        "ation",
        "ations",
        "ication",
        "ications",
        "ization",
        "izations",
        "isation",
        "isations",
        "ize",
        "izes",
        "ized",
        "izing",
        "ise",
        "ises",
        "ised",
        "ising",
        "ly",
        "ally",
        "able",
        "ably",
        "ability",
        "ible",
        "ity",
        "ities",
        "ive",
        "ives",
        "ness",
        "ist",
        "ists",
        "ism",
        "isms",
        "ic",
        "ics",
        "ical",
        "ance",
        "ances",
        "ence",
        "ences",
    )
)

_FUNCTION_WORDS = frozenset(
    "a an the to of in on at by for with from into onto via and or is are be it its as "
    "when while this that".split()
)
_VOWELS = frozenset("aeiouy")


def normalize(value: str) -> str:
    """PI's normaliser: trim, lowercase, non-``[a-z0-9]`` runs become ``-``, no edge dashes."""
    return _NOT_ALNUM.sub("-", value.strip().lower()).strip("-")


def slug(value: str) -> str:
    """PI's slug: :func:`normalize`, with ``"default"`` for an empty result."""
    return normalize(value) or "default"


def context_text(
    prompt: str, working_directory: str | None = None, *, include_cwd: bool = False
) -> str:
    """The text the applicability stages match against: the prompt, plus the cwd when asked.

    PI always appends the working directory, so a directory named ``publisher``
    fires a ``publishing`` exception; here the cwd is opt-in.
    """
    parts = [prompt]
    if include_cwd and working_directory:
        parts.append(working_directory)
    return " ".join(p for p in parts if p)


# -- text and phrase analysis (cached: the same text and phrases recur every turn) --


@functools.lru_cache(maxsize=64)
def _text_index(text: str, min_len: int) -> tuple[str, frozenset[str], dict[str, tuple[str, ...]]]:
    """The words space-joined and padded, their set, and the long words by first letters."""
    words = [w.lower() for w in _WORD.findall(text)]
    by_prefix: dict[str, list[str]] = {}
    for w in dict.fromkeys(words):
        if len(w) >= min_len:
            by_prefix.setdefault(w[:min_len], []).append(w)
    return (
        " " + " ".join(words) + " ",
        frozenset(words),
        {k: tuple(v) for k, v in by_prefix.items()},
    )


@functools.lru_cache(maxsize=1024)
def _phrase_parts(phrase: str) -> tuple[str, tuple[tuple[str, bool], ...]]:
    """The joined lowercase words and the content words, each with its *name* flag."""
    raw = _WORD.findall(phrase)
    content: list[tuple[str, bool]] = []
    for i, word in enumerate(raw):
        low = word.lower()
        if low in _FUNCTION_WORDS:
            continue
        cased = word[1:] if i == 0 and len(raw) > 1 else word
        content.append((low, any(c.isupper() for c in cased)))
    words = " ".join(w.lower() for w in raw)
    return (" " + words + " " if words else "", tuple(content))


def _ending_ok(stem: str, ending: str) -> bool:
    if ending in ENDINGS:
        return True
    # A doubled final consonant before a vowel ending: commit/committed, plan/planning.
    return (
        len(ending) >= 2
        and ending[0] == stem[-1]
        and ending[0] not in _VOWELS
        and ending[1] in _VOWELS
        and ending[1:] in ENDINGS
    )


def _variants(a: str, b: str, min_stem: int) -> bool:
    """True when ``a`` and ``b`` are stem + ending with a stem of >= ``min_stem`` chars."""
    limit = min(len(a), len(b))
    common = 0
    while common < limit and a[common] == b[common]:
        common += 1
    for cut in range(common, min_stem - 1, -1):
        stem, ea, eb = a[:cut], a[cut:], b[cut:]
        if len(ea) == 1 and len(eb) == 1:
            continue
        if _ending_ok(stem, ea) and _ending_ok(stem, eb):
            return True
    return False


def phrase_matches(phrase: str, text: str, *, min_token_length: int = 4) -> bool:
    """Whether ``phrase`` applies to ``text`` (the rule is in the module docstring)."""
    if min_token_length < 1:
        raise ValueError(f"'min_token_length' must be >= 1 (got {min_token_length!r})")
    joined_phrase, content = _phrase_parts(phrase)
    if not joined_phrase:
        return False
    joined_text, words, by_prefix = _text_index(text, min_token_length)
    if joined_phrase in joined_text:
        return True
    if not content:
        return False
    for word, is_name in content:
        if word in words:
            continue
        if is_name or len(word) < min_token_length:
            return False
        candidates = by_prefix.get(word[:min_token_length], ())
        if not any(_variants(word, other, min_token_length) for other in candidates):
            return False
    return True
