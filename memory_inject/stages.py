"""Pipeline stages: small callables with one signature.

``stage(ctx, candidates) -> StageResult``: a stage takes the turn context and
the candidates (``MemoryEntry``, best first) and returns the survivors plus
``{key: reason}`` for each entry it dropped. Stages are pure: time comes in as
``ctx.now``; no I/O, no logging, no signals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from attrs import field, frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import MemoryCategory, MemoryEntry

__all__ = [
    "Stage",
    "StageContext",
    "StageResult",
    "StageTrace",
    "conversation_exclusion",
    "decay",
    "format_score",
    "relevance_filter",
    "skip_reason",
    "skip_set",
]

_LN2 = math.log(2.0)
_CORE = MemoryCategory.CORE
_CONVERSATION = MemoryCategory.CONVERSATION


@frozen(slots=True)
class StageContext:
    """What every stage may read: the resolved config, the clock and the policy outcome."""

    config: MemoryInjectConfig
    now: datetime
    exclude_conversation: bool = False
    query: str = ""
    #: At most how many survivors the rest of the pipeline can use (None: unknown).
    #: A stage that produces lazily (the rerank arm) may stop there.
    demand: int | None = None
    #: The turn's resolved profile (governance: ProfileScope).
    profile_id: str | None = None
    #: Normalised project keys of the turn (governance: ProjectScope).
    project_keys: frozenset[str] = frozenset()
    #: Text the applicability stages match against: the prompt, plus the working
    #: directory only when configured.
    context_text: str = ""
    #: Entries a stage routed aside for a renderer section (e.g. ``contested``).
    routed: Mapping[str, Sequence[MemoryEntry]] = field(factory=dict)


@frozen(slots=True)
class StageResult:
    survivors: list[MemoryEntry]
    dropped: dict[str, str] = field(factory=dict)
    #: Entries taken out of the main flow for a renderer section, by section name.
    routed: dict[str, list[MemoryEntry]] = field(factory=dict)


@frozen(slots=True)
class StageTrace:
    """What one stage did: counts in and out, why each dropped entry went, scores after."""

    name: str
    input_count: int
    output_count: int
    dropped: Mapping[str, str]
    scores: Mapping[str, float | None] = field(factory=dict)


Stage = Callable[[StageContext, Sequence[MemoryEntry]], StageResult]


def format_score(score: float) -> str:
    return f"{score:.4g}"


# -- the skip set (spec section 5, stage 5) -------------------------------------

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_WS = " \t\n\x0b\x0c\r"


def ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER) if not text.isascii() else text.lower()


def _rust_trim(text: str) -> str:
    # Rust's str::trim strips Unicode White_Space; Python's strip also strips
    # \x1c-\x1f, which are not White_Space. Keep those.
    stripped = text.strip()
    if stripped == text or not any(c in text for c in "\x1c\x1d\x1e\x1f"):
        return stripped
    start, end = 0, len(text)
    while start < end and text[start].isspace() and text[start] not in "\x1c\x1d\x1e\x1f":
        start += 1
    while end > start and text[end - 1].isspace() and text[end - 1] not in "\x1c\x1d\x1e\x1f":
        end -= 1
    return text[start:end]


def skip_reason(key: str, content: str) -> str | None:
    """The first skip rule an entry matches, as ``skip:<rule>``; None keeps it."""
    k = ascii_lower(_rust_trim(key))
    if k == "assistant_resp" or k.startswith("assistant_resp_"):
        return "skip:assistant_autosave"
    if k == "user_msg" or k.startswith("user_msg_"):
        return "skip:user_autosave"
    c = _rust_trim(content)
    if not c:
        return "skip:empty"
    low = ascii_lower(c)
    if (
        low.startswith(("[cron:", "[heartbeat task", "[distilled_", "[memory context]"))
        or "distilled_index_sig:" in low
    ):
        return "skip:autosave_content"
    if k.endswith("_history"):
        return "skip:history"
    if "[IMAGE:" in content:
        return "skip:image"
    if "<tool_result" in content:
        return "skip:tool_result"
    return None


def should_skip_entry(key: str, content: str) -> bool:
    return skip_reason(key, content) is not None


# -- stages ------------------------------------------------------------------------


def age_days(ts: datetime | None, now: datetime) -> float | None:
    """Whole seconds since ``ts`` (future -> 0) in days; None if unknown."""
    if ts is None:
        return None
    delta = now - ts
    seconds = delta.days * 86400 + delta.seconds  # floor == trunc for positive deltas
    return max(0, seconds) / 86400


def decay_factor(age: float, half_life_days: float) -> float:
    return math.exp(-age / half_life_days * _LN2)


def decay(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """Halve non-core scores every ``half_life_days``; core, unscored and undated stay."""
    half_life = ctx.config.decay.half_life_days
    if half_life <= 0:
        half_life = 7.0
    out: list[MemoryEntry] = []
    now = ctx.now
    for e in entries:
        if e.category == _CORE or e.score is None or e.timestamp is None:
            out.append(e)
            continue
        age = age_days(e.timestamp, now) or 0.0
        out.append(e.with_score(e.score * decay_factor(age, half_life)) if age else e)
    return StageResult(out)


def relevance_filter(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """Drop scored entries under the floor (``>=`` passes; unscored always pass)."""
    floor = ctx.config.min_relevance_score
    out: list[MemoryEntry] = []
    dropped: dict[str, str] = {}
    for e in entries:
        if e.score is not None and e.score < floor:
            dropped[e.key] = f"below_relevance:{format_score(e.score)}"
        else:
            out.append(e)
    return StageResult(out, dropped)


def conversation_exclusion(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """Drop ``conversation`` entries when the policy says so (custom categories stay)."""
    if not ctx.exclude_conversation:
        return StageResult(list(entries))
    out: list[MemoryEntry] = []
    dropped: dict[str, str] = {}
    for e in entries:
        if e.category == _CONVERSATION:
            dropped[e.key] = "conversation_excluded"
        else:
            out.append(e)
    return StageResult(out, dropped)


def skip_set(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """Drop autosaves, history blobs, image markers and tool results (spec stage 5)."""
    out: list[MemoryEntry] = []
    dropped: dict[str, str] = {}
    for e in entries:
        reason = skip_reason(e.key, e.content)
        if reason is None:
            out.append(e)
        else:
            dropped[e.key] = reason
    return StageResult(out, dropped)


def eligibility_reason(entry: MemoryEntry, exclude_conversation: bool) -> str | None:
    """Why the rerank arm must not give this entry a slot (None = eligible)."""
    if exclude_conversation and entry.category == _CONVERSATION:
        return "conversation_excluded"
    return skip_reason(entry.key, entry.content)
