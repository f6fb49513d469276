"""Questions about someone's thing: a fact about someone else is no answer.

"when is raj's birthday?" against a personal memory that holds "Raj is my manager at
Northgate" and "My birthday is on 4 March": each fact holds one of the question's words,
and together they reach the floor, so the block showed the user's own birthday for
Raj's. :func:`owner_drops` reads the owner a question names ("raj" of "raj's"): when a
recalled memory mentions the owner, a fact that does not is about someone else
(``other_owner:<name>``); and when other memories hold the detail asked ("birthday"), a
fact that holds only the owner is no answer either (``owner_only:<name>``).

Only facts stored on purpose (``remember()``, the memory tools:
``models.STANDALONE_SOURCES``) are dropped: each answers a question alone. A chat turn
says "I" for its speaker and rarely names them, so the rule is not applied to
conversations (on LoCoMo's chat lines stored without a session it cost 2.4 points of
block recall). On the seven English facts sets it removed 8 near-miss blocks and no
answer (docs/performance.md, "Issue 29, twenty-sixth round").

An owner that is a role ("my sister's phone number", ``_ROLES``) is also named by the
names in the facts that mention the role: "Anna's phone number is ..." answers it when
"User's sister is Anna" was recalled too, and that fact, the tie, is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_inject._stopwords import REQUEST_WORDS, STOPWORDS
from memory_inject.models import STANDALONE_SOURCES, MemoryEntry

__all__ = ["asked_owners", "owner_drops"]

# "raj's", "Quillfeather’s": a word before a possessive "'s".
_POSSESSIVE = re.compile(r"\b([^\W\d_]{2,})['\u2019]s\b")
# Words before "'s" that own nothing: contractions ("what's", "it's", "let's") and times.
_NOT_OWNERS = frozenset(
    "it what who that there here he she let where how when why this everyone today "
    "tomorrow yesterday week year month one someone somebody nobody user".split()
)
# A question asking for the owner's name ("what's my sister's name?") is answered by a
# fact that names her: "name" is not a detail other facts can hold for someone else.
_NAMING = frozenset({"name", "names", "named", "called"})
_WORD = re.compile(r"[^\W\d_]{3,}")
# Owners that are a role, not a name ("my sister's phone number"): the facts about her
# name her ("Anna's phone number is ..."), and the fact that says who she is ("User's
# sister is Anna") ties the two. Such an owner is also named by the names of the facts
# that mention the role (:func:`_role_names`).
_ROLES = frozenset(
    "sister sisters brother brothers mom mum mother dad father parent parents wife husband "
    "partner spouse fiance fiancee boyfriend girlfriend son daughter kid kids child children "
    "baby grandma grandmother grandpa grandfather granny aunt uncle cousin niece nephew "
    "friend bestie boss manager colleague coworker teammate roommate flatmate neighbor "
    "neighbour landlord landlady doctor dentist therapist teacher coach tutor assistant "
    "dog cat puppy kitten pet horse".split()
)
# A name: a capitalised word ("Anna", "O'Neil", "Jean-Luc").
_NAME = re.compile(r"\b[A-Z][^\W\d_]+(?:(?:['\u2019][A-Z]|-[A-Z]?)[^\W\d_]+)?")
#: A question names an owner or two; a pasted log with thousands of "x's" stays cheap (3,000
#: owners over 20 entries took 1.8 s), as ``fusion.content_words`` reads 64 terms at most.
MAX_OWNERS, MAX_DETAILS = 4, 64


def asked_owners(query: str) -> list[str]:
    """The owners a question names, lowercased, in order ("raj" of "when is raj's ...")."""
    found = _POSSESSIVE.findall(query.lower())
    owners = dict.fromkeys(w for w in found if w not in _NOT_OWNERS and w not in STOPWORDS)
    return list(owners)[:MAX_OWNERS]


def _mentions(*words: str) -> re.Pattern[str]:
    return re.compile(rf"\b(?:{'|'.join(map(re.escape, words))})\b", re.IGNORECASE)


def _role_names(role: str, recalled: Sequence[MemoryEntry]) -> list[str]:
    """The names the user's role is given in the facts ("Anna" of "User's sister is Anna",
    "my sister Anna", "Anna is my sister"); never a name that only stands near the role
    ("Tom's sister is Carol", "my sister and Tom went to Paris")."""
    r = re.escape(role)
    said = re.compile(
        rf"\b(?:my|our|user['\u2019]s)\s+{r}(?:\s*,)?\s+(?:is\s+)?(?:(?:called|named)\s+)?"
        rf"({_NAME.pattern})|({_NAME.pattern})(?:\s*,)?\s+is\s+(?:my|our|the\s+user['\u2019]s)"
        rf"\s+{r}\b",
        re.IGNORECASE,
    )
    names: dict[str, None] = {}
    for e in recalled:
        for m in said.finditer(e.content):
            name = m.group(1) or m.group(2)
            if name[:1].isupper() and name.lower() not in STOPWORDS | _NOT_OWNERS | _ROLES:
                names[name] = None
    return list(names)[:MAX_OWNERS]


def _holds(word: str) -> re.Pattern[str]:
    """A word's stem at a word's start ("birthday" in "birthdays", "train" in "training")."""
    return re.compile(rf"\b{re.escape(word[: max(4, len(word) - 2)])}", re.IGNORECASE)


def _is_fact(entry: MemoryEntry) -> bool:
    return entry.score is not None and entry.extra.get("source") in STANDALONE_SOURCES


def owner_drops(
    query: str, recalled: Sequence[MemoryEntry], kept: Sequence[MemoryEntry]
) -> dict[str, str]:
    """The keys of ``kept`` (entries past the floor) to drop for a question about someone's
    thing, with their reasons; ``recalled`` is every entry the stage was given."""
    owners = asked_owners(query) if "'" in query or "\u2019" in query else []
    dropped: dict[str, str] = {}
    for owner in owners:
        named = _mentions(owner)
        if not any(named.search(e.content) for e in recalled):
            continue  # the memory knows no one of that name: nothing to tell apart
        words = [
            w
            for w in dict.fromkeys(_WORD.findall(query.lower()))
            if w != owner and w not in STOPWORDS and w not in REQUEST_WORDS and w not in _NAMING
        ]
        details = [_holds(w) for w in words[:MAX_DETAILS]]
        known = [d for d in details if any(d.search(e.content) for e in recalled)]
        ties: set[str] = set()
        if owner in _ROLES and (names := _role_names(owner, recalled)):
            ties = _ties(named, _mentions(*names), known, kept)
            named = _mentions(owner, *names)
        for e in kept:
            if e.key in dropped or e.key in ties or not _is_fact(e):
                continue
            if not (named.search(e.content) or named.search(e.key)):
                dropped[e.key] = f"other_owner:{owner}"
            elif known and not any(d.search(e.content) for d in known):
                dropped[e.key] = f"owner_only:{owner}"
    return dropped


def _ties(
    role: re.Pattern[str],
    names: re.Pattern[str],
    known: Sequence[re.Pattern[str]],
    kept: Sequence[MemoryEntry],
) -> set[str]:
    """The keys of the facts that say who a role is ("User's sister is Anna"), kept
    beside a fact that answers under the name ("Anna's phone number is ...")."""
    answered = any(
        names.search(e.content) and not role.search(e.content)
        for e in kept
        if _is_fact(e) and (not known or any(d.search(e.content) for d in known))
    )
    if not answered:
        return set()
    return {e.key for e in kept if role.search(e.content) and names.search(e.content)}
