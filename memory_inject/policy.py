"""Should this turn get memory at all? One decision, keyed on who started the turn.

Pure: no I/O, no logging, no signals. The table (spec section 3):

=============================  ===========  ========  =================================
origin                         has_session  suppress  result
=============================  ===========  ========  =================================
any                            any          true      skip (``suppressed``)
sub_turn                       any          false     skip (``sub_turn``)
(origin disabled in config)    any          false     skip (``origin_disabled``)
cron / daemon                  any          false     inject, exclude conversation
interactive/channel/agent_dir  true         false     inject
interactive/channel/agent_dir  false        false     inject, exclude conversation
=============================  ===========  ========  =================================
"""

from __future__ import annotations

from attrs import frozen

from memory_inject.config import MemoryInjectConfig
from memory_inject.models import TurnOrigin
from memory_inject.trivial import DEFAULT_ACKNOWLEDGEMENTS, is_trivial_prompt

__all__ = [
    "AUTOSAVE_MIN_CHARS",
    "AUTOSAVE_ORIGINS",
    "SKIP_REASONS",
    "InjectPolicy",
    "resolve_inject_policy",
    "should_autosave",
]

#: Every reason :func:`resolve_inject_policy` can give for a skip.
SKIP_REASONS = ("suppressed", "sub_turn", "origin_disabled", "trivial_prompt")


@frozen(slots=True)
class InjectPolicy:
    """The decision for one turn. ``reason`` is set exactly when ``inject`` is false."""

    inject: bool
    exclude_conversation: bool = False
    reason: str | None = None


_SKIP = {r: InjectPolicy(inject=False, reason=r) for r in SKIP_REASONS}
_INJECT = InjectPolicy(inject=True, exclude_conversation=False)
_INJECT_EXCLUDING = InjectPolicy(inject=True, exclude_conversation=True)
_SCHEDULED = frozenset({TurnOrigin.CRON, TurnOrigin.DAEMON})


def resolve_inject_policy(
    origin: TurnOrigin | str,
    *,
    has_session: bool,
    suppress: bool = False,
    config: MemoryInjectConfig | None = None,
    query: str | None = None,
) -> InjectPolicy:
    """Map who started the turn (and the agent's config) to inject-or-skip.

    ``suppress`` is the spawn-site opt-out and wins over everything. With
    ``query`` given and ``trivial_prompt.enabled`` in the config, prompts such
    as "ok" or "/clear" skip with reason ``trivial_prompt``. Scheduled
    origins never see conversation memory; sessionless turns do not either,
    since without a session filter they would pull other chats' conversations.
    """
    origin = TurnOrigin(origin)
    if suppress:
        return _SKIP["suppressed"]
    if origin is TurnOrigin.SUB_TURN:
        return _SKIP["sub_turn"]
    if config is not None:
        if not config.is_enabled_for(origin):
            return _SKIP["origin_disabled"]
        if query is not None and _is_trivial(config, origin, query):
            return _SKIP["trivial_prompt"]
    if origin in _SCHEDULED or not has_session:
        return _INJECT_EXCLUDING
    return _INJECT


def _is_trivial(config: MemoryInjectConfig, origin: TurnOrigin, query: str) -> bool:
    tp = (config.for_origin(origin) if config.origins else config).trivial_prompt
    if not tp.enabled:
        return False
    acks = DEFAULT_ACKNOWLEDGEMENTS if tp.acknowledgements is None else tp.acknowledgements
    return is_trivial_prompt(
        query, min_chars=tp.min_chars, acknowledgements=acks, slash_commands=tp.slash_commands
    )


#: Origins whose user messages may be autosaved (zeroclaw's ``should_autosave_origin``).
AUTOSAVE_ORIGINS = frozenset({TurnOrigin.INTERACTIVE, TurnOrigin.CHANNEL, TurnOrigin.AGENT_DIRECT})
#: Shorter user messages are not worth remembering (zeroclaw's ``AUTOSAVE_MIN_MESSAGE_CHARS``).
AUTOSAVE_MIN_CHARS = 20


def should_autosave(origin: TurnOrigin | str, text: str) -> bool:
    """Interactive, channel and agent_direct messages of 20+ characters, never a block.

    Scheduled and nested turns never autosave (their "user message" is a job
    prompt, not a person); a text that starts with ``[Memory context]`` is a
    recall blob, and saving it is how zeroclaw's store snowballed (issue 4916).
    """
    return (
        TurnOrigin(origin) in AUTOSAVE_ORIGINS
        and len(text.strip()) >= AUTOSAVE_MIN_CHARS
        and not text.startswith("[Memory context]")
    )


def has_session(sessions: object) -> bool:
    """True if at least one scope is not None (an empty list or ``[None]`` is sessionless)."""
    return any(s is not None for s in sessions)  # type: ignore[attr-defined]
