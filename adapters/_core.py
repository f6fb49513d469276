"""The one seam every adapter calls: policy, then render, then (maybe) autosave.

An adapter maps its host's event to a :class:`~memory_inject.TurnInput`
(origin, query, session scopes, suppress, turn metadata, source) and hands it
here; it reaches :func:`~memory_inject.pipeline.render_turn` as it is. This
module owns no policy of its own either:
:func:`~memory_inject.policy.resolve_inject_policy` decides, the render renders. What
it adds is the guarantee that an adapter never raises because of memory: a
render or an autosave that fails is logged and reported on the result.

Sync and async are twins over the pure :func:`decide` and :func:`_finish`.
The injection value is in :mod:`._request`, the autosave and
the session row in :mod:`._autosave`; this module re-exports them, so
adapters call one seam.
"""

from __future__ import annotations

import logging
import os

import attrs

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin
from memory_inject.pipeline import RenderResult, arender_turn, render_turn
from memory_inject.policy import (
    AUTOSAVE_MIN_CHARS,
    AUTOSAVE_ORIGINS,
    InjectPolicy,
    has_session,
    resolve_inject_policy,
    should_autosave,
)

from ._autosave import Save, aautosave, arecord_turn, autosave, profile_fields, record_turn
from ._request import Injection, TurnInput, describe, new_turn_id, scopes

__all__ = [
    "AUTOSAVE_MIN_CHARS",
    "AUTOSAVE_ORIGINS",
    "Injection",
    "Save",
    "TurnInput",
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


def _origin(req: TurnInput) -> TurnOrigin:
    """The request's origin; every adapter sets one (None is a direct call's, not an adapter's)."""
    if req.origin is None:
        raise TypeError("an adapter's TurnInput needs an 'origin'")
    return req.origin


def decide(config: AgentConfig, req: TurnInput) -> InjectPolicy:
    """The core's policy for this request (``query`` feeds the trivial-prompt filter)."""
    return resolve_inject_policy(
        _origin(req),
        has_session=has_session(req.sessions),
        suppress=req.suppress,
        config=config.memory,
        query=req.query,
    )


def _finish(
    req: TurnInput, policy: InjectPolicy, result: RenderResult | None, error: str | None
) -> Injection:
    return Injection(
        origin=_origin(req),
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
    req: TurnInput,
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
        result = render_turn(store, req, policy=policy, cwd=cwd)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        _log.exception("memory_inject: render failed for turn %s", req.turn.turn_id)
        return _finish(req, policy, None, f"render_failed: {describe(exc)}")
    return _finish(req, policy, result, None)


async def arun(
    store: Memory | None,
    config: AgentConfig,
    req: TurnInput,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> Injection:
    """The async twin of :func:`run`."""
    policy = decide(config, req)
    if store is None:
        return _finish(req, policy, None, "render_failed: no store" if policy.inject else None)
    try:
        result = await arender_turn(store, req, policy=policy, cwd=cwd)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        _log.exception("memory_inject: render failed for turn %s", req.turn.turn_id)
        return _finish(req, policy, None, f"render_failed: {describe(exc)}")
    return _finish(req, policy, result, None)


#: The ``memory_skipped`` reason of a turn whose messages could not be read.
UNREADABLE = "unreadable_message"


def unreadable(store: Memory, config: AgentConfig, req: TurnInput, problem: str) -> Injection:
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
    store: Memory, config: AgentConfig, req: TurnInput, what: str, exc: BaseException
) -> Injection:
    """A turn whose host callback ``what`` raised: no block, one ``memory_skipped`` event.

    The reason is ``host_callback_failed`` (or the policy's own reason when it
    skipped anyway) and ``error`` names the callback and its exception, so a
    host bug is reported on the turn, never raised into it and never answered
    with an earlier turn's block.
    """
    error = f"{HOST_FAILED}: {what} raised {describe(exc)}"
    return _skip_failed(store, config, req, HOST_FAILED, error)


def _skip_failed(
    store: Memory, config: AgentConfig, req: TurnInput, reason: str, error: str
) -> Injection:
    """The turn skipped with ``reason`` (``error`` as the event's ``detail``) unless its
    policy skipped it anyway; one ``memory_skipped`` event, no store call."""
    policy = decide(config, req)
    if policy.inject:
        policy = attrs.evolve(
            policy, inject=False, exclude_conversation=False, reason=reason, detail=error
        )
    try:
        result = render_turn(store, attrs.evolve(req, query=""), policy=policy)
    except Exception as exc:  # noqa: BLE001 - memory never fails the turn
        return _finish(req, policy, None, f"{error}; render_failed: {describe(exc)}")
    return _finish(req, policy, result, error)
