"""The one seam every adapter calls: policy, then render, then (maybe) autosave.

An adapter maps its host's event to a :class:`Request` (origin, query,
session scopes, suppress, turn metadata) and hands it here. This module owns
no policy of its own either: :func:`~memory_inject.policy.resolve_inject_policy`
decides, :func:`~memory_inject.pipeline.render_memory_context` renders. What
it adds is the guarantee that an adapter never raises because of memory: a
render or an autosave that fails is logged and reported on the result.

Sync and async are twins over the pure :func:`decide` and :func:`_finish`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Iterable
from typing import Any

import attrs
from attrs import field, frozen

from memory_inject.config import AgentConfig, MemoryInjectConfig
from memory_inject.contract import Memory, SupportsAsyncWrite, SupportsWrite
from memory_inject.models import MemoryCategory, TurnMeta, TurnOrigin
from memory_inject.pipeline import RenderResult, arender_memory_context, render_memory_context
from memory_inject.policy import (
    AUTOSAVE_MIN_CHARS,
    AUTOSAVE_ORIGINS,
    InjectPolicy,
    has_session,
    resolve_inject_policy,
    should_autosave,
)
from memory_inject.profile import turn_profile
from memory_inject.sessions import arecord_session, decision_lines, project_name, record_session
from memory_inject.signals import MemoryRecall, MemorySkipped

__all__ = [
    "AUTOSAVE_MIN_CHARS",
    "AUTOSAVE_ORIGINS",
    "Injection",
    "Request",
    "aautosave",
    "arecord_turn",
    "arun",
    "autosave",
    "decide",
    "new_turn_id",
    "profile_fields",
    "record_turn",
    "run",
    "scopes",
    "should_autosave",
    "unreadable",
]

_log = logging.getLogger("memory_inject.adapters")
_NO_WRITE = "autosave_failed: the store has no store() method"


def new_turn_id() -> str:
    """A fresh random turn id (32 hex characters)."""
    return uuid.uuid4().hex


def scopes(sessions: Iterable[str | None]) -> tuple[str | None, ...]:
    """Session scopes as a tuple; a bare string is refused (it would be split into letters)."""
    if isinstance(sessions, str):
        raise TypeError(f"'sessions' must be a list of session ids (got {sessions!r})")
    return tuple(sessions)


@frozen(kw_only=True)
class Request:
    """What an entry point asks for one turn; adapters build one, nothing else does."""

    origin: TurnOrigin = field(converter=TurnOrigin)
    query: str
    sessions: tuple[str | None, ...] = field(default=(), converter=scopes)
    suppress: bool = False
    turn: TurnMeta = field(factory=TurnMeta)
    #: The calling plugin or agent id (founder-os ``P01``...): a recall plan's ``plugin`` query.
    source: str | None = None


@frozen(kw_only=True)
class Injection:
    """What one turn got: the policy, the render (None when skipped) and any autosave.

    ``block`` is ``""`` when the policy skipped, when nothing survived and when
    memory failed; ``event`` is the render's ``memory_recall`` payload (None
    when no render happened, so no event was sent). ``error`` reports a failure
    of the adapter's own calls (a render that raised, an autosave that failed);
    store errors during recall are on ``event.error`` with ``success=False``.
    """

    origin: TurnOrigin
    query: str
    sessions: tuple[str | None, ...]
    turn: TurnMeta
    policy: InjectPolicy
    result: RenderResult | None = None
    autosaved_key: str | None = None
    #: The key of the session row this turn updated (``memory.sessions.record``).
    session_key: str | None = None
    error: str | None = None

    @property
    def block(self) -> str:
        """The rendered block; ``""`` when skipped, empty or failed."""
        return self.result.text if self.result is not None else ""

    @property
    def event(self) -> MemoryRecall | None:
        """The render's ``memory_recall`` payload (None when skipped or not rendered)."""
        event = self.result.event if self.result is not None else None
        return event if isinstance(event, MemoryRecall) else None

    @property
    def skipped(self) -> MemorySkipped | None:
        """The ``memory_skipped`` payload when the policy skipped this turn."""
        event = self.result.event if self.result is not None else None
        return event if isinstance(event, MemorySkipped) else None

    @property
    def injected(self) -> bool:
        """True when a non-empty block was produced for this turn."""
        return bool(self.block)

    @property
    def prompt(self) -> str:
        """The block followed by the query: the model's input for turns whose query is it
        (cron, daemon, direct requests); a chat turn places the block with its own rules."""
        return self.block + self.query


