"""Names a memory's text writes: which of a prompt's words a row names (issue 29).

A question about something the store names ("who controls the budget at lumora?"
against "Lumora: economic buyer = COO Ray Kimura") often asks for it with words the
store never uses ("controls", "budget"). A word no row holds weighs the most in a
keyword score (``calibration.ABSENT_WEIGHT``): it says the store cannot answer. For
a row that *names* what the prompt asks about, the answer is that row, so those
words weigh :data:`~memory_inject.storage.calibration.NAMED_ABSENT_WEIGHT` in its
score instead (``calibration.named_weights``).

A word is a name in a text when it is written with a capital and at least one small
letter after it ("Lumora", "McKenzie"; not "VS" or "SSO") where a sentence does not
start, or where one starts and a colon, another capitalised word or "&" follows
("Lumora: ...", "Norvane Logistics renews", "Fennick & Dale"). Only a name's first word
counts: "Bank" of "Northgate Bank" and "Logistics" of "Norvane Logistics" are common
words a prompt about banks or logistics would otherwise find the row by. Users type names in
lower case, so the prompt's case is not read; the row's is. Compared as words, lower
case, a trailing possessive dropped ("lumora's" asks about "Lumora").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["asked_words", "names_asked", "names_of"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_POSSESSIVE = re.compile(r"['’]s?$")
#: A sentence starts after these (and at the start of the text): a chat line's
#: "Caroline: What a day" starts one after the speaker's colon.
_ENDS = frozenset('.!?:;\n"“(—–-*•')
#: Capitalised, but times, not things a question is about ("what did I do on Friday?"):
#: the temporal stages read them.
_TIME_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march "
    "april may june july august september october november december".split()
)
#: A memory is read this far for names: a fact names what it is about early, and a
#: recall reads every candidate (LoCoMo's longest turn is 444 characters). A text of
#: this length costs at most about 0.2 ms however it is written.
_MAX_CHARS = 1000
#: Whitespace looked back through for a sentence's end; a longer run starts a sentence.
_MAX_SPACES = 16


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", word.lower())


def _titled(word: str) -> bool:
    """ "Lumora", "McKenzie": a capital, then at least one small letter."""
    return word[0].isupper() and any(c.islower() for c in word[1:])


def asked_words(words: Iterable[str]) -> frozenset[str]:
    """The prompt's content words (``fusion.content_words``: no stopwords, which name
    nothing a question asks about) as :func:`names_of` compares them."""
    return frozenset(_bare(w) for w in words) - _TIME_WORDS


def names_of(text: str) -> frozenset[str]:
    """The words ``text`` writes as names (see the module docstring), lower case."""
    text = text[:_MAX_CHARS]
    return frozenset(
        _bare(m.group())
        for m in _WORD.finditer(text)
        if _is_name(text, m.group(), m.start(), m.end())
    )


def names_asked(asked: frozenset[str], text: str) -> bool:
    """True when ``text`` names one of the ``asked`` words (:func:`asked_words`): as
    ``asked & names_of(text)``, reading only where an asked word is written."""
    if not asked:
        return False
    text = text[:_MAX_CHARS]
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter that lower-cases to two: read every word
        return not asked.isdisjoint(names_of(text))
    for w in asked:
        i = lowered.find(w)
        while i >= 0:
            # A name starts with a capital, and a word starts here.
            if text[i].isupper() and (i == 0 or not _JOINED.match(text, i - 1)):
                word = _WORD.match(text, i)
                if (
                    word is not None
                    and _bare(word.group()) in asked
                    and _is_name(text, word.group(), i, word.end())
                ):
                    return True
            i = lowered.find(w, i + 1)
    return False


#: A character a word goes on through (:data:`_WORD`'s letters, digits and apostrophes).
_JOINED = re.compile(r"[^\W_]|['’]")


def _is_name(text: str, word: str, start: int, end: int) -> bool:
    """Whether ``word``, at ``text[start:end]``, is written as a name."""
    if len(word) < 3 or not _titled(word):
        return False
    i, stop = start - 1, max(-1, start - 1 - _MAX_SPACES)
    while i > stop and text[i].isspace():
        i -= 1
    if i > stop and text[i] not in _ENDS:
        # A name's first word: "Bank" of "Northgate Bank" (and "Kimura" of "Ray Kimura")
        # goes on a name, and a common word there would make "bank" prompts name the row.
        return not _goes_on_a_name(text, i)
    # A sentence starts: a name only if a colon, or a capitalised word, goes on; a day or
    # a month does not ("Next Friday works": "Next" names nothing).
    after = _FOLLOW.match(text, end)
    if after is None:
        return False
    follower = after.group(2)
    return after.group(1) is not None or (_titled(follower) and _bare(follower) not in _TIME_WORDS)


#: After a word that starts a sentence: a colon, or ("&" and) the next word.
_FOLLOW = re.compile(r"\s*(?:(:)|&?\s*([^\W_]+(?:['’][^\W_]+)*))")


#: The word (and an "&") that ends at a position.
_LAST = re.compile(r"([^\W_]+(?:['’][^\W_]+)*)\s*&?\s*$")


def _goes_on_a_name(text: str, i: int) -> bool:
    """Whether ``text[i]`` ends a capitalised word (a name the next word goes on)."""
    before = _LAST.search(text, max(0, i - 64), i + 1)
    return before is not None and len(before.group(1)) > 1 and _titled(before.group(1))
