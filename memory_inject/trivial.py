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
from collections.abc import Iterable

__all__ = ["DEFAULT_ACKNOWLEDGEMENTS", "is_trivial_prompt"]

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
