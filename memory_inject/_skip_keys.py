"""The skip rules a key alone decides: the autosaves (``user_msg*``, ``assistant_resp*``) and
``*_history``.

One home for them, below the stages and the stores: the skip set
(``memory_inject.stages.filters``) names them on a turn's trace, and a store that
honours :attr:`~memory_inject.contract.RecallQuery.exclude` leaves their rows out
of a refill's query (the stores build their SQL from :data:`AUTOSAVE_KEYS`,
:data:`HISTORY_SUFFIX` and :data:`SQL_TRIMMED`; the in-memory store asks
:func:`key_skip_reason`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "AUTOSAVE_KEYS",
    "HISTORY_SUFFIX",
    "SQL_TRIMMED",
    "any_key_skip",
    "ascii_lower",
    "autosave_key",
    "key_skip_reason",
    "rust_trim",
]

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

#: ``(name, rule)``: a trimmed, ASCII-lowered key equal to ``name`` or starting with
#: ``name + "_"`` is an autosave, skipped as ``rule`` (spec section 5, rules 1 and 2).
AUTOSAVE_KEYS = (
    ("assistant_resp", "skip:assistant_autosave"),
    ("user_msg", "skip:user_autosave"),
)
#: A trimmed, ASCII-lowered key ending so is a history blob (``skip:history``).
HISTORY_SUFFIX = "_history"
#: The white space a store's SQL trims off a key: ASCII only, all of it Unicode
#: White_Space, so a key SQL calls an autosave :func:`rust_trim` calls one too (a key
#: padded with other white space is left to the skip set).
SQL_TRIMMED = " \t\n\x0b\x0c\r"


def ascii_lower(text: str) -> str:
    """``text`` with only ASCII letters lower-cased, like Rust's ``to_ascii_lowercase``."""
    return text.translate(_ASCII_LOWER) if not text.isascii() else text.lower()


def rust_trim(text: str) -> str:
    """``text`` without leading and trailing Unicode White_Space, as Rust's ``str::trim``."""
    # Python's strip also strips \x1c-\x1f, which are not White_Space. Keep those.
    stripped = text.strip()
    if stripped == text or not any(c in text for c in "\x1c\x1d\x1e\x1f"):
        return stripped
    start, end = 0, len(text)
    while start < end and text[start].isspace() and text[start] not in "\x1c\x1d\x1e\x1f":
        start += 1
    while end > start and text[end - 1].isspace() and text[end - 1] not in "\x1c\x1d\x1e\x1f":
        end -= 1
    return text[start:end]


#: What a key a skip rule names holds somewhere, whatever its case (ASCII only, as
#: ``ascii_lower`` folds): a key without it needs no closer look.
_KEY_HINT = re.compile(r"(?i:assistant_resp|user_msg|_history)", re.ASCII)


def any_key_skip(keys: Iterable[str]) -> bool:
    """True when one of ``keys`` may be named by a key's skip rule (one regex search)."""
    return _KEY_HINT.search("\n".join(keys)) is not None


def autosave_key(k: str) -> str | None:
    """The autosave rule a trimmed, ASCII-lowered key ``k`` matches, if any."""
    for name, rule in AUTOSAVE_KEYS:
        if k == name or k.startswith(name + "_"):
            return rule
    return None


def key_skip_reason(key: str) -> str | None:
    """The skip rules a key alone decides (the autosaves, ``*_history``): cheap enough to
    name the rule of every entry the rerank arm never reached."""
    if _KEY_HINT.search(key) is None:  # one C call: most keys are none of these
        return None
    k = ascii_lower(rust_trim(key))
    return autosave_key(k) or ("skip:history" if k.endswith(HISTORY_SUFFIX) else None)
