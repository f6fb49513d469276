"""The turn marks: which wrapped turn the running code is in, and whether it still runs.

This module owns the context variable that marks "inside a wrapped turn"
(:data:`CURRENT`), the mark itself (:class:`LoopTurn`), and the test that a
mark left open across calls is still live (:func:`_running`: the code that
opened it has not returned). :class:`~.loop.MemoryLoop` and the client
wrappers (:mod:`._client`) open and close marks, and the entry adapters
(channel, cron, daemon, agent_direct: :meth:`~._base.Adapter._serve_turn`)
mark each turn while it renders; :func:`current_turn` is public from :mod:`.loop`.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from attrs import define, field

from memory_inject.models import TurnMeta, TurnOrigin

from . import _core

if TYPE_CHECKING:
    from ._base import Adapter

__all__ = [
    "CURRENT",
    "LoopTurn",
    "active_turn",
    "current_turn",
    "serving",
    "stream_host",
    "unmark",
    "where_running",
]


@define
class LoopTurn:
    """One wrapped turn. ``injection`` is filled by the turn's first ``prepare``."""

    origin: TurnOrigin
    sessions: tuple[str | None, ...]
    suppress: bool
    turn_id: str
    #: The adapter whose turn it is (a loop's own ``prepare`` continues only its own turn).
    owner: Adapter = field(repr=False, eq=False)
    nested: bool = False
    injection: _core.Injection | None = None
    #: The raw text of the turn's user message, set by its first ``prepare``.
    user_text: str | None = field(default=None, repr=False, eq=False)
    #: The tools recorded on the turn's session row so far (``memory.sessions.record``).
    tools: tuple[str, ...] = field(default=(), repr=False, eq=False)
    #: True once the turn ended: every copy of the context sees it closed.
    closed: bool = field(default=False, eq=False)
    #: Set while the turn's first async render runs: a concurrent ``aprepare`` of the same
    #: turn (``asyncio.gather`` of two model calls) waits for it instead of rendering again.
    rendering: asyncio.Future[None] | None = field(default=None, repr=False, eq=False)
    #: Set while the turn renders: a ``prepare`` of the same turn from inside that render
    #: (a receiver of its event) places no block and renders nothing.
    serving: bool = field(default=False, repr=False, eq=False)
    # Where a turn left open across calls runs (the client wrappers): the frame of the
    # host's code that opened it, its thread and its asyncio task.
    _frame: FrameType | None = field(default=None, repr=False, eq=False, alias="frame")
    _thread: int | None = field(default=None, repr=False, eq=False, alias="thread")
    _task: asyncio.Task[Any] | None = field(default=None, repr=False, eq=False, alias="task")
    # The instruction of ``_frame`` that made the call (its ``f_lasti`` then).
    _site: int | None = field(default=None, repr=False, eq=False, alias="site")
    # ``_frame`` is a generator whose body opened the turn (:meth:`hold`).
    _stream: bool = field(default=False, repr=False, eq=False, alias="stream")

    def input(self, query: str, meta: TurnMeta) -> _core.TurnInput:
        """What a render of this turn for ``query`` is asked (``meta``: the turn's ids)."""
        return _core.TurnInput(
            origin=self.origin,
            query=query,
            sessions=self.sessions,
            suppress=self.suppress,
            turn=meta,
        )

    @property
    def block(self) -> str:
        """The block this turn got (``""`` before ``prepare`` and when none)."""
        return self.injection.block if self.injection is not None else ""

    @property
    def live(self) -> bool:
        """Open, and (for a turn left open across calls) its code is still running."""
        if self.closed:
            return False
        if self._frame is None or (self._stream and where_running() != (self._thread, self._task)):
            return True
        return _running(self._frame, self._thread, self._task)

    def hold(self, generator: FrameType | None) -> None:
        """Opened by ``loop.turn()`` in the body of ``generator`` (a streaming endpoint): where
        it was opened (this thread and task) the turn counts only while a step of the
        generator runs, so one the consumer left with ``break`` and never closed leaves
        nothing behind; a task or thread a step started sees it until it closes. None: no-op."""
        if generator is None:
            return
        self._frame, self._stream = generator, True
        self._thread, self._task = where_running()

    def called_again_from(self, caller: FrameType) -> bool:
        """True when ``caller`` is the frame that opened this turn, at the same call: the
        host's code went round its loop (a worker serving the next request) and left the
        turn, whose tool call it returned to its user."""
        return self._frame is caller and self._site == caller.f_lasti

    def left_at(self, frame: FrameType | None) -> bool:
        """True when ``frame`` is the host frame that opened this turn across calls (a
        wrapped client's tool loop that stopped on a tool call): code running in that very
        frame again, not deeper, is the host's loop come round, outside the turn."""
        return frame is not None and self._frame is frame and not self._stream

    def close(self) -> None:
        """End the turn: no copy of the context counts as inside it any more."""
        self.closed = True
        self._frame = self._task = None


