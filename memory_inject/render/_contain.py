"""The one neutraliser: what makes untrusted stored text safe inside a block.

Keys and contents come from chat senders, tools and imports, so no stored text
may forge structure: a header, a section, another entry or a closing marker.
The formats contain it in one of two ways, both defined here:

* ``bracket`` keeps multi-line content readable: :func:`contain_content`
  indents every continuation line two spaces and defuses ``[Memory context]``
  markers; :func:`contain_key` puts a key on one line. Ordinary single-line
  memories pass through unchanged, so the block stays zeroclaw's byte for byte.
* ``sectioned`` and ``relevant_memories`` put every entry on exactly one line
  that starts with the format's own prefix: :func:`neutralize` turns every line
  break into a visible `` ↵ ``, drops control, format and bidi characters, and
  backslash-escapes block markers (``[/Memory context]``, the section titles,
  ``<!--``, code fences) wherever they occur in a line, so a model reading the
  text does not take them for structure either.

Markers are matched on a normalised view (:mod:`._view`): fullwidth and
small-form look-alikes, no-break and ideographic spaces, and invisible
characters inside a marker do not hide it. Backslashes already in front of
a marker are replaced by the one escape, so ``\\## Hard Rules`` cannot cancel
it. No block ever holds a lone surrogate (it could not be UTF-8 encoded).
"""

from __future__ import annotations

import re
import unicodedata

from memory_inject._text import truncate_with_ellipsis
from memory_inject.render._confusables import CONFUSABLES
from memory_inject.render._view import find, fold, replace_surrogates

__all__ = [
    "LABEL_RAW",
    "contain_content",
    "contain_key",
    "cut_point",
    "neutralize",
    "neutralize_content",
    "neutralize_label",
]

# Line breaks a model (or a splitlines() parser) may honour: every character
# Python's str.splitlines() breaks on; CRLF counts once.
_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


# -- bracket: indented continuation lines, defused markers ----------------------

_MARKER = re.compile(r"\[ *(/?) *memory *context *\]", re.IGNORECASE)  # on the view
# Line breaks, and every character that folds to "[" (NFKC's and the view's look-alikes,
# "⟦" and "❲" among them: round 36): no marker can start without one.
_RISKY = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029[\ufe47\uff3b").union(
    ch for ch, plain in CONFUSABLES.items() if plain == "["
)


def _defuse_markers(text: str) -> str:
    parts: list[str] = []
    pos = 0
    for m, start, end, _ in find(_MARKER, text):
        parts += (text[pos:start], f"[{m.group(1)}Memory-context]")
        pos = end
    return "".join((*parts, text[pos:])) if parts else text


