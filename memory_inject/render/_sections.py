"""The sections of a ``sectioned`` block, and fitting a section's lines into its room.

A section is its slug, its header (title and preamble lines) and its entry
lines; :func:`fit_lines` keeps the whole lines that fit, shortens only a
section's first line, and marks a cut section with ``[...truncated]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attrs import frozen

from memory_inject._text import truncate_with_ellipsis
from memory_inject.models import MemoryEntry
from memory_inject.render._budget import RAW_PER_CHAR, cut_for_cleaning
from memory_inject.render._contain import CUT_SLACK, LABEL_RAW, cut_point

__all__ = ["TRUNCATED", "Item", "Section", "bounded_items", "fit_lines"]

TRUNCATED = "[...truncated]"
_MARKER_LINE = TRUNCATED + "\n"
_MIN_CONTENT = 10  # a line shortened to fit keeps at least this many content characters

Item = tuple[MemoryEntry, str, str]  # entry, line prefix, neutralised content


def bounded_items(
    entries: Sequence[MemoryEntry],
    prefix: Callable[[MemoryEntry], str],
    clean: Callable[[str], str],
    room: int,
) -> list[Item]:
    """The items of a section whose text may use ``room`` characters, cleaning only what can show.

    An entry's content is cleaned from its first ``room + 128`` characters or
    so (:func:`cut_for_cleaning`). Once the lines built so far exceed ``room``,
    or ``8 * (room + 64)`` raw characters (contents and keys) were cleaned,
    no later entry can be
    shown: the next one gets a line longer than ``room`` (so :func:`fit_lines`
    stops there) and the rest empty stand-ins, so they are dropped with the
    section's reason without being cleaned. The work is bounded by the room,
    not by how many entries or characters the store returned.
    """
    items: list[Item] = []
    used = 0
    raw_left = RAW_PER_CHAR * (room + CUT_SLACK)
    blocker: str | None = None
    for e in entries:
        if blocker is not None:
            items.append((e, "", ""))
            continue
        if used > room or raw_left <= 0:
            blocker = "-" * (room + 1)
            items.append((e, blocker, ""))
            continue
        raw_left -= min(len(e.content), cut_point(e.content, room + CUT_SLACK))
        raw_left -= min(len(e.key), cut_point(e.key, LABEL_RAW))  # the key's label
        line_prefix = prefix(e)
        content = cut_for_cleaning(e.content, room + CUT_SLACK, clean)
        items.append((e, line_prefix, content))
        used += len(line_prefix) + len(content) + 1
    return items


@frozen
class Section:
    """One section of the block: its slug, header and entry lines, and its cap in characters."""

    slug: str
    header: str  # "## Title\n" plus preamble lines, each with its newline
    items: list[Item]
    cap: int


def fit_lines(items: Sequence[Item], room: int, limit: int) -> tuple[list[str], int, str | None]:
    """Whole lines that fit in ``room`` chars, then ``[...truncated]`` if any were left.

    Returns the lines, how many items they render and why it stopped (``None``:
    every item fits; ``"keep"``: ``limit`` items; ``"room"``: out of room). Only
    a section's first line is ever shortened, as PI cuts mid-line only when a
    section has no earlier newline.
    """
    full = [prefix + content + "\n" for _, prefix, content in items]
    suffix = [0] * (len(full) + 1)
    for i in range(len(full) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + len(full[i])
    lines: list[str] = []
    used = 0
    stop: str | None = None
    for i, line in enumerate(full):
        if i >= limit:
            stop = "keep"
            break
        if len(full) <= limit and used + suffix[i] <= room:
            return lines + full[i:], len(full), None
        if used + len(line) + len(_MARKER_LINE) <= room:
            lines.append(line)
            used += len(line)
            continue
        stop = "room"
        if i == 0:
            _, prefix, content = items[0]
            width = room - len(_MARKER_LINE) - len(prefix) - 1 - 3
            if _MIN_CONTENT <= width < len(content):
                lines.append(prefix + truncate_with_ellipsis(content, width) + "\n")
        break
    n = len(lines)
    if lines and stop is not None:
        lines.append(_MARKER_LINE)
    return lines, n, stop