def decide(config: AgentConfig, req: Request) -> InjectPolicy:
    """The core's policy for this request (``query`` feeds the trivial-prompt filter)."""
    return resolve_inject_policy(
        req.origin,
        has_session=has_session(req.sessions),
        suppress=req.suppress,
        config=config.memory,
        query=req.query,
    )


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except Exception:  # noqa: BLE001 - a message that raises must still name the fault
        return f"{type(exc).__name__} (its message raised when read)"


def _render_kwargs(
    req: Request, policy: InjectPolicy, cwd: str | os.PathLike[str] | None
) -> dict[str, Any]:
    return {
        "policy": policy,
        "sessions": req.sessions,
        "turn": req.turn,
        "cwd": cwd,
        "source": req.source,
    }


def _finish(
    req: Request, policy: InjectPolicy, result: RenderResult | None, error: str | None
) -> Injection:
    return Injection(
        origin=req.origin,
        query=req.query,
        sessions=req.sessions,
        turn=req.turn,
        policy=policy,
        result=result,
        error=error,
    )


def run(
    store: Memory | None,
    config: AgentConfig,
    req: Request,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> Injection:
    """Resolve the policy and hand it to the render (which announces skips too).

    Never raises because of memory. Without a store nothing is rendered (and
    an injecting policy reports ``render_failed: no store``).
    """
    policy = decide(config, req)
    if store is None:
        return _finish(req, policy, None, "render_failed: no store" if policy.inject else None)
    try:
        result = render_memory_context(store, req.query, **_render_kwargs(req, policy, cwd))
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        _log.exception("memory_inject: render failed for turn %s", req.turn.turn_id)
        return _finish(req, policy, None, f"render_failed: {_describe(exc)}")
    return _finish(req, policy, result, None)


async def arun(
    store: Memory | None,
    config: AgentConfig,
    req: Request,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> Injection:
    """The async twin of :func:`run`."""
    policy = decide(config, req)
    if store is None:
        return _finish(req, policy, None, "render_failed: no store" if policy.inject else None)
    try:
        result = await arender_memory_context(store, req.query, **_render_kwargs(req, policy, cwd))
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        _log.exception("memory_inject: render failed for turn %s", req.turn.turn_id)
        return _finish(req, policy, None, f"render_failed: {_describe(exc)}")
    return _finish(req, policy, result, None)


#: The ``memory_skipped`` reason of a turn whose messages could not be read.
UNREADABLE = "unreadable_message"


def unreadable(store: Memory, config: AgentConfig, req: Request, problem: str) -> Injection:
    """A turn whose messages cannot be read: nothing placed, one ``memory_skipped`` event.

    The reason is ``unreadable_message`` (or the policy's own reason when it
    skipped anyway) and ``error`` names the message, so a shape the adapter
    does not know is reported on the turn instead of raised. No store is touched.
    """
    return _skip_failed(store, config, req, UNREADABLE, f"{UNREADABLE}: {problem}")


#: The ``memory_skipped`` reason of a turn whose host callback (a ``sessions`` function,
#: an origin mapper) raised.
HOST_FAILED = "host_callback_failed"


def host_failed(
    store: Memory, config: AgentConfig, req: Request, what: str, exc: BaseException
) -> Injection:
    """A turn whose host callback ``what`` raised: no block, one ``memory_skipped`` event.

    The reason is ``host_callback_failed`` (or the policy's own reason when it
    skipped anyway) and ``error`` names the callback and its exception, so a
    host bug is reported on the turn, never raised into it and never answered
    with an earlier turn's block.
    """
    error = f"{HOST_FAILED}: {what} raised {_describe(exc)}"
    return _skip_failed(store, config, req, HOST_FAILED, error)


def _skip_failed(
    store: Memory, config: AgentConfig, req: Request, reason: str, error: str
) -> Injection:
    """The turn skipped with ``reason`` (``error`` as the event's ``detail``) unless its
    policy skipped it anyway; one ``memory_skipped`` event, no store call."""
    policy = decide(config, req)
    if policy.inject:
        policy = attrs.evolve(
            policy, inject=False, exclude_conversation=False, reason=reason, detail=error
        )
    try:
        result = render_memory_context(store, "", **_render_kwargs(req, policy, None))
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _finish(req, policy, None, f"{error}; render_failed: {_describe(exc)}")
    return _finish(req, policy, result, error)


# -- autosave ------------------------------------------------------------------


def profile_fields(
    cfg: MemoryInjectConfig, cwd: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """``{"profile_id": ...}`` when governance is enabled, else ``{}``.

    The id is the one the governance stages will compare against: the
    configured ``governance.profile_id``, else the profile of ``cwd``.
    """
    gov = cfg.governance
    if not gov.enabled:
        return {}
    return {"profile_id": turn_profile(gov.profile_id, cwd).profile_id}


def _autosave_args(
    policy: InjectPolicy, text: str, cwd: str | os.PathLike[str] | None
) -> dict[str, Any] | None:
    if policy.origin is None or not should_autosave(policy.origin, text):
        return None
    return profile_fields(policy.config, cwd)


@frozen
class Save:
    """An autosave asked for by an adapter: the key, the text and the session to store under."""

    key: str
    text: str
    session_id: str | None


def autosave(
    store: Memory, policy: InjectPolicy, save: Save, *, cwd: str | os.PathLike[str] | None = None
) -> tuple[str | None, str | None]:
    """Store ``save.text`` as a conversation memory if :func:`should_autosave` allows.

    ``policy`` is the turn's: its origin decides whether the message may be
    saved and its (origin-resolved) config which profile it is stamped with,
    the same profile the render used. Returns ``(key or None, error or None)``;
    a failing store is logged, never raised. Call it after the render, so the
    message cannot be recalled into its own block. A store without ``store``
    (:class:`~memory_inject.contract.SupportsWrite`) is an error.
    """
    try:
        fields = _autosave_args(policy, save.text, cwd)
        if fields is None:
            return None, None
        if not isinstance(store, SupportsWrite):
            return None, _NO_WRITE
        store.store(
            save.key, save.text, MemoryCategory.CONVERSATION, session_id=save.session_id, **fields
        )
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _autosave_failed(save, exc)
    return save.key, None


async def aautosave(
    store: Memory, policy: InjectPolicy, save: Save, *, cwd: str | os.PathLike[str] | None = None
) -> tuple[str | None, str | None]:
    """The async twin of :func:`autosave`: an ``astore`` is awaited, else it runs in a thread."""
    if not isinstance(store, SupportsAsyncWrite):
        return await asyncio.to_thread(autosave, store, policy, save, cwd=cwd)
    try:
        fields = _autosave_args(policy, save.text, cwd)
        if fields is None:
            return None, None
        await store.astore(
            save.key, save.text, MemoryCategory.CONVERSATION, session_id=save.session_id, **fields
        )
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _autosave_failed(save, exc)
    return save.key, None


def _autosave_failed(save: Save, exc: Exception) -> tuple[None, str]:
    _log.warning("memory_inject: autosave of %r failed", save.key, exc_info=exc)
    return None, f"autosave_failed: {_describe(exc)}"


# -- session records -------------------------------------------------------------

#: Skips after which the turn still belongs to its session (its row is still updated).
_SESSION_SKIPS = frozenset({None, "trivial_prompt"})


def _session_args(
    injection: Injection, tools: Iterable[str], cwd: str | os.PathLike[str] | None
) -> dict[str, Any] | None:
    """The writer's arguments for this turn, or None when it records nothing.

    Recorded: turns of a person (the autosave origins) that belong to a session
    scope and carry text, with ``sessions.record`` on in the turn's config.
    Sub-turns, suppressed turns and disabled origins are not.
    """
    policy = injection.policy
    cfg = policy.config.sessions
    session = next((s for s in injection.sessions if s is not None), None)
    if (
        not cfg.record
        or policy.origin not in AUTOSAVE_ORIGINS
        or policy.reason not in _SESSION_SKIPS
        or session is None
        or not injection.query.strip()
    ):
        return None
    return {
        "session_id": session,
        "project": cfg.project or project_name(cwd),
        "name": injection.query,
        "tools": tuple(tools),
        "decisions": decision_lines(injection.query),
        "profile_id": profile_fields(policy.config, cwd).get("profile_id"),
    }


def record_turn(
    store: Memory,
    injection: Injection,
    *,
    tools: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> Injection:
    """Upsert the turn's session row (:func:`memory_inject.sessions.record_session`) when
    the turn's config asks for it; ``tools`` are the tools the adapter saw called.

    Returns ``injection`` with ``session_key`` set, or with ``error``
    (``session_failed: ...``) when the write failed: logged, never raised.
    """
    try:
        args = _session_args(injection, tools, cwd)
        if args is None:
            return injection
        key = record_session(store, **args)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _session_failed(injection, exc)
    return attrs.evolve(injection, session_key=key)


async def arecord_turn(
    store: Memory,
    injection: Injection,
    *,
    tools: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
) -> Injection:
    """The async twin of :func:`record_turn`."""
    try:
        args = _session_args(injection, tools, cwd)
        if args is None:
            return injection
        key = await arecord_session(store, **args)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _session_failed(injection, exc)
    return attrs.evolve(injection, session_key=key)


def _session_failed(injection: Injection, exc: Exception) -> Injection:
    _log.warning(
        "memory_inject: session record of turn %s failed", injection.turn.turn_id, exc_info=exc
    )
    return attrs.evolve(injection, error=injection.error or f"session_failed: {_describe(exc)}")
