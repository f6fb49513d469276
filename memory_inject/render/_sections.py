"""The sections of a ``sectioned`` block, and fitting a section's lines into its room.

A section is its slug, its header (title and preamble lines) and its entry
lines; :func:`fit_lines` keeps the whole lines that fit, shortens only a
section's first line, and marks a cut section with ``[...truncated]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from attrs import frozen

from memory_inject._text import truncate_with_ellipsis
from memory_inject.models import MemoryEntry
from memory_inject.render._budget import RAW_PER_CHAR, cut_for_cleaning
from memory_inject.render._contain import (
    CUT_SLACK,
    LABEL_RAW,
    cut_point,
    neutralize_content,
    neutralize_label,
)

__all__ = [
    "TRUNCATED",
    "Item",
    "Section",
    "bounded_items",
    "daily_digest",
    "fit_lines",
    "is_l1",
    "layer_budgets",
    "priority_name",
    "priority_rank",
    "question_score",
    "session_item",
    "session_parts",
]

TRUNCATED = "[...truncated]"
_MARKER_LINE = TRUNCATED + "\n"
_MIN_CONTENT = 10  # a line shortened to fit keeps at least this many content characters

Item = tuple[MemoryEntry, str, str]  # entry, line prefix, neutralised content


def bounded_items(
    entries: Sequence[MemoryEntry],
    prefix: Callable[[MemoryEntry], str],
    clean: Callable[[str], str],
    room: int,
    text: Callable[[MemoryEntry], str] | None = None,
) -> list[Item]:
    """The items of a section whose text may use ``room`` characters, cleaning only what can show.

    ``text`` gives an entry's raw text (default: its content).

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
        raw = e.content if text is None else text(e)
        raw_left -= min(len(raw), cut_point(raw, room + CUT_SLACK))
        raw_left -= min(len(e.key), cut_point(e.key, LABEL_RAW))  # the key's label
        line_prefix = prefix(e)
        content = cut_for_cleaning(raw, room + CUT_SLACK, clean)
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


# -- PI's selection budgets, daily digest and open questions ------------------------

_SESSION_END = "## Session ended"
_BOILERPLATE = ("<!-- ", "- Persistent Intelligence")
_PRIORITIES = {"low": 0, "medium": 1, "high": 2, "critical": 3, "urgent": 3}


def is_l1(entry: MemoryEntry) -> bool:
    """True for an entry of layer L1 (PI's identity records)."""
    layer = entry.extra.get("layer")
    return isinstance(layer, str) and layer.strip().upper() == "L1"


def layer_budgets(
    entries: Sequence[MemoryEntry], max_l1: int | None, max_l2: int | None, max_records: int | None
) -> tuple[list[MemoryEntry], dict[str, str]]:
    """PI's ``applyLayerBudgets``: L1 first (at most ``max_l1``), then the rest, then the total.

    With every cap ``None`` the entries keep their order and nothing is dropped.
    """
    if max_l1 is None and max_l2 is None and max_records is None:
        return list(entries), {}
    dropped: dict[str, str] = {}
    l1 = [e for e in entries if is_l1(e)]
    rest = [e for e in entries if not is_l1(e)]
    for group, cap, reason in (
        (l1, max_l1, "selection:max_l1"),
        (rest, max_l2, "selection:max_l2"),
    ):
        if cap is not None:
            dropped.update((e.key, reason) for e in group[cap:])
            del group[cap:]
    kept = l1 + rest
    if max_records is not None:
        dropped.update((e.key, "selection:max_records") for e in kept[max_records:])
        kept = kept[:max_records]
    return kept, dropped


