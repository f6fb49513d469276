"""Should this turn get memory at all? One decision, keyed on who started the turn.

Pure: no I/O, no logging, no signals. The table (spec section 3):

=============================  ===========  ========  =================================
origin                         has_session  suppress  result
=============================  ===========  ========  =================================
any                            any          true      skip (``suppressed``)
sub_turn                       any          false     skip (``sub_turn``)
(origin disabled in config)    any          false     skip (``origin_disabled``)
cron / daemon                  any          false     inject, exclude conversation,
                                                      shared rows only when sessionless
interactive/channel/agent_dir  true         false     inject
interactive/channel/agent_dir  false        false     inject, exclude conversation
=============================  ===========  ========  =================================
"""

from __future__ import annotations

import re
from typing import Any

from attrs import field, frozen

from memory_inject._cache import PerObject
from memory_inject.config import MemoryInjectConfig
from memory_inject.models import TurnOrigin
from memory_inject.trivial import DEFAULT_ACKNOWLEDGEMENTS, is_trivial_prompt

__all__ = [
    "AUTOSAVE_MIN_CHARS",
    "AUTOSAVE_ORIGINS",
    "DEFAULT_CONFIG",
    "SKIP_REASONS",
    "InjectPolicy",
    "direct_policy",
    "has_session",
    "resolve_inject_policy",
    "should_autosave",
    "skips_as_trivial",
]

#: The configuration a render uses when it is given none (zeroclaw's defaults).
DEFAULT_CONFIG = MemoryInjectConfig()

#: Every reason :func:`resolve_inject_policy` can give for a skip.
SKIP_REASONS = ("suppressed", "sub_turn", "origin_disabled", "trivial_prompt")


@frozen(slots=True)
class InjectPolicy:
    """The decision for one turn, carried whole from the policy to the pipeline.

    ``reason`` is set exactly when ``inject`` is false. ``origin`` is who
    started the turn and ``config`` the agent's config with that origin's
    overrides already applied: the pipeline renders with exactly this config,
    so nothing downstream resolves the origin again. Two policies are equal
    when they decide the same (``inject``, ``exclude_conversation``, ``reason``).
    """

    inject: bool
    exclude_conversation: bool = False
    reason: str | None = None
    origin: TurnOrigin | None = field(default=None, eq=False)
    config: MemoryInjectConfig = field(default=DEFAULT_CONFIG, eq=False, repr=False)
    #: What went wrong, when a skip reports a failure (an adapter's unreadable message, a
    #: host callback that raised); carried to ``MemorySkipped.detail``.
    detail: str | None = field(default=None, eq=False)

    @property
    def shared_only(self) -> bool:
        """True for a scheduled turn (cron, daemon): without a session of its own it sees
        only the shared rows, none bound to a session (a fact stored in someone's private
        chat is not a job's to post). Derived from ``origin``, so it takes no part in
        equality."""
        return self.inject and self.origin in _SCHEDULED


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
    The returned policy carries ``origin`` and the origin's resolved config.
    """
    origin = TurnOrigin(origin)
    if config is not None and not isinstance(config, MemoryInjectConfig):
        hint = " (pass agent.memory)" if hasattr(config, "memory") else ""
        raise TypeError(
            f"resolve_inject_policy: 'config' must be a MemoryInjectConfig{hint} "
            f"(got {type(config).__name__})"
        )
    if not isinstance(has_session, bool):  # [None] or "false" read as True: other chats' rows
        got = type(has_session).__name__
        raise TypeError(f"resolve_inject_policy: 'has_session' must be a bool (got {got})")
    base = config if config is not None else DEFAULT_CONFIG
    if suppress:
        return _decided(base, origin, False, False, "suppressed")
    if origin is TurnOrigin.SUB_TURN:
        return _decided(base, origin, False, False, "sub_turn")
    if config is not None:  # the defaults enable every origin and no trivial filter
        if not base.is_enabled_for(origin):
            return _decided(base, origin, False, False, "origin_disabled")
        if query is not None and _is_trivial(_origin_config(base, origin), query):
            return _decided(base, origin, False, False, "trivial_prompt")
    return _decided(base, origin, True, origin in _SCHEDULED or not has_session, None)


def _origin_config(base: MemoryInjectConfig, origin: TurnOrigin) -> MemoryInjectConfig:
    return base.for_origin(origin) if base.origins else base


# Policies are values: one instance per (config, origin, decision), built on first use.
_BY_CONFIG: PerObject[MemoryInjectConfig, dict[tuple[Any, ...], InjectPolicy]] = PerObject(
    lambda _cfg: {}
)


def _decided(
    base: MemoryInjectConfig,
    origin: TurnOrigin,
    inject: bool,
    exclude: bool,
    reason: str | None,
) -> InjectPolicy:
    known = _BY_CONFIG(base)
    key = (origin, inject, exclude, reason)
    hit = known.get(key)
    if hit is None:
        hit = known[key] = InjectPolicy(
            inject, exclude, reason, origin, _origin_config(base, origin)
        )
    return hit


def direct_policy(
    config: MemoryInjectConfig | None = None, *, exclude_conversation: bool = False
) -> InjectPolicy:
    """Inject with ``config`` as given: a render called without an origin (tools, tests)."""
    cfg = config if config is not None else DEFAULT_CONFIG
    if exclude_conversation:
        return InjectPolicy(True, True, None, None, cfg)
    return _direct(cfg)


#: The common direct policy (conversation kept), one per config object.
_direct: PerObject[MemoryInjectConfig, InjectPolicy] = PerObject(
    lambda cfg: InjectPolicy(True, False, None, None, cfg)
)


def skips_as_trivial(config: MemoryInjectConfig, query: str) -> bool:
    """Whether ``config``'s ``trivial_prompt`` filter skips ``query`` (off by default)."""
    return _is_trivial(config, query)


def _is_trivial(config: MemoryInjectConfig, query: str) -> bool:
    tp = config.trivial_prompt
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

    A character of Chinese, Japanese or Korean (Han, kana, Hangul) counts as two, as a
    terminal shows it: "我女儿叫小丽，她在上小学" (12 characters,
    "my daughter is called Xiaoli, she is in primary school") says as much as an
    English sentence of 20. Scheduled and nested turns never autosave (their "user
    message" is a job prompt, not a person); a text that starts with
    ``[Memory context]`` is a recall blob, and saving it is how zeroclaw's store
    snowballed (issue 4916).
    """
    stripped = text.strip()
    return (
        TurnOrigin(origin) in AUTOSAVE_ORIGINS
        and _width(stripped) >= AUTOSAVE_MIN_CHARS
        and not stripped.startswith("[Memory context]")
    )


#: The characters that write a word in one (Han, kana, Hangul): counted twice. Not every
#: East Asian wide character: an emoji or a full-width Latin letter says no more than one.
_DENSE = re.compile(
    "[\u1100-\u115f\u3001-\u303f\u3041-\u30ff\u3131-\u318e\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7a3\uf900-\ufaff\U00020000-\U0003fffd]"
)


def _width(text: str) -> int:
    """The characters of ``text``, one of :data:`_DENSE` counted twice."""
    if len(text) >= AUTOSAVE_MIN_CHARS or text.isascii():
        return len(text)
    return len(text) + len(_DENSE.findall(text))


def has_session(sessions: object) -> bool:
    """True if at least one scope is not None (an empty list or ``[None]`` is sessionless)."""
    return any(s is not None for s in sessions)  # type: ignore[attr-defined]
