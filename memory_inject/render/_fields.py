"""Reading the governance fields a format shows from ``MemoryEntry.extra``.

Stored rows come from PI, founder-os and hand-written imports, so every reader
accepts anything and answers ``None`` (or nothing) for a value it cannot use.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memory_inject.models import MemoryEntry, parse_timestamp

__all__ = [
    "conf_suffix",
    "confidence",
    "lower_field",
    "overlap",
    "query_tokens",
    "stale_marker",
    "text_field",
    "utc",
]


def confidence(entry: MemoryEntry) -> float | None:
    """Confidence on the 0..1 scale; founder-os' 0..100 integers are divided by 100."""
    value = entry.extra.get("confidence")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    if not math.isfinite(value) or value < 0 or value > 100:
        return None
    return value / 100 if value > 1 else value


def text_field(entry: MemoryEntry, *names: str) -> str | None:
    """The first of ``names`` that holds a non-blank string, stripped."""
    for name in names:
        value = entry.extra.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def lower_field(entry: MemoryEntry, *names: str) -> str | None:
    """:func:`text_field` in lower case, for comparing against fixed values."""
    value = text_field(entry, *names)
    return None if value is None else value.lower()


def _datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime | str):
        try:
            return parse_timestamp(value)
        except ValueError:
            return None
    return None


def stale_marker(entry: MemoryEntry, now: datetime) -> str:
    """`` 🔴 {days}d`` from 90 days, `` ⚠️ {days}d`` from 30, counted from ``ctx.now``."""
    updated = _datetime(entry.extra.get("updated_at")) or entry.timestamp
    if updated is None:
        return ""
    days = max(0, (now - updated) // timedelta(days=1))
    if days >= 90:
        return f" 🔴 {days}d"
    if days >= 30:
        return f" ⚠️ {days}d"
    return ""


def conf_suffix(value: float | None) -> str:
    """``, conf X.XX`` for a known confidence, else nothing."""
    return "" if value is None else f", conf {value:.2f}"


def utc(now: datetime) -> datetime:
    """``now`` in UTC; a naive time is taken to be UTC already."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")


def query_tokens(text: str) -> set[str]:
    """PI's relevance tokens: lowercase runs of ``a-z0-9`` longer than two characters."""
    return {t for t in _TOKEN_SPLIT.split(text.lower()) if len(t) > 2}


def overlap(entry: MemoryEntry, tokens: set[str]) -> float:
    """PI's overlap coefficient of the content-and-tags tokens with the query tokens."""
    tags = entry.extra.get("tags") or ()
    tag_text = " ".join(str(t) for t in tags) if isinstance(tags, list | tuple) else str(tags)
    mine = query_tokens(entry.content + " " + tag_text)
    if not mine or not tokens:
        return 0.0
    return len(mine & tokens) / min(len(mine), len(tokens))
