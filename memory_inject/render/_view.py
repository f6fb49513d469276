"""The normalised view that block markers are matched on, so look-alikes are markers too.

A model (or a host that "cleans" text) may read ``［/Memory context］``
(fullwidth), ``[/Memory\\u00a0context]`` (no-break space), ``＃＃ Hard Rules``
or ``[/Mem\\u200bory context]`` (a zero-width character inside) as the real
marker. The view folds each character on its own: NFKC (fullwidth and small
forms become ASCII), every space separator becomes a space, a tab too, and
invisible characters (other controls, format characters, combining marks)
disappear. Letters of other scripts that read as Latin ones (``[/Меmоry соntехt]``
with Cyrillic ``е``, ``о``, ``с``, ``х``; :mod:`._confusables`) become those Latin
letters. Line breaks stay, so a marker never spans two lines.

:func:`find` matches a pattern on the view and answers spans of the
*original* text, so a caller can escape or replace exactly what a reader
would take for a marker. Pure ASCII printable text is its own view, and the
view is built with ``str.translate`` (C speed); positions are mapped back only
when something matched.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Iterator

from memory_inject.render._confusables import CONFUSABLES

__all__ = ["find", "fold", "replace_surrogates"]

_KEEP = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_DROP = frozenset({"Cc", "Cf", "Mn", "Me"})
_CACHE_MAX = 65_536
_folds: dict[int, str] = {}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _fold_char(ch: str) -> str:
    if ch in _KEEP:
        return ch
    if ch == "\t":
        return " "
    category = unicodedata.category(ch)
    if category in _DROP:
        return ""
    if category == "Zs":
        return " "
    if category == "Cs":
        return ch
    folded = unicodedata.normalize("NFKC", ch)
    return "".join(CONFUSABLES.get(c, c) for c in folded)


def _table(text: str) -> dict[int, str]:
    if len(_folds) > _CACHE_MAX:
        _folds.clear()
    for ch in set(text):
        code = ord(ch)
        if code not in _folds:
            _folds[code] = _fold_char(ch)
    return _folds


def fold(text: str) -> str:
    """The view of ``text``: what a reader that normalises and drops invisibles sees."""
    if text.isascii() and text.isprintable():
        return text
    return text.translate(_table(text))


def find(pattern: re.Pattern[str], text: str) -> Iterator[tuple[re.Match[str], int, int, int]]:
    """Each match of ``pattern`` on the view of ``text``, as ``(match, start, end, body)``.

    ``start`` and ``end`` are the match's span in the original text, ``body``
    where its ``body`` group starts there (``start`` for a pattern without one);
    matches come in order and never overlap.
    """
    view = fold(text)
    matches = [m for m in pattern.finditer(view) if m.end() > m.start()]
    if not matches:
        return
    has_body = "body" in pattern.groupindex
    if view is text:
        for m in matches:
            yield m, m.start(), m.end(), m.start("body") if has_body else m.start()
        return
    table = _table(text)
    ends = list(itertools.accumulate(map(len, map(table.__getitem__, map(ord, text)))))
    done = 0
    for m in matches:
        start = bisect.bisect_right(ends, m.start())
        end = bisect.bisect_right(ends, m.end() - 1) + 1
        if start < done:  # one character folded into the end of one match and the next
            continue
        done = end
        body = bisect.bisect_right(ends, m.start("body")) if has_body else start
        yield m, start, end, max(start, body)


def replace_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so the block always encodes."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)
