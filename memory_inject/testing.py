"""Test doubles and block readers for code that uses memory_inject (httpx's ``MockTransport``).

``FixtureMemory`` returns a preset list per session scope and records every
call; it can fail, hang or return garbage on demand. ``RecordingReceiver``
collects ``memory_recall`` events. ``parse_bracket``, ``parse_sectioned`` and
``parse_relevant`` read a rendered block back into its entry lines and raise
``ValueError`` on anything else: the tests use them to prove that a block holds
exactly the entries it rendered, and a host's tests can too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from memory_inject.contract import Memory
from memory_inject.models import MemoryEntry
from memory_inject.render._sectioned_format import (
    CONTESTED_WARNING,
    RULE_PREFIXES,
    SECTION_TITLES,
    TITLE_BLOCK,
)
from memory_inject.render._sections import TRUNCATED
from memory_inject.render.bracket import MEMORY_CONTEXT_CLOSE, MEMORY_CONTEXT_OPEN
from memory_inject.render.relevant_memories import RELEVANT_MEMORIES_HEADER
from memory_inject.signals import MemoryRecall, memory_recall

__all__ = [
    "FixtureMemory",
    "RecordingReceiver",
    "parse_bracket",
    "parse_relevant",
    "parse_sectioned",
    "recording",
]


class FixtureMemory:
    """A store whose answers are fixed per scope (a missing scope answers ``[]``)."""

    def __init__(
        self,
        by_scope: Mapping[str | None, Sequence[Any]] | None = None,
        *,
        name: str = "fixture",
        fail: BaseException | bool = False,
        delay: float = 0.0,
    ) -> None:
        """``by_scope`` maps a session id (None: no session) to what ``recall`` returns.

        The lists may hold anything, so a test can hand the renderer garbage.
        ``fail`` (an exception, or True for a ``RuntimeError``) makes every recall
        raise; ``delay`` seconds are slept first, and ``name`` is the store's name.
        """
        self._by_scope = dict(by_scope or {})
        self._name = name
        self.fail = fail
        self.delay = delay
        self.calls: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        """The store's name (``name=``), reported on the recall event."""
        return self._name

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        """Record the call, sleep ``delay``, raise ``fail`` if set, else the scope's list.

        An unknown scope answers ``[]``; ``query``, ``since`` and ``until`` are ignored.
        """
        self.calls.append({"query": query, "limit": limit, "session_id": session_id})
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise self.fail if isinstance(self.fail, BaseException) else RuntimeError("boom")
        return list(self._by_scope.get(session_id, ()))

    @property
    def limits(self) -> list[int]:
        """The ``limit`` of each recorded call, in call order."""
        return [c["limit"] for c in self.calls]


class RecordingReceiver:
    """Collects every ``memory_recall`` event while connected."""

    def __init__(self) -> None:
        self.events: list[MemoryRecall] = []

    def __call__(self, sender: Memory, *, event: MemoryRecall) -> None:
        self.events.append(event)

    @property
    def pairs(self) -> list[tuple[int, bool]]:
        """``(num_entries, success)`` per event, as the spec's tests write them."""
        return [(e.num_entries, e.success) for e in self.events]


@contextmanager
def recording() -> Iterator[RecordingReceiver]:
    """``with recording() as rec:`` collects the events sent inside the block."""
    rec = RecordingReceiver()
    memory_recall.connect(rec)
    try:
        yield rec
    finally:
        memory_recall.disconnect(rec)


# -- reading a block back ------------------------------------------------------

_BRACKET_HEADER = MEMORY_CONTEXT_OPEN + "\n"
_BRACKET_FOOTER = MEMORY_CONTEXT_CLOSE + "\n\n"


def parse_bracket(text: str) -> list[str]:
    """The entry lines of a bracket block (continuations joined).

    Raises ``ValueError`` if the block is not exactly one header, entries that
    start with ``- `` with two-space continuation lines, and one footer.
    """
    if text == "":
        return []
    if not (text.startswith(_BRACKET_HEADER) and text.endswith(_BRACKET_FOOTER)):
        raise ValueError("not a [Memory context] block")
    body = text[len(_BRACKET_HEADER) : -len(_BRACKET_FOOTER)]
    entries: list[str] = []
    for line in body.split("\n")[:-1]:
        if line.startswith("- "):
            entries.append(line)
        elif line.startswith("  ") and entries:
            entries[-1] += "\n" + line
        else:
            raise ValueError(f"unexpected line in block: {line!r}")
    return entries


