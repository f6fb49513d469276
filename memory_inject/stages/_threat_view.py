"""What the threat scan's rules read: the folded view of a text, and who a phrase addresses.

Owns :func:`fold` (NFKC, control and format characters dropped as every renderer
drops them, Unicode tag characters also read as the ASCII they hide, lower case) and
:func:`addressed` (do the words at a position open an instruction to the reader;
:data:`ZH_OPENS` and :data:`JA_GOES_ON`, the same for Chinese and Japanese). The rules are
``stages/_threat_rules.py``; the scan is ``stages/threat.py``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["JA_GOES_ON", "ZH_OPENS", "addressed", "fold", "fold_case_kept"]


# -- the folded view -------------------------------------------------------------------

# Characters an attacker hides words with, and which no renderer shows (every renderer
# drops them, so "Ign\x00ore" is "Ignore" in the block: round 36): C0 controls but the
# tab and the line breaks, DEL, C1 controls but NEL, and every format character (Cf):
# the soft hyphen, Arabic number signs and letter mark, the Mongolian vowel separator,
# zero-width space, non-joiner and joiner, bidi marks, embeddings, overrides and isolates,
# the word joiner and invisible operators, the BOM, interlinear annotations, the
# hieroglyph, shorthand and musical format controls, the tag block's language and cancel
# tags (its ASCII mirrors are read apart: ``_TAGS``).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u00ad\u0600-\u0605\u061c\u06dd"
    "\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e007f]"
)
# The ASCII ones: a text of ASCII letters is folded only when it holds one.
_ASCII_HIDDEN = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f]")
# Unicode tag characters U+E0020..U+E007E mirror printable ASCII ("ASCII smuggling").
_TAGS = re.compile("[\U000e0020-\U000e007e]+")


def _untag(m: re.Match[str]) -> str:
    # A smuggled run is text of its own, written for the model alone: a line of its own.
    return "\n" + "".join(chr(ord(c) - 0xE0000) for c in m.group()) + "\n"


def _read_tags(text: str) -> str:
    """``text`` as the block shows it (tag characters dropped), then each smuggled run as
    the ASCII it hides, on lines of their own: a rule reads both."""
    return _TAGS.sub("", text) + "".join(map(_untag, _TAGS.finditer(text)))


# The combining marks of Latin, Greek and Cyrillic letters ("I\u0301gnore" is "Ígnore"
# composed, and an accent does not make "ignore" another word to the reader).
# Letters that may carry one (Latin-1 to Latin Extended-B, Greek, Cyrillic, Latin Extended
# Additional and Greek Extended) and the marks themselves: only a text holding one is
# decomposed.
_ACCENTED = re.compile("[\u00c0-\u024f\u0300-\u036f\u0370-\u04ff\u1e00-\u1fff\u20d0-\u20ff]")
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def fold_case_kept(text: str) -> str:
    """:func:`fold` without the lower case: what a rule that reads case reads
    (``system_header``: "ＳＹＳＴＥＭ:" and "S\u200bYSTEM:" are "SYSTEM:")."""
    if text.isascii():
        if text.isprintable() or _ASCII_HIDDEN.search(text) is None:
            return text
        return _ASCII_HIDDEN.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    if _TAGS.search(text) is not None:
        text = _read_tags(text)
    text = _INVISIBLE.sub("", text)
    if text.isascii() or _ACCENTED.search(text) is None:  # CJK, Arabic, emoji...: no accents
        return text
    decomposed = unicodedata.normalize("NFD", text)
    bare = _MARKS.sub("", decomposed)
    return unicodedata.normalize("NFC", bare) if len(bare) != len(decomposed) else text


def fold(text: str) -> str:
    """The view every rule reads: NFKC, control and invisible characters dropped, tags
    read, the accents of Latin, Greek and Cyrillic letters dropped, lower case.

    Tag characters are dropped where they stand, as every renderer drops them, and each
    run of them is also read as the ASCII it hides, on a line of its own at the end.
    """
    return fold_case_kept(text).lower()


# Words that may open an instruction addressed to the reader (an imperative), and the
# words after which the same verb is reported speech or narration.
_LEAD = frozenset(
    "please now so then and but just also simply first immediately kindly hereby instead "
    "always you ai assistant model bot chatbot chatgpt gpt claude "
    "gemini llama copilot system important note urgent attention veuillez bitte favor".split()
)
_AUXILIARIES = frozenset("to must should shall will can could would need".split())
_CONDITIONS = frozenset(
    "if when whenever unless whether once because since although though as that did do does "
    "don't didn't doesn't why how where".split()
)
_ADDRESSEES = frozenset("you u ai assistant model bot chatbot chatgpt gpt claude".split())
_WORD_BEFORE = re.compile(r"([\w']+)[^\w\n.!?:;,\-*>(\[{\"'`]*$")
_ELIDED = re.compile(r"\b(?:qu|[cdjlmnst])['\u2019]$")
_POLITE = frozenset("merci priere".split())
# Verbs that order what follows ("je vous demande d'ignorer"), unless in the past ("il m'a
# demande d'oublier": the accent is folded away, the auxiliary is not).
_ASKS = frozenset("demande ordonne prie supplie conseille recommande dis".split())
_PAST = frozenset("a ont avait avaient aurait auraient".split())
# A French infinitive of the override rule: only such a verb is reported after "d'".
_FRENCH_VERB = re.compile(r"(?:ignorer|oublier|outrepasser|contourner)\b")
_OPENER = re.compile(r"(?:^|[\n.!?:;,\-*>(\[{\"'`|#])[\s\"'`*_~>|#]*$")


def addressed(view: str, start: int) -> bool:
    """True when the words at ``start`` open an instruction to the reader.

    The start of the text, of a line, sentence or clause, after a quote, bullet or
    bracket, or after a word that leads an imperative (``please``, ``now``, ``and``,
    ``you must``, ``assistant,`` ...). After ``to`` only when the reader is the one
    told (``I want you to ignore``), never after a subject (``users often ignore``,
    ``told my boss to ignore``).
    """
    before = view[max(0, start - 64) : start]
    if (e := _ELIDED.search(before)) is not None and _FRENCH_VERB.match(view, start):
        # French elision opens no quote: "m'a dit d'ignorer" reports; "merci d'ignorer",
        # "je vous demande d'ignorer" and "Important : d'ignorer" ask.
        rest = before[: e.start()]
        if _OPENER.search(rest) is not None:
            return True
        prev = _WORD_BEFORE.search(rest)
        if prev is None:
            return True
        word = prev.group(1).rsplit("'", 1)[-1]
        if word in _POLITE:
            return True
        told = _WORD_BEFORE.search(rest[: prev.start()])
        return word in _ASKS and (told is None or told.group(1) not in _PAST)
    if _OPENER.search(before) is not None:
        return True
    m = _WORD_BEFORE.search(before)
    if m is None:
        return True
    word = m.group(1)
    if word in _AUXILIARIES:
        # "I want you to ignore", "you must ignore", "assistant, please ignore": the reader is
        # the one told; "told my boss to ignore", "users should ignore": someone else is.
        rest = before[: m.start()]
        if _OPENER.search(rest) is not None:
            return word != "to"
        prev = _WORD_BEFORE.search(rest)
        return prev is not None and prev.group(1) in _ADDRESSEES
    if word == "you":
        # "you ignore ..." commands; "if you ignore ...", "did you ignore ...?" do not.
        prev = _WORD_BEFORE.search(before[: m.start()])
        return prev is None or prev.group(1) not in _CONDITIONS
    return word in _LEAD


#: Where a Chinese verb opens an instruction: after no letter (the start, punctuation, a
#: bracket, a heading mark, a number), or after a word that leads an imperative or
#: names the reader ("请", "你", "现在", "那么", "然后", "助手" ...); never right after a
#: subject or an adverb of narration ("我经常忘记以前的事情", "老板让我忽略").
ZH_OPENS = (
    r"(?:(?<![^\W\d_])|(?<=那么)|(?<=然后)|(?<=并且)|(?<=并)|(?<=接着)|(?<=所以)|(?<=助手)"
    r"|(?<=现在)|(?<=請)|(?<=请)|(?<=ai)|(?<=bot))"
    r"(?:请|請|你|您|现在|現在|立即|立刻|马上|馬上|首先|从现在开始|從現在開始|必须|必須|务必|務必"
    r"|要|先){0,4}"
)
#: A Japanese te-form that asks ("無視して", "無視してください", "無視してお答えください",
#: "無視していいよ", "無視してもらえますか"), not one that narrates ("無視していた",
#: "無視している", "忘れてしまった", "無視しておく", "忘れても").
JA_GOES_ON = r"(?!い(?:た|る|ま)|しま|お(?:く|い|き)|も(?!ら))"
