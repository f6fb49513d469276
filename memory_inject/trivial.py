"""Trivial prompts: turns where memory adds nothing ("ok", "/clear", "thanks!").

PI's ``shouldInjectMemoryContext`` (spec 1.13) skips a prompt that, trimmed,
is shorter than 4 characters, starts with ``/``, or is one of its
acknowledgements optionally followed by one ``.``. :func:`is_trivial_prompt`
is its negation with two fixes:

- **Acknowledgements ignore punctuation, symbols and emoji.** The prompt is
  NFKC-normalised and casefolded, every character that is not a letter or
  digit becomes a space, and spaces collapse; then it is compared with the
  list. So "Thanks!!", "ok 👍" and "Sounds good." are trivial (PI injects for
  "thanks!" and "sounds good!"). A prompt with no letter or digit at all
  ("👍👍👍👍", "....") is trivial too. Anything longer stays substantive:
  "great job", "yes please", "continue please".
- **Only a command is a slash command.** The prompt must start with one
  ``/word`` token (a letter, then letters, digits, ``_``, ``-``, ``:`` or
  ``.``) followed by whitespace or the end: "/help", "/curate-memory",
  "/model gpt-4o". "/usr/lib is broken" and "/tmp/x.log fails" are paths,
  not commands. A bare top-level path followed by words ("/etc is missing")
  still reads as a command; a host that needs otherwise passes
  ``slash_commands=False`` and filters commands itself.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

from memory_inject import _filler
from memory_inject._stopwords import REQUEST_WORDS, STOPWORDS
from memory_inject._words import WORD

__all__ = [
    "CHITCHAT",
    "DEFAULT_ACKNOWLEDGEMENTS",
    "asks_about_user",
    "has_query_terms",
    "is_trivial_prompt",
]

#: PI's list (spec 1.13) first, then common chat acknowledgements.
DEFAULT_ACKNOWLEDGEMENTS: tuple[str, ...] = (
    # PI
    "ok",
    "okay",
    "yes",
    "no",
    "sure",
    "right",
    "correct",
    "exactly",
    "true",
    "false",
    "thanks",
    "thank you",
    "sounds good",
    "looks good",
    "got it",
    "done",
    "continue",
    "proceed",
    "go on",
    "next",
    "great",
    "perfect",
    "nice",
    "cool",
    "yep",
    "nope",
    "understood",
    "make sense",
    "makes sense",
    "agreed",
    # ours
    "k",
    "kk",
    "okie",
    "thx",
    "ty",
    "tysm",
    "lgtm",
    "yeah",
    "yup",
    "yes thanks",
    "no thanks",
    "ok thanks",
    "ok thank you",
    "thanks a lot",
    "thank you very much",
    "thank you so much",
    "many thanks",
    "cheers",
    "np",
    "no problem",
    "alright",
    "all right",
    "all good",
    "awesome",
    "excellent",
    "gotcha",
    "noted",
    "ack",
    "roger",
    "fine",
    "good",
    "great thanks",
    "perfect thanks",
    "nice thanks",
    "cool thanks",
)

_COMMAND = re.compile(r"/[^\W\d_][\w:.-]*(?:\s|$)")


def _words(text: str) -> str:
    """Casefolded letters and digits, every other run of characters as one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(c if unicodedata.category(c)[0] in "LN" else " " for c in folded)
    return " ".join(kept.split())


_DEFAULT_SET = frozenset(w for w in map(_words, DEFAULT_ACKNOWLEDGEMENTS) if w)


def is_trivial_prompt(
    text: str,
    *,
    min_chars: int = 4,
    acknowledgements: Iterable[str] = DEFAULT_ACKNOWLEDGEMENTS,
    slash_commands: bool = True,
) -> bool:
    """True when the prompt is too short, a slash command or a bare acknowledgement."""
    stripped = text.strip()
    if len(stripped) < min_chars:
        return True
    if slash_commands and _COMMAND.match(stripped):
        return True
    words = _words(stripped)
    if not words:
        return True
    known = (
        _DEFAULT_SET
        if acknowledgements is DEFAULT_ACKNOWLEDGEMENTS
        else frozenset(w for w in map(_words, acknowledgements) if w)
    )
    return words in known


