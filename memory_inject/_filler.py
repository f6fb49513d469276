"""Chat that names no topic though its words can: "good job", "that works", "see you tomorrow".

:func:`memory_inject.trivial.has_query_terms` decides whether a prompt has a word worth
recalling by. Function words, acknowledgements and greetings never are; but most of what
people type between questions is made of words that *are* topics elsewhere: "good job"
("job"), "that works" ("works"), "try again" ("try"), "see you tomorrow" ("tomorrow"),
"love it" ("love"), "amazing!" ("amazing"). Each recalled the memories holding that word
(a held-out personal memory: "yep that works" rendered the user's job, laptop and a
friend's work, all at a score of 1.0), though it asks nothing.

So a short prompt has these phrases taken out before its words are read
(:func:`without_filler`), and :data:`FILLER_WORDS` count as no topic alone. A question
("what was the good news?", "what makes me sad?", "when is my next stop?") keeps them:
it asks about something, and only what is asked of the assistant itself goes
(:data:`ASKED_PHRASES`: "how are you today?", "what do you mean?") with the words that
are never a topic (:data:`ALWAYS_WORDS`: "congrats", "gracias", "bruh"). Only whole
phrases go: "good job on the quarterly report?" keeps "quarterly report", "that works, add
it to my calendar for friday" keeps "add", "calendar", "friday". A prompt longer than
:data:`MAX_CHARS` (its spaces not counted) is read as it is: such chat is short, and the
rule costs nothing on a long prompt. Phrases are matched as whole words of the casefolded
prompt with every character but letters and digits read as a space ("let's" is "let s",
"you're" is "you re").
"""

from __future__ import annotations

import re

__all__ = [
    "ALWAYS_WORDS",
    "ASKED_PHRASES",
    "FILLER_PHRASES",
    "FILLER_WORDS",
    "MAX_CHARS",
    "PHRASE_WORDS",
    "filler_words",
    "is_question",
    "without_filler",
]

#: Prompts longer than this are read as they are.
MAX_CHARS = 120

#: Phrases whose words are topics elsewhere, and that name none here.
# fmt: off
FILLER_PHRASES: tuple[str, ...] = (
    # it works
    "that works", "it works", "this works", "works for me", "works great", "works now",
    "works perfectly", "that worked", "it worked", "this worked",
    # praise of the answer
    "good job", "great job", "nice job", "good work", "great work", "nice work", "well done",
    "good one", "nice one", "great stuff", "good stuff", "nice try", "good answer",
    "great answer", "you re the best", "you rock", "you re awesome", "love it", "love that",
    "love this", "exactly what i needed", "what i needed", "what i wanted",
    "what i was looking for",
    # help
    "that helps", "that helped", "this helps", "this helped", "it helps", "it helped",
    "helped a lot", "for the help", "for your help", "for helping", "happy to help",
    # agreement, disagreement
    "fair enough", "of course", "sure thing", "you re right", "good point", "good call",
    "good idea", "great idea", "not quite", "not really", "my bad", "never mind",
    "no worries", "no rush", "all set", "me too", "same here", "i agree", "i see",
    "i understand", "i think so", "i guess", "not sure", "no idea", "no way", "no kidding",
    # turn-taking, and asks about the answer itself
    "go ahead", "go for it", "let s do it", "let s go", "do it", "ship it", "hold on",
    "hang on", "one sec", "one second", "one moment", "just a sec", "just a second",
    "give me a sec", "give me a second", "give me a minute", "let me think", "let me check",
    "let me see", "try again", "one more time", "keep going", "keep it up", "carry on",
    "start over", "not now", "maybe later", "for now", "say that again", "repeat that",
    "come again", "what do you mean", "what does that mean", "i don t get it",
    "i don t understand", "make it shorter", "in more detail", "more details", "more detail",
    # greetings and farewells
    "bye for now", "talk later", "talk soon", "talk to you later", "talk to you soon",
    "see you", "see ya", "see you later", "see you soon", "see you tomorrow",
    "have a good one", "have a good day", "have a nice day", "have a great day",
    "have a good night", "good night", "good morning", "good afternoon", "good evening",
    "nice to meet you", "nice talking to you", "how are you", "how are you doing",
    "how are you today", "how s it going", "how is it going", "how are things",
    "how s your day", "how is your day", "what s up", "what s new", "are you there",
    "you there", "still there", "i m back", "welcome back", "long time no see",
    "good to see you", "catch you later",
    # the assistant itself
    "are you a robot", "are you a bot", "are you human", "are you real", "who are you",
    "what s your name", "do you have feelings", "good bot", "bad bot",
    # reactions
    "great news", "good news", "oh no", "how sad", "so sad", "that s sad", "that s funny",
    "so funny", "how funny", "oh my god", "oh my", "my goodness", "good grief", "oh dear",
    "for real", "nailed it", "spot on", "chef s kiss", "fair point", "close but no",
    "i disagree", "that s enough", "scratch that", "what else", "tl dr", "like i m 5",
    "like i m five", "not what i meant", "wrong answer", "okey dokey",
    # other languages' thanks, greetings and agreement
    "de nada", "muchas gracias", "d accord", "merci beaucoup", "danke schön", "danke schon",
    "alles klar", "vielen dank",
)
# fmt: on

