"""The spec's filter stages: session scope, decay, relevance floor, conversation, skip set.

Configurable stages are classes configured at construction (``Decay``,
``RelevanceFilter``); parameterless ones are functions. All are pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timezone

from attrs import frozen

from memory_inject._skip_keys import (
    HISTORY_SUFFIX,
    ascii_lower,
    autosave_key,
    rust_trim,
)
from memory_inject.models import STANDALONE_SOURCES, MemoryCategory, MemoryEntry, day_key
from memory_inject.sessions import SESSION_CATEGORY, SESSION_KEY_PREFIX
from memory_inject.stages._base import StageContext, StageResult, format_score
from memory_inject.stages.owners import owner_drops

__all__ = [
    "SHARED_CATEGORIES",
    "UNRELATED_PROMPT",
    "Decay",
    "PromptGate",
    "RelevanceFilter",
    "age_days",
    "conversation_exclusion",
    "decay_factor",
    "eligibility_reason",
    "session_scope",
    "should_skip_entry",
    "skip_reason",
    "skip_set",
    "unshared",
]

_LN2 = math.log(2.0)
_FIXED = (timezone, type(None))  # zones whose clock is the time (no summer time)
_CORE = MemoryCategory.CORE
_CONVERSATION = MemoryCategory.CONVERSATION


# -- the skip set (spec section 5, stage 5) -------------------------------------

_ASCII_WS = " \t\n\x0b\x0c\r"
_AUTOSAVE_PREFIXES = ("[cron:", "[heartbeat task", "[distilled_", "[memory context]")
_PREFIX_CHARS = max(map(len, _AUTOSAVE_PREFIXES))


def _ascii_caseless(text: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in text)


# ASCII-only case folding, as ascii_lower: searched in place, never copying the content
# (a lowered copy of a 10 MB memory cost about a second per render). It starts
# with a literal "_", which the regex engine finds with a fast scan, and checks
# the whole signature behind it: 4 ms for 10 MB of prose, where IGNORECASE
# tries every position (60 ms).
_DISTILLED_SIG = re.compile(
    f"_{_ascii_caseless('index_sig:')}(?<={_ascii_caseless('distilled_index_sig:')})"
)


def skip_reason(key: str, content: str) -> str | None:
    """The first skip rule an entry matches, as ``skip:<rule>``; None keeps it."""
    k = ascii_lower(rust_trim(key))
    if (autosave := autosave_key(k)) is not None:
        return autosave
    c = rust_trim(content)
    if not c:
        return "skip:empty"
    head = ascii_lower(c[:_PREFIX_CHARS])
    if head.startswith(_AUTOSAVE_PREFIXES) or _DISTILLED_SIG.search(c) is not None:
        return "skip:autosave_content"
    if k.endswith(HISTORY_SUFFIX):
        return "skip:history"
    if "[IMAGE:" in content:
        return "skip:image"
    if "<tool_result" in content:
        return "skip:tool_result"
    return None


def should_skip_entry(key: str, content: str) -> bool:
    """True when the entry matches a skip rule (see :func:`skip_reason`)."""
    return skip_reason(key, content) is not None


# -- stages ------------------------------------------------------------------------


def age_days(ts: datetime | None, now: datetime) -> float | None:
    """Whole seconds since ``ts`` (future -> 0) in days; None if unknown."""
    if ts is None:
        return None
    if ts.tzinfo is now.tzinfo and type(ts.tzinfo) not in _FIXED:  # one zone with summer time:
        ts, now = ts.astimezone(UTC), now.astimezone(UTC)  # its clocks differ from the time
    delta = now - ts
    seconds = delta.days * 86400 + delta.seconds  # floor == trunc for positive deltas
    return max(0, seconds) / 86400


def decay_factor(age: float, half_life_days: float) -> float:
    """``0.5 ** (age / half_life_days)``: 1 at age 0, halved every half-life (both in days)."""
    return math.exp(-age / half_life_days * _LN2)


@frozen(slots=True)
class Decay:
    """Halve non-core scores every ``half_life_days``; core, unscored and undated stay."""

    half_life_days: float = 7.0

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        half_life = self.half_life_days if self.half_life_days > 0 else 7.0
        out: list[MemoryEntry] = []
        now = ctx.now
        for e in entries:
            if e.category == _CORE or e.score is None or e.timestamp is None:
                out.append(e)
                continue
            age = age_days(e.timestamp, now) or 0.0
            out.append(e.with_score(e.score * decay_factor(age, half_life)) if age else e)
        return StageResult(out)


@frozen(slots=True)
class RelevanceFilter:
    """Drop scored entries under ``floor`` (``>=`` passes; unscored always pass).

    With ``companion``, a conversation's evidence is spread over its turns: once
    a turn of a session reaches ``floor``, the other turns of that session and day
    (:func:`conversation_of`) need only ``companion`` (at or above ``floor`` it
    changes nothing). Whether a turn gets memory is still the floor's call, and
    rows without a session and facts stored on purpose (``remember()``, the memory
    tools) always need the floor: each answers a question alone or not at all. On
    LoCoMo dev the default block holds 0.659 of a question's evidence instead of
    0.629, with the same off-topic and near-miss injections, and the facts sets'
    blocks are unchanged (``benchmarks/relevance.py``, ``benchmarks/facts.py``).

    A question about someone's thing ("when is raj's birthday?") drops the facts stored
    on purpose that are about someone else (:func:`.owners.owner_drops`).
    """

    floor: float
    companion: float | None = None

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        floor = low = self.floor
        talks: list[tuple[object, str] | None] = []
        strong: set[tuple[object, str]] = set()  # conversations with a turn at the floor
        if self.companion is not None and self.companion < floor:
            low, talks = self.companion, [conversation_of(e) for e in entries]
            for talk, e in zip(talks, entries, strict=True):
                if talk is not None and e.score is not None and e.score >= floor:
                    strong.add(talk)
        out: list[MemoryEntry] = []
        dropped: dict[str, str] = {}
        for i, e in enumerate(entries):
            if e.score is None or e.score >= floor:
                out.append(e)
            elif strong and e.score >= low and talks[i] in strong:
                out.append(e)  # a turn of a conversation that matched at the floor
            else:
                dropped[e.key] = f"below_relevance:{format_score(e.score)}"
        # A question about someone's thing: facts about someone else are no answer.
        if out and (others := owner_drops(ctx.query, entries, out)):
            out = [e for e in out if e.key not in others]
            dropped.update(others)
        return StageResult(out, dropped)


def conversation_of(entry: MemoryEntry) -> tuple[object, str] | None:
    """The conversation a turn belongs to: its session and day (``models.day_key``);
    None for a row without a session or a fact stored on purpose (``remember()``, the
    memory tools: ``models.STANDALONE_SOURCES``), which :class:`RelevanceFilter`'s
    companion score never applies to."""
    if entry.session_id is None or entry.extra.get("source") in STANDALONE_SOURCES:
        return None
    return day_key(entry.session_id, entry.timestamp)


#: The drop reason (and the recall event's ``abstained``) of :class:`PromptGate`.
UNRELATED_PROMPT = "unrelated_prompt"


@frozen(slots=True)
class PromptGate:
    """Drop every scored entry when the prompt is unrelated to what the store holds.

    ``ctx.similarity`` is the calibrated vector score of the row nearest the
    prompt among those the recall searched (the store's embedder says how
    close the closest memory is, whatever the keywords matched). Under
    ``threshold`` the prompt is about nothing the store holds: each scored
    entry goes as ``unrelated_prompt:<similarity>``. Unscored entries (standing,
    tagged) stay, as under the relevance floor; with no similarity told (no
    embedder, a failed one, a store that does not say) the gate passes all.
    With ``bypass``, a turn whose best entry scores at least that passes too:
    a match that strong is trusted whatever the embedder says.
    """

    threshold: float
    bypass: float | None = None

    def __call__(self, ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
        similarity, bypass = ctx.similarity, self.bypass
        if similarity is None or similarity >= self.threshold:
            return StageResult(list(entries))
        if bypass is not None and any(e.score is not None and e.score >= bypass for e in entries):
            return StageResult(list(entries))
        why = f"{UNRELATED_PROMPT}:{format_score(similarity)}"
        out = [e for e in entries if e.score is None]
        return StageResult(out, {e.key: why for e in entries if e.score is not None})


#: The categories a sessionless row may have and still reach a session turn: the
#: stores' default ``shared_categories`` (agent-wide facts).
SHARED_CATEGORIES = frozenset({MemoryCategory.CORE, MemoryCategory.DAILY})
#: With the sectioned block, also what its standing read shows of no session to every
#: turn (``memory_inject.standing``): scratchpad items and open questions. ``[s, None]``
#: dropped them where ``[s]`` showed them (round 36).
_STANDING_SHARED = SHARED_CATEGORIES | {"scratchpad", "inquiry"}


def session_scope(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """The scope rule of docs/storage.md, enforced here and nowhere else.

    A turn that names no session (``[]``, ``[None]``) keeps everything but a
    row whose session id is not a string (``invalid_session_id``, a store
    fault); a scheduled one (``ctx.shared_only``) keeps only the rows bound to no
    session (``foreign_session``: the recall step already withheld them and asked
    again, this catches any other path). A turn that names one sees only what a
    recall scoped to its sessions may return:

    * a row bound to another session is dropped (``foreign_session``), and so
      is a row whose session id is not a string (``invalid_session_id``);
    * in a mixed list (``[s, None]``, ``[None, s]``) the ``None`` recall is
      unfiltered, so a sessionless row must also be of a shared category
      (``core``, ``daily``); any other is dropped (``sessionless_unshared``).
      Without a ``None`` the store's own session filter already decided.
    """
    own = {s for s in ctx.sessions if s is not None}
    if not own:
        # A row whose session id is not a string is a store fault, named in every turn.
        if all(e.session_id is None for e in entries) or (
            not ctx.shared_only and all(isinstance(e.session_id, str | None) for e in entries)
        ):
            return StageResult(entries if isinstance(entries, list) else list(entries))
        kept: list[MemoryEntry] = []
        bad: dict[str, str] = {}
        for e in entries:
            why = unshared(e, ctx.shared_only)
            if why is None:
                kept.append(e)
            else:
                bad[e.key] = why
        return StageResult(kept, bad)
    mixed = None in ctx.sessions
    shared = _STANDING_SHARED if ctx.config.renderer.kind == "sectioned" else SHARED_CATEGORIES
    out: list[MemoryEntry] = []
    dropped: dict[str, str] = {}
    for e in entries:
        why = out_of_scope(e, own, mixed, ctx.profile_id, shared=shared)
        if why is None:
            out.append(e)
        else:
            dropped[e.key] = why
    return StageResult(out, dropped)


def unshared(entry: MemoryEntry, shared_only: bool) -> str | None:
    """Why a turn that names no session drops ``entry`` (``shared_only``: a scheduled
    turn, which sees the rows bound to no session), or None when it stays."""
    sid = entry.session_id
    if sid is None:
        return None
    if not isinstance(sid, str):
        return "invalid_session_id"
    return "foreign_session" if shared_only else None


def out_of_scope(
    entry: MemoryEntry,
    own: set[str] | frozenset[str],
    mixed: bool,
    profile: str | None = None,
    *,
    any_profile: bool = False,
    shared: frozenset[str] = SHARED_CATEGORIES,
) -> str | None:
    """Why :func:`session_scope` drops ``entry`` for a turn of the sessions ``own`` (not
    empty; ``mixed``: the turn names ``None`` too) and the profile ``profile`` (a governed
    turn's; None: the turn has none), or None when it stays. ``any_profile``: a session
    record bound to any profile stays (the recall's first pass, which knows no profile;
    the stage decides). ``shared``: the categories a mixed list keeps sessionless."""
    sid = entry.session_id
    if sid is None:
        return "sessionless_unshared" if mixed and entry.category not in shared else None
    if not isinstance(sid, str):
        return "invalid_session_id"
    if sid in own or _profile_session(entry, sid, profile, any_profile):
        return None
    return "foreign_session"


def _profile_session(entry: MemoryEntry, sid: str, profile: str | None, any_profile: bool) -> bool:
    """A session record bound to the turn's profile: PI's Today's Sessions shows the
    profile's sessions of the day, the others included (docs/adapters.md, "Who sees it").
    Another profile's record, or any record in a turn without a profile (not governed),
    is another session's: until round 36 any profile-bound record passed here, and an
    ungoverned turn, which has no profile rule after this one, showed it to everyone."""
    if entry.category != SESSION_CATEGORY or entry.key != SESSION_KEY_PREFIX + sid:
        return False
    bound = entry.extra.get("profile_id")
    return isinstance(bound, str) and (any_profile or bound == profile)


def is_chat_memory(entry: MemoryEntry) -> bool:
    """True for what people said in a chat: ``conversation`` rows and session records
    (``memory_inject.sessions``: the chat's first message and its decisions, word for word)."""
    return entry.category == _CONVERSATION or (
        entry.category == SESSION_CATEGORY
        and isinstance(entry.key, str)
        and entry.key.startswith(SESSION_KEY_PREFIX)
    )


def conversation_exclusion(ctx: StageContext, entries: Sequence[MemoryEntry]) -> StageResult:
    """Drop chat memory (``conversation`` entries and session records) when the policy says
    so (other custom categories stay)."""
    if not ctx.exclude_conversation:
        return StageResult(list(entries))
    out: list[MemoryEntry] = []
    dropped: dict[str, str] = {}
    for e in entries:
        if is_chat_memory(e):
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
    if exclude_conversation and is_chat_memory(entry):
        return "conversation_excluded"
    return skip_reason(entry.key, entry.content)