def _running(frame: FrameType, thread: int | None, task: asyncio.Task[Any] | None) -> bool:
    """True while ``frame`` has not returned: it is on this thread's stack, on the stack of
    ``thread`` (a parent waiting for a worker), or in the await chain of ``task`` (a parent
    task waiting for a child task or ``to_thread``). A frame that returned is never on a
    stack again, and the turn holds it, so no new frame can take its identity."""
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    if task is not None and not task.done():
        awaited: Any = task.get_coro()
        for _ in range(256):  # an await chain, never a cycle; bounded all the same
            if awaited is None:
                break
            if getattr(awaited, "cr_frame", None) is frame:
                return True
            awaited = getattr(awaited, "cr_await", None)
    if thread is not None and thread != threading.get_ident():
        f = sys._current_frames().get(thread)
        while f is not None:
            if f is frame:
                return True
            f = f.f_back
    return False


def stream_host() -> FrameType | None:
    """The generator (sync or async) whose body called ``loop.turn()`` / ``aturn()``, or None:
    a function, a coroutine, this package's own code, or a generator that ``contextlib``
    drives (a ``@contextmanager`` around the turn: its ``with`` body runs while it waits)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and _module(f) in ("contextlib", _LOOP):
        f = f.f_back
    if f is None or _module(f).startswith(__package__ + ".") or not f.f_code.co_flags & _GEN:
        return None
    return None if f.f_back is not None and _module(f.f_back) == "contextlib" else f


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


_LOOP = __package__ + ".loop"
_GEN = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def unmark(token: contextvars.Token[LoopTurn | None], turn: LoopTurn) -> None:
    """Take ``turn``'s mark off this context (``turn`` is closed already). A generator's steps
    may each run in a context of their own (Starlette runs a sync one's ``next()`` calls in a
    copy each): the mark set in another step's context is no concern of this one's."""
    try:
        CURRENT.reset(token)
    except ValueError:  # set in another context: clear it here only if it shows this turn
        if CURRENT.get() is turn:
            old = token.old_value
            CURRENT.set(None if old is contextvars.Token.MISSING else old)


def where_running() -> tuple[int, asyncio.Task[Any] | None]:
    """This thread and this asyncio task (None outside one)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    return threading.get_ident(), task


CURRENT: contextvars.ContextVar[LoopTurn | None] = contextvars.ContextVar(
    "memory_inject_turn", default=None
)


def active_turn() -> LoopTurn | None:
    """The live turn this code runs in (a closed or abandoned mark is no turn)."""
    turn = CURRENT.get()
    return turn if turn is not None and turn.live else None


def current_turn() -> LoopTurn | None:
    """The wrapped turn this code runs in, if any (any loop's); never one that ended."""
    return active_turn()


@contextmanager
def serving(turn: LoopTurn) -> Iterator[None]:
    """While ``turn`` renders, it is the active turn (a one-shot one too: an agent that its
    event's receivers run is a ``sub_turn``) and it is serving (its own ``prepare`` from
    there renders nothing).

    A turn this marks (a one-shot turn: ``prepare`` outside ``turn()``, a channel message,
    a cron run, a heartbeat, a direct request) ends with its render, on every exit path
    (return, exception, cancellation): the mark is reset here and closed for every copy of
    the context taken inside it (a task or thread a receiver started)."""
    token = CURRENT.set(turn) if active_turn() is not turn else None
    turn.serving = True
    try:
        yield
    finally:
        turn.serving = False
        if token is not None:
            turn.close()
            CURRENT.reset(token)