#: Words of greeting, thanks and interjection: never a topic, asked or not.
ALWAYS_WORDS = frozenset(
    (
        "absolutely definitely totally certainly indeed surely obviously bravo congrats "
        "congratulations kudos appreciate appreciated brb nevermind nvm ttyl omg gg gr8 thnx "
        "thnks tks thank gracias merci danke bitte tschüss adios adiós hola bonjour salut ciao "
        "hallo nah whoa woah woww yikes damn dang huh bruh ngl"
    ).split()
)

#: Words of reaction, praise and turn-taking that are no topic in a remark ("amazing!",
#: "so sad", "make it shorter") but may be what a question asks about ("what makes me
#: sad?", "when is my next stop?").
FILLER_WORDS = ALWAYS_WORDS | frozenset(
    (
        "interesting amazing wonderful fantastic brilliant impressive incredible lovely sweet "
        "neat wild crazy insane funny hilarious sad awful terrible weird helpful useful wait "
        "stop shorter longer simpler briefer shorten simplify rephrase repeat elaborate clarify "
        "vale claro bueno perfecto genial oui bien super parfait ja nein genau klar prima "
        "maybe almost seriously concise answer now"
    ).split()
)

#: What a question asks of the assistant itself, never of the memory.
# fmt: off
ASKED_PHRASES: tuple[str, ...] = (
    "how are you", "how are you doing", "how are you today", "how s it going",
    "how is it going", "how are things", "how s your day", "how is your day", "what s up",
    "are you there", "you there", "still there", "are you a robot", "are you a bot",
    "are you human", "are you real", "who are you", "what s your name",
    "do you have feelings", "what do you mean", "what does that mean", "say that again",
    "repeat that", "can you repeat that", "come again", "what else", "tl dr",
)
# fmt: on

# A question: a question mark, or one of these first ("what", "do you", "is it").
_OPENERS = frozenset(
    "what whats when whens where wheres who whos whom whose which why how hows do does did "
    "is are was were can could should would will shall am".split()
)


def is_question(text: str, words: str) -> bool:
    """True when ``text`` asks (``words``: its words as :func:`without_filler` takes them)."""
    return "?" in text or words.split(" ", 1)[0] in _OPENERS


def filler_words(question: bool) -> frozenset[str]:
    """The words that are no topic in a short prompt: fewer in a question."""
    return ALWAYS_WORDS if question else FILLER_WORDS


#: Every word of a phrase, and the filler words: a prompt whose content words are all
#: outside it keeps them all.
PHRASE_WORDS = (
    frozenset(w for phrase in FILLER_PHRASES + ASKED_PHRASES for w in phrase.split()) | FILLER_WORDS
)


def _matcher(phrases: tuple[str, ...]) -> re.Pattern[str]:
    ordered = sorted(phrases, key=len, reverse=True)  # the longest phrase first
    return re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\b")


_PHRASES = _matcher(FILLER_PHRASES)
_ASKED = _matcher(ASKED_PHRASES)


def without_filler(words: str, question: bool = False) -> str:
    """``words`` (casefolded, one space between words) without :data:`FILLER_PHRASES`,
    or, in a question, without :data:`ASKED_PHRASES` only."""
    return (_ASKED if question else _PHRASES).sub(" ", words)