#: Words that carry no topic on their own: every word of an acknowledgement,
#: greetings, laughter and turn-taking. A prompt made only of these (and
#: function words) has nothing to recall by.
CHITCHAT = frozenset(w for phrase in DEFAULT_ACKNOWLEDGEMENTS for w in phrase.split()) | frozenset(
    (
        "hi hello hey heya hiya yo howdy morning evening night gm gn bye goodbye cya later "
        "lol lmao rofl haha hahaha hehe heh hmm hm mhm uh um umm oh ah aha wow oops sorry "
        "again ping pong test testing more go yay ugh meh idk dunno"
    ).split()
)
# Image and attachment markers: what was attached, not what was asked.
_MARKUP = re.compile(r"\[(?:IMAGE|FILE|AUDIO|VIDEO|DOCUMENT|ATTACHMENT):[^\]\n]{0,4096}\]", re.I)


_WORD = WORD  # letters, digits and their combining marks ("बेटी" is one word)


def has_query_terms(prompt: str) -> bool:
    """True when ``prompt`` has a word worth recalling by.

    Not a content word: a function word (:data:`~memory_inject._stopwords.STOPWORDS`),
    a word of an acknowledgement, greeting or laughter ("ok", "thanks!",
    "hi", "haha", "go on"), a request word ("please"), one letter, or a
    number of one or two digits ("+1"); in a short prompt, chat whose words are topics
    elsewhere ("good job", "that works", "see you tomorrow", "amazing!":
    :mod:`memory_inject._filler`); image and file markers
    (``[IMAGE:/tmp/a.png]``) are not read. An empty, blank, emoji-only or
    punctuation-only prompt has none. A prompt without content words
    recalls nothing in a render (the event says ``abstained=no_query_terms``).
    Stops at the first content word, so a long prompt costs little.
    """
    text = _MARKUP.sub(" ", prompt) if "[" in prompt else prompt
    short = len(text) <= _filler.MAX_CHARS or len(text.strip()) <= _filler.MAX_CHARS
    phrased = False
    for word in _content_words(text, _filler.ALWAYS_WORDS if short else frozenset()):
        # Most prompts stop at their first word: one no filler phrase holds.
        if not short or word not in _filler.PHRASE_WORDS:
            return True
        phrased = True
    if not phrased:
        return False
    words = _words(text)
    question = _filler.is_question(text, words)
    rest = _filler.without_filler(words, question)
    return next(_content_words(rest, _filler.filler_words(question)), None) is not None


def _content_words(text: str, filler: frozenset[str]) -> Iterator[str]:
    """The words of ``text`` that name a topic (see :func:`has_query_terms`), casefolded;
    ``filler``: more words that do not, in this prompt."""
    for match in _WORD.finditer(text):
        word = match.group()
        if not word.isascii():
            word = unicodedata.normalize("NFKC", word)
        word = word.casefold()
        if len(word) == 1 or (word.isdigit() and len(word) <= 2):
            continue
        if word in STOPWORDS or word in CHITCHAT or word in REQUEST_WORDS:
            continue
        if word in filler:
            continue
        yield word


# "What do you know about me?", "who am I?", "what have I told you?": the user asks what
# the memory holds about them, in words that name no topic.
_ABOUT_USER = re.compile(
    r"\bwho am i\b"
    r"|\b(?:know|remember|recall|learn(?:ed|t)?|stored?|saved?|have|got|tell)\b"
    r"[\w\s]{0,24}\babout (?:me|myself)\b"
    r"|\bwhat (?:have|did) i (?:told|tell|say|said) you\b"
    r"|\bwhat do you remember\b"
)


_ABOUT_USER_MAX_CHARS = 200
_ABOUT_USER_ANCHOR = re.compile(r"\bwho\b|\b(?:me|myself)\b|\byou\b", re.I)
# Words such a question adds without naming a topic ("what do you *actually* know about
# me", "have you *learned anything* about me *so far*").
_ABOUT_USER_FILLER = frozenset(
    "actually anything everything really exactly so far yet already currently else other "
    "stored saved learned learnt remember remembered recall told said".split()
)


def asks_about_user(prompt: str) -> bool:
    """True when ``prompt`` asks what the memory holds about the user and names no topic
    ("what do you know about me?", "who am I?"): a render then recalls the newest memories
    the turn may see, as for an empty query, instead of nothing."""
    # Such a question is short; a long prompt is never one, and most short ones fail the
    # cheap look for its anchor words (this runs on every turn).
    if len(prompt) > _ABOUT_USER_MAX_CHARS or _ABOUT_USER_ANCHOR.search(prompt) is None:
        return False
    text = " ".join(_WORD.findall(prompt.replace("\u2019", "'").casefold()))
    if _ABOUT_USER.search(text) is None:
        return False
    rest = [w for w in _ABOUT_USER.sub(" ", text).split() if w not in _ABOUT_USER_FILLER]
    return not has_query_terms(" ".join(rest))