def daily_digest(content: str, max_chars: int | None = None, window: int = 0) -> tuple[str, int]:
    """PI's digest of one day's log (``buildDailyDigest``): its notable lines, and how many
    sessions it closed.

    Notable lines start with ``## `` or ``- `` or hold ``#decision`` / ``#key``;
    comments, session-end markers and PI's capture boilerplate are skipped.
    With no notable line: nothing when sessions were closed (PI shows only its
    ``Sessions today`` header), else PI's raw-tail fallback, the last
    ``max_chars`` characters of the content (the whole content without a cap).
    With ``window`` > 0 a content longer than twice the window is read at its head and
    its tail only (``window`` characters each): the threat scan reads no more of it
    (``stages.threat.scan_window``), so a line from its middle was shown unscanned.
    """
    if window > 0 and len(content) > 2 * window:
        content = content[:window] + "\n" + content[-window:]
    sessions = 0
    notable: list[str] = []
    for raw in content.splitlines():
        line = raw.strip()
        if line == _SESSION_END:
            sessions += 1
            continue
        if not line or line.startswith(_BOILERPLATE):
            continue
        if line.startswith(("## ", "- ")) or "#decision" in line or "#key" in line:
            notable.append(line)
    if notable:
        return "\n".join(notable), sessions
    if sessions:
        return "", sessions
    raw = content if max_chars is None else content[-max_chars:] if max_chars > 0 else ""
    return raw.strip(), sessions


def _priority(entry: MemoryEntry) -> str | None:
    meta = entry.extra.get("metadata")
    value = entry.extra.get("priority")
    if value is None and isinstance(meta, Mapping):
        value = meta.get("priority")
    return value.strip().lower() if isinstance(value, str) else None


def priority_rank(entry: MemoryEntry) -> int | None:
    """An inquiry's priority as a rank (medium = 1), from ``extra`` or ``metadata``."""
    return _PRIORITIES.get(_priority(entry) or "")


def priority_name(entry: MemoryEntry) -> str:
    """The inquiry's priority as written (lower case), for its ``? [priority]`` line."""
    return _priority(entry) or ""


def question_score(entry: MemoryEntry, tokens: set[str], split: Callable[[str], set[str]]) -> int:
    """PI's inquiry score: 2 x the tags the prompt names + the question words it shares."""
    tags = entry.extra.get("tags") or ()
    tag_words = {str(t).lower() for t in tags} if isinstance(tags, list | tuple) else set()
    return 2 * len(tag_words & tokens) + len(split(entry.content) & tokens)


# -- Today's Sessions ------------------------------------------------------------------

#: PI's line shows a session's first 3 tools and, under it, its first 2 decisions.
SESSION_TOOLS_SHOWN = 3
SESSION_DECISIONS_SHOWN = 2


def _session_field(entry: MemoryEntry, name: str) -> object:
    meta = entry.extra.get("metadata")
    if isinstance(meta, Mapping) and meta.get(name) not in (None, "", [], ()):
        return meta[name]
    return entry.extra.get(name)


def _session_strings(value: object, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(v for v in value if isinstance(v, str) and v.strip())[:limit]


def session_parts(entry: MemoryEntry) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
    """A session entry's project, name, first 3 tools and first 2 decisions, raw.

    Read from its ``metadata`` (what :func:`memory_inject.sessions.record_session`
    writes), else from ``extra``; without a name the content is the name, so a
    session written as free text shows as written.
    """
    project = _session_field(entry, "project")
    name = _session_field(entry, "name")
    return (
        project.strip() if isinstance(project, str) else "",
        name if isinstance(name, str) and name.strip() else entry.content,
        _session_strings(_session_field(entry, "tools"), SESSION_TOOLS_SHOWN),
        _session_strings(_session_field(entry, "decisions"), SESSION_DECISIONS_SHOWN),
    )


def session_item(entry: MemoryEntry, room: int) -> Item:
    """PI's Today's Sessions item: ``- [project] name (tool1, tool2, tool3)`` and up to 2
    decisions on lines of their own, indented two spaces.

    No project: no bracket; no tools: no parentheses. Every part is neutralised
    (the project and tools as labels, the name and decisions as one line each),
    so no stored text can start a line of its own; each is cleaned from its
    first ``room + 64`` characters or so, as :func:`bounded_items` does.
    """
    project, name, tools, decisions = session_parts(entry)
    prefix = f"- [{neutralize_label(project)}] " if project else "- "
    width = room + CUT_SLACK
    head = cut_for_cleaning(name, width, neutralize_content)
    if tools:
        head += f" ({', '.join(neutralize_label(t) for t in tools)})"
    lines = [head, *(cut_for_cleaning(d, width, neutralize_content) for d in decisions)]
    return entry, prefix, "\n  ".join(lines)