def parse_relevant(text: str) -> list[str]:
    """The entry lines of a ``## Relevant Memories`` block; ``ValueError`` if malformed."""
    if text == "":
        return []
    head = RELEVANT_MEMORIES_HEADER + "\n"
    if not text.startswith(head) or not text.endswith("\n\n"):
        raise ValueError("not a Relevant Memories block: bad header or ending")
    lines = text[len(head) : -2].split("\n")
    for line in lines:
        if not line.startswith("- ["):
            raise ValueError(f"not an entry line: {line[:80]!r}")
    return lines


_DAILY_TITLE = re.compile(r"Daily Log \(\d{4}-\d{2}-\d{2}\)")
_SECTION_PREFIXES: Mapping[str, tuple[str, ...]] = {
    "Hard Rules": tuple(sorted(set(RULE_PREFIXES.values()))),
    "Selected Memory": ("- ",),
    "Scratchpad": ("- [ ] ",),
    "Contested Memory": ("⚠️ CONTESTED: [",),
    "Daily Log": ("- ",),
    "Today's Sessions": ("- ",),
    "Open Questions": ("? [",),
}
_SESSIONS_TODAY = re.compile(r"Sessions today: \d+")
_RECENT_SESSIONS = re.compile(r"Recent sessions \(\d{4}-\d{2}-\d{2}\):")
_DECISION_INDENT = "  "


def _session_entries(body: list[str]) -> list[str]:
    """Today's Sessions lines with each session's indented decision lines joined to it."""
    out: list[str] = []
    for line in body:
        if line.startswith(_DECISION_INDENT) and out and out[-1] != TRUNCATED:
            out[-1] += "\n" + line
        else:
            out.append(line)
    return out


def parse_sectioned(text: str) -> dict[str, list[str]]:
    """Section title -> its entry lines; ``ValueError`` if the block is not well formed.

    The title line, the contested warning, the ``Recent sessions (date):``
    line and the ``[...truncated]`` marker are structure, not entries, and
    are left out. The Daily Log's date is dropped from its title. A session's
    decision lines belong to its entry (joined with ``\n``).
    """
    if text == "":
        return {}
    if not text.startswith(TITLE_BLOCK) or not text.endswith("\n\n"):
        raise ValueError("not a sectioned block: bad title or ending")
    out: dict[str, list[str]] = {}
    order = list(SECTION_TITLES.values())
    groups = text[len(TITLE_BLOCK) :].split("\n\n")
    if groups[-1] != "":
        raise ValueError("not a sectioned block: bad ending")
    for group in groups[:-1]:
        header, *body = group.split("\n")
        title = header[3:] if header.startswith("## ") else ""
        if _DAILY_TITLE.fullmatch(title):
            title = "Daily Log"
        elif title == "Daily Log" or title not in order:
            raise ValueError(f"unknown section header {header[:80]!r}")
        if any(t in out for t in order[order.index(title) :]):
            raise ValueError(f"section {title!r} repeated or out of order")
        if title == "Contested Memory":
            if not body or body[0] != CONTESTED_WARNING:
                raise ValueError("Contested Memory must start with the warning")
            body = body[1:]
        counted = title == "Daily Log" and bool(body) and bool(_SESSIONS_TODAY.fullmatch(body[0]))
        if counted:  # a day with only closed sessions shows its count alone (round 36)
            body = body[1:]
        if title == "Today's Sessions":
            if not body or not _RECENT_SESSIONS.fullmatch(body[0]):
                raise ValueError("Today's Sessions must start with 'Recent sessions (date):'")
            body = _session_entries(body[1:])
        if body and body[-1] == TRUNCATED:
            body = body[:-1]
        if not body and not counted:
            raise ValueError(f"empty section {title!r}")
        for line in body:
            if not line.startswith(_SECTION_PREFIXES[title]):
                raise ValueError(f"not an entry line of {title!r}: {line[:80]!r}")
        out[title] = body
    return out
