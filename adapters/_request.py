"""The values of the adapters' seam: a :class:`TurnInput` in, an :class:`Injection` out.

An adapter builds the core's :class:`~memory_inject.TurnInput` for one turn
(origin, query, session scopes, suppress, turn metadata, source) and
:mod:`._core` passes it through to :func:`~memory_inject.pipeline.render_turn`
unchanged. This module owns the injection it gets back (policy, render,
autosave and session-row results, error), and the small helpers every
adapter uses (:func:`new_turn_id`, :func:`scopes`, :func:`describe`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from attrs import frozen

from memory_inject._turn import session_scopes
from memory_inject.models import TurnMeta, TurnOrigin
from memory_inject.pipeline import RenderResult, TurnInput
from memory_inject.policy import InjectPolicy
from memory_inject.signals import MemoryRecall, MemorySkipped

__all__ = ["Injection", "TurnInput", "describe", "new_turn_id", "scopes"]


def new_turn_id() -> str:
    """A fresh random turn id (32 hex characters)."""
    return uuid.uuid4().hex


def scopes(sessions: Iterable[str | None]) -> tuple[str | None, ...]:
    """Session scopes as a tuple, checked as a turn checks them
    (:func:`memory_inject._turn.session_scopes`): a bare string or bytes is refused (it
    would be split into letters), and so is an item that is not a str or None.

    An adapter checks fixed sessions when it is built: ``sessions=[42]`` (a user id from
    a database) was taken, and then every turn went out without memory and without an
    event (round 35's attack). ``None`` is refused too, as before: a sessions function
    that finds no user and returns None must not make an unscoped turn that sees every
    session's rows; ``[]`` says "no session" on purpose."""
    if sessions is None:
        raise TypeError(
            "'sessions' must be a list of session ids (got None); [] is a turn with no session"
        )
    return session_scopes(sessions)


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


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception for a turn's ``error``; never raises itself."""
    try:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except Exception:  # noqa: BLE001 - a message that raises must still name the fault
        return f"{type(exc).__name__} (its message raised when read)"
