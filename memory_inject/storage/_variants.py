"""A query word's other spellings: one word for coverage, any of them for a match.

A memory the model wrote in American English ("User's favorite color is green") is asked
in British English ("what's my favourite colour?"), a fact that says "Production
database" is asked about "the prod db", and a CJK keyboard types "ＭＩＳＯ" for "Miso".
The stemmer unifies none of these. :func:`with_variants` adds each query word's other
spellings as terms of their own (ORed into the match, so a row holding any is found),
and says which word each term stands for: :func:`~.calibration.coverage` counts a word
once, held when any of its spellings is, at the weight of its commonest spelling (a
spelling no row holds never makes the word weigh more).

The spellings are rules with a curated list, not a dictionary: British "-our" and
"-ise" / "-yse" endings and their American forms, a list of other pairs, abbreviations
common in notes about work and software, and NFKC for full-width and compatibility
forms. An alternative that is no word ("promize" from "promise") only costs a lookup.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Hashable, Sequence

from memory_inject._words import TOKEN_PATTERN

__all__ = ["MAX_VARIANTS", "distinct", "spellings", "with_variants"]

#: At most this many terms are added to a query (a pasted log stays cheap).
MAX_VARIANTS = 16

_PAIRS = (
    # British / American spellings the rules below do not make.
    ("centre", "center"),
    ("centres", "centers"),
    ("theatre", "theater"),
    ("theatres", "theaters"),
    ("metre", "meter"),
    ("metres", "meters"),
    ("kilometre", "kilometer"),
    ("kilometres", "kilometers"),
    ("litre", "liter"),
    ("litres", "liters"),
    ("fibre", "fiber"),
    ("grey", "gray"),
    ("mum", "mom"),
    ("mummy", "mommy"),
    ("programme", "program"),
    ("programmes", "programs"),
    ("catalogue", "catalog"),
    ("dialogue", "dialog"),
    ("licence", "license"),
    ("defence", "defense"),
    ("offence", "offense"),
    ("practise", "practice"),
    ("travelled", "traveled"),
    ("travelling", "traveling"),
    ("traveller", "traveler"),
    ("travellers", "travelers"),
    ("cancelled", "canceled"),
    ("cancelling", "canceling"),
    ("modelling", "modeling"),
    ("labelled", "labeled"),
    ("jewellery", "jewelry"),
    ("pyjamas", "pajamas"),
    ("mould", "mold"),
    ("moustache", "mustache"),
    ("sceptical", "skeptical"),
    ("ageing", "aging"),
    ("judgement", "judgment"),
    ("maths", "math"),
    ("cosy", "cozy"),
    ("doughnut", "donut"),
    ("doughnuts", "donuts"),
    ("aeroplane", "airplane"),
    ("aluminium", "aluminum"),
    ("plough", "plow"),
    ("enrol", "enroll"),
    ("enrolment", "enrollment"),
    ("fulfil", "fulfill"),
    ("whisky", "whiskey"),
    # Abbreviations in notes about work and software, and their words.
    ("db", "database"),
    ("dbs", "databases"),
    ("prod", "production"),
    ("k8s", "kubernetes"),
    ("repo", "repository"),
    ("repos", "repositories"),
    ("msg", "message"),
    ("msgs", "messages"),
    ("env", "environment"),
    ("envs", "environments"),
    ("config", "configuration"),
    ("auth", "authentication"),
    ("docs", "documentation"),
    ("info", "information"),
    ("pwd", "password"),
    ("deps", "dependencies"),
    ("pkg", "package"),
    ("perf", "performance"),
    ("impl", "implementation"),
    ("appt", "appointment"),
    ("bday", "birthday"),
    ("tmrw", "tomorrow"),
    ("mins", "minutes"),
    ("hrs", "hours"),
    ("yrs", "years"),
    ("mgr", "manager"),
    ("dept", "department"),
    ("js", "javascript"),
    # a personal assistant's everyday ones (a held-out set of 72 personal memories: +3
    # answered, no near miss more; docs/performance.md, twenty-sixth round)
    ("physio", "physiotherapist"),
    ("physio", "physiotherapy"),
    ("gp", "doctor"),
    ("reg", "registration"),
    ("vet", "veterinarian"),
)
_OTHER: dict[str, tuple[str, ...]] = {}
for _a, _b in _PAIRS:
    _OTHER[_a] = (*_OTHER.get(_a, ()), _b)
    _OTHER[_b] = (*_OTHER.get(_b, ()), _a)

_SUFFIX = r"(s|ed|ing|ite|ites|ful|able|ably|er|ers|hood|hoods|less)?"
# British "-our" (colour, favourite, neighbourhood), the stem at least three letters
# before it, so "hour", "four", "your", "tour" and "flour" are left alone.
_OUR = re.compile(r"^([a-z]{3,})our" + _SUFFIX + "$")
_OR = re.compile(r"^([a-z]{3,})or" + _SUFFIX + "$")
# The American "-or" words that have a British "-our" (the rule the other way would turn
# "doctor" into "doctour").
_OR_STEMS = frozenset(
    "col fav hon lab behavi flav hum rum vap arm harb neighb endeav sav val od parl rig vig "
    "splend clam cand ferv tum glam".split()
)
# "-ise" / "-ize" (organise, prioritising, realisation) and "-yse" / "-yze" (analyse).
_ISE = re.compile(r"^([a-z]{4,})i([sz])(e|ed|es|ing|ation|ations|er|ers)$")
_YSE = re.compile(r"^([a-z]{3,})y([sz])(e|ed|es|ing|er|ers)$")


#: Longer words have no other spelling (and are never cached).
_MAX_CHARS = 40


def spellings(word: str) -> tuple[str, ...]:
    """The other spellings of ``word`` (lower case), as :func:`with_variants` adds them."""
    # Cached (a turn's words are mostly words asked before), word-sized words only: a
    # prompt's 1 MB run of letters would make the cache's size the prompts' size.
    return _spellings(word) if len(word) <= _MAX_CHARS else ()


@functools.lru_cache(maxsize=4096)
def _spellings(word: str) -> tuple[str, ...]:
    out: list[str] = list(_OTHER.get(word, ()))
    if not word.isascii():
        folded = unicodedata.normalize("NFKC", word).casefold()
        if folded != word and re.fullmatch(TOKEN_PATTERN, folded):
            out.append(folded)
            out.extend(_OTHER.get(folded, ()))
        return tuple(dict.fromkeys(out))
    if m := _OUR.match(word):
        out.append(f"{m[1]}or{m[2] or ''}")
    elif (m := _OR.match(word)) and m[1] in _OR_STEMS:
        out.append(f"{m[1]}our{m[2] or ''}")
    if m := _ISE.match(word):
        out.append(f"{m[1]}i{'z' if m[2] == 's' else 's'}{m[3]}")
    if m := _YSE.match(word):
        out.append(f"{m[1]}y{'z' if m[2] == 's' else 's'}{m[3]}")
    return tuple(dict.fromkeys(out))


def with_variants(
    words: Sequence[tuple[str, bool]], more: Callable[[str], tuple[str, ...]] | None = None
) -> tuple[list[tuple[str, bool]], list[int] | None]:
    """``words`` and, after them, each whole word's other spellings not already asked,
    with each term's word (its index in ``words``); ``None`` when nothing was added.
    ``more`` gives an engine's own spellings of a word (PostgreSQL's plurals)."""
    terms = list(words)
    asked = {w for w, star in words if not star}
    groups: list[int] | None = None
    for i, (word, star) in enumerate(words):
        if star:
            continue
        for other in spellings(word) + (more(word) if more is not None else ()):
            if other in asked or len(terms) - len(words) >= MAX_VARIANTS:
                continue
            asked.add(other)
            if groups is None:
                groups = list(range(len(words)))
            terms.append((other, False))
            groups.append(i)
    return terms, groups


def distinct(
    words: Sequence[tuple[str, bool]], groups: Sequence[int], tokens: Sequence[Hashable]
) -> tuple[list[tuple[str, bool]], list[int] | None]:
    """:func:`with_variants`' terms without the spellings the index reads as another
    spelling of the same word (``tokens``: each term's index tokens; "travelling" and
    "traveling" both stem to "travel", and a term counted twice would weigh twice in
    BM25); ``None`` groups when no word keeps two spellings."""
    seen: set[tuple[int, Hashable, bool]] = set()
    kept: list[tuple[str, bool]] = []
    kept_groups: list[int] = []
    for term, g, t in zip(words, groups, tokens, strict=True):
        if (g, t, term[1]) in seen:
            continue
        seen.add((g, t, term[1]))
        kept.append(term)
        kept_groups.append(g)
    if len(set(kept_groups)) == len(kept_groups):
        return kept, None
    return kept, kept_groups