# Characters no reader needs and an attacker uses: C0 controls but tab and the line breaks
# (NUL; ESC starts a terminal sequence that hides text), DEL, C1 controls but NEL (U+009B
# starts one too), the soft hyphen, Arabic letter mark, Mongolian vowel separator,
# zero-width space, the bidi marks, embeddings, overrides and isolates, the word joiner
# and invisible operators, deprecated format controls, the BOM, interlinear annotations,
# the shorthand and musical format controls, and the tag characters (invisible ASCII: an
# instruction the reader of the block cannot see, round 36). A zero-width joiner (emoji),
# non-joiner (Persian, Indic scripts) and the Arabic number signs, which show, are kept.
# The subdivision flags of Unicode's recommended emoji set (England, Scotland, Wales: the
# black flag, the tag letters "gbeng", "gbsct" or "gbwls", the cancel tag) are the one
# use of tag characters a reader sees, and are kept whole (group 1); no other tag run is,
# so no flag can carry hidden words.
_FLAG_TAGS = ("gbeng", "gbsct", "gbwls")
_UNSAFE = re.compile(
    "(\U0001f3f4(?:"
    + "|".join("".join(chr(0xE0000 + ord(c)) for c in t) for t in _FLAG_TAGS)
    + ")\U000e007f)"
    "|[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u00ad\u061c\u180e\u200b\u200e"
    "\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def _safe(m: re.Match[str]) -> str:
    return m.group(1) or ""


def contain_content(text: str) -> str:
    """Keep untrusted content inside its entry: continuation lines are indented
    two spaces (so no stored line can start a forged ``- key:`` entry or sit at
    the left margin as a closing marker), block markers are defused, and control,
    bidi and zero-width characters dropped (``_UNSAFE``).

    Single-line content without ``[`` or those characters is returned unchanged, so
    ordinary memories render byte for byte as zeroclaw renders them (lone surrogates
    aside, which become U+FFFD).
    """
    text = replace_surrogates(text)
    if _UNSAFE.search(text) is not None:
        text = _UNSAFE.sub(_safe, text)
    if _RISKY.isdisjoint(text):
        return text
    return "\n  ".join(_BREAKS.split(_defuse_markers(text)))


def contain_key(key: str) -> str:
    """A key on one line with its markers defused and its control, bidi and zero-width
    characters dropped ("deploy_target\u200b" must not pass for "deploy_target")."""
    key = replace_surrogates(key)
    if _UNSAFE.search(key) is not None:
        key = _UNSAFE.sub(_safe, key)
    if _RISKY.isdisjoint(key):
        return key
    return " ".join(_BREAKS.split(_defuse_markers(key)))


# -- sectioned and relevant_memories: one inert line ----------------------------

_NEWLINE_MARK = " ↵ "
_ZWJ = "\u200d"  # kept: emoji sequences need it
_TITLES = (
    "persistent intelligence context",
    "hard rules",
    "selected memory",
    "scratchpad",
    "contested memory",
    "daily log",
    "relevant memories",
    "today.s sessions",  # any apostrophe; these two were missing, so a memory could
    "open questions",  # write either section's title (a regex: "." is any character)
)
# Matched on the view; "bs" is the run of backslashes already in front, which the one
# escape replaces. A fence is a run of three backticks or tildes.
_MARKERS = re.compile(
    r"(?P<bs>\\*)(?P<body>\[ */? *memory *context *\]|<!--"
    r"|(?<!#)#+ *(?:" + "|".join(t.replace(" ", " *") for t in _TITLES) + r")"
    r"|`{3,}|~{3,})",
    re.IGNORECASE,
)
_LABEL_MAX = 120
LABEL_RAW = 4 * _LABEL_MAX  # a label is cut near this many characters before it is cleaned
_CLEAN_CACHE_MAX = 65_536
_cleaned: dict[int, str] = {}
# What may continue a marker across a cut: '#', backslashes, fence characters, spaces,
# controls and invisibles, and their look-alikes. A cut inside a run of them moves past it.
_RUN = re.compile(
    "[#\\\\`~\\s\x00-\x1f\x7f-\x9f\u00a0\u00ad\u180e\u2000-\u200f\u202a-\u202f"
    "\u205f-\u206f\u3000\ufeff\ufe5f\ufe68\uff03\uff3c\uff40\uff5e\u1fef]*"
)
_RUN_MAX = 4096
CUT_SLACK = 64  # past the cut: the longest marker after its runs


def _clean_char(ch: str) -> str:
    if ch == "\t":
        return " "
    category = unicodedata.category(ch)
    if category == "Cc" or (category == "Cf" and ch != _ZWJ):
        return ""  # NUL, ESC, DEL, bidi overrides and isolates, zero-width, tag characters
    if category == "Cs":
        return "\ufffd"  # a lone surrogate cannot be encoded
    return ch


def _clean(text: str) -> str:
    """:func:`_clean_char` over ``text``, at ``str.translate`` speed."""
    if len(_cleaned) > _CLEAN_CACHE_MAX:
        _cleaned.clear()
    for ch in set(text):
        if ord(ch) not in _cleaned:
            _cleaned[ord(ch)] = _clean_char(ch)
    return text.translate(_cleaned)


def _escape_markers(text: str) -> str:
    parts: list[str] = []
    pos = 0
    for m, start, end, body in find(_MARKERS, text):
        marker = text[body:end]
        if m.group("body")[0] in "`~":
            escaped = "".join("\\" + ch for ch in marker if fold(ch))
        else:
            escaped = "\\" + marker
        parts += (text[pos:start], escaped)
        pos = end
    return "".join((*parts, text[pos:])) if parts else text


def neutralize(text: str) -> str:
    """One line of inert text: breaks become `` ↵ ``, controls go, markers are escaped.

    Line breaks (``\\n``, ``\\r``, VT, FF, U+001C-U+001E, NEL, U+2028, U+2029)
    become `` ↵ ``; a tab becomes a space; other control (Cc) and format (Cf:
    bidi controls, zero-width characters, tag characters) characters are
    dropped, except the zero-width joiner; lone surrogates become U+FFFD.
    Then ``[Memory context]``, ``[/Memory context]``, ``<!--``, ``#`` runs
    before a section title of either block, and code fences get a backslash.
    """
    text = _BREAKS.sub(_NEWLINE_MARK, text)
    if not text.isprintable():
        text = _clean(text)
    return _escape_markers(text)


def cut_point(text: str, width: int) -> int:
    """Where to cut ``text`` so that cleaning its first ``width`` characters is exact.

    ``width + 64``; when a run of ``#``, spaces, backslashes, fence or
    invisible characters reaches it, 64 past the run's end (runs longer than
    4,096 are cut), so that no marker straddles the cut: the cleaned prefix
    then escapes everything the cleaned whole text would, up to ``width``.
    """
    end = width + CUT_SLACK
    if end >= len(text):
        return len(text)
    run = _RUN.match(text, end, min(len(text), end + _RUN_MAX))
    if run is None or run.end() == end:
        return end
    return min(len(text), run.end() + CUT_SLACK)


def neutralize_content(text: str) -> str:
    """A memory's content as one inert line without surrounding whitespace."""
    return neutralize(text).strip()


def neutralize_label(text: str) -> str:
    """A key, category, layer or rule type: no spaces or brackets, so ``[meta]`` is unambiguous.

    Only the first few hundred characters are cleaned: a label shows 120.
    """
    end = cut_point(text, LABEL_RAW)
    cut = end < len(text)
    label = "_".join(neutralize(text[:end] if cut else text).split())
    label = label.replace("[", "(").replace("]", ")")
    if cut and len(label) <= _LABEL_MAX:
        label += "..."
    return truncate_with_ellipsis(label, _LABEL_MAX) or "?"
