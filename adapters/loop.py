"""Wrap an agent's tool loop: one block per turn, placed before the first model call.

::

    loop = MemoryLoop(store, agent, channel="cli")

    with loop.turn(sessions=["cli_main"]) as turn:     # INTERACTIVE by default
        request = loop.prepare(history)                # recall, render, place: once
        while True:
            reply = client.chat.completions.create(model=..., messages=request)
            request = [*request, as_message(reply)]
            if not reply.choices[0].message.tool_calls:
                break
            request = [*loop.prepare(request), *run_tools(reply)]  # free: no second recall
    history = request                                  # keep the placed block (prompt cache)

A context variable marks "inside a wrapped turn". A turn started while
another one is active, by this loop or any other, is ``SUB_TURN``: the core
policy skips it, so a spawned sub-agent gets no block and no event is sent.
Inside a turn, the first ``prepare`` renders; later calls place the same
block again without a second recall, as long as they carry the turn's own
conversation (its user message, or the block placed on it): a sub-agent that
reuses the loop with a conversation of its own is a ``SUB_TURN``. Outside a
turn, each ``prepare`` is a one-shot turn of its own.

A mark never outlives its turn (docs/adapters.md, "When is a turn a
sub-turn?"): ``turn()`` closes it on every exit, and a copy of the context
taken inside the turn (a task, ``asyncio.to_thread``) sees it closed from
then on. A mark the client wrappers leave open across calls is live only
while the code that opened it is still running (:mod:`._turns` owns the marks).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, ParamSpec, TypedDict, TypeVar, Unpack, overload

from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin
from memory_inject.policy import InjectPolicy

from . import _core
from ._base import Adapter, AdapterOptions
from ._loop_streams import wrap_agen, wrap_gen
from ._turns import CURRENT, LoopTurn, active_turn, current_turn, serving, stream_host, unmark
from .messages import (
    Api,
    Placement,
    check_api,
    check_placement,
    find_user_message,
    has_block,
    inject_block,
    message_text,
    tool_names,
)

__all__ = ["LoopInjection", "LoopTurn", "MemoryLoop", "TurnOptions", "current_turn"]

P = ParamSpec("P")
R = TypeVar("R")


@frozen(kw_only=True)
class LoopInjection:
    """What ``inject`` did: the new message list and the turn's injection (None: no render)."""

    messages: list[Any]
    injection: _core.Injection | None
    placed: bool

    @property
    def block(self) -> str:
        """The block placed in ``messages`` (``""`` when none)."""
        return self.injection.block if self.injection is not None else ""

    @property
    def policy(self) -> InjectPolicy | None:
        """The turn's policy (None when nothing was rendered: reuse, no user message)."""
        return self.injection.policy if self.injection is not None else None


class TurnOptions(TypedDict, total=False):
    """A one-shot turn for ``prepare`` / ``inject`` outside :meth:`MemoryLoop.turn`."""

    origin: TurnOrigin | str
    sessions: Iterable[str | None]
    suppress: bool
    turn_id: str | None


@frozen
class _Decision:
    """What ``inject`` must do before any I/O (shared by the sync and async twins)."""

    turn: LoopTurn
    req: _core.TurnInput | None  # None: nothing to render (reuse, no user message, already placed)
    user_text: str | None  # to autosave; None after a tool call (saved at the loop's 1st step)
    problem: str | None = None  # the messages could not be read: report, place nothing


class MemoryLoop(Adapter):
    """The loop adapter: policy, render and placement for one agent's turns.

    ``placement`` and ``api`` are passed to :func:`adapters.messages.inject_block`.
    With ``autosave=True`` the user's message is stored (category
    ``conversation``, key ``user_msg_<turn_id>``, first session scope) after
    the render, for the origins the core allows. ``user_msg_*`` keys are in
    the render skip set on purpose: raw user messages are kept for search and
    tools, never re-injected.
    """

    default_channel = "cli"

    def __init__(
        self,
        store: Memory,
        agent_config: AgentConfig,
        *,
        placement: Placement = "prefix_user",
        api: Api = "auto",
        **options: Unpack[AdapterOptions],
    ) -> None:
        """``placement``, ``api``: see :func:`.messages.inject_block`; ``options``: as for all."""
        check_placement(placement)
        check_api(api)
        super().__init__(store, agent_config, **options)
        self.placement: Placement = placement
        self.api: Api = api

    # -- turns ------------------------------------------------------------------

    def _new_turn(
        self,
        origin: TurnOrigin | str,
        sessions: Iterable[str | None],
        suppress: bool,
        turn_id: str | None,
    ) -> LoopTurn:
        nested = active_turn() is not None
        return LoopTurn(
            origin=TurnOrigin.SUB_TURN if nested else TurnOrigin(origin),
            sessions=_core.scopes(sessions),
            suppress=suppress,
            turn_id=turn_id or _core.new_turn_id(),
            owner=self,
            nested=nested,
        )

    @contextmanager
    def turn(self, **turn: Unpack[TurnOptions]) -> Iterator[LoopTurn]:
        """Mark a turn (default: interactive, sessionless); nested in another it is ``SUB_TURN``."""
        state = self._marked(turn)
        state.hold(stream_host())  # a streaming generator's body: live while its steps run
        token = CURRENT.set(state)
        try:
            yield state
        finally:
            state.close()  # for every copy of this context (tasks, threads) too
            unmark(token, state)

    @asynccontextmanager
    async def aturn(self, **turn: Unpack[TurnOptions]) -> AsyncIterator[LoopTurn]:
        """The async twin of :meth:`turn` (the mark follows the task's context)."""
        with self.turn(**turn) as state:
            yield state

    def _marked(self, turn: TurnOptions) -> LoopTurn:
        return self._new_turn(
            turn.get("origin", TurnOrigin.INTERACTIVE),
            turn.get("sessions", ()),
            turn.get("suppress", False),
            turn.get("turn_id", None),
        )

    @overload
    def wrap(self, fn: Callable[P, R], /) -> Callable[P, R]: ...

    @overload
    def wrap(
        self,
        /,
        *,
        origin: TurnOrigin | str = ...,
        sessions: Iterable[str | None] = ...,
        suppress: bool = ...,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def wrap(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        origin: TurnOrigin | str = TurnOrigin.INTERACTIVE,
        sessions: Iterable[str | None] = (),
        suppress: bool = False,
    ) -> Any:
        """Decorate a turn function (sync or async, a function or a generator): each call
        runs inside :meth:`turn`; a generator's turn spans its steps (:mod:`._loop_streams`)."""
        scopes = _core.scopes(sessions)

        def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
            opens = functools.partial(
                self._marked, {"origin": origin, "sessions": scopes, "suppress": suppress}
            )
            if inspect.isasyncgenfunction(f):
                return wrap_agen(opens, f)
            if inspect.isgeneratorfunction(f):
                return wrap_gen(opens, f)
            if inspect.iscoroutinefunction(f):

                @functools.wraps(f)
                async def awrapper(*args: Any, **kwargs: Any) -> Any:
                    async with self.aturn(origin=origin, sessions=scopes, suppress=suppress):
                        return await f(*args, **kwargs)

                return awrapper

            @functools.wraps(f)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.turn(origin=origin, sessions=scopes, suppress=suppress):
                    return f(*args, **kwargs)

            return wrapper

        return decorate(fn) if fn is not None else decorate

    # -- preparing a request ------------------------------------------------------

    def _decide(self, messages: Sequence[Any], query: str | None, given: TurnOptions) -> _Decision:
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise TypeError(
                f"'messages' must be a list of messages (got {type(messages).__name__}); "
                "a prompt alone is [{'role': 'user', 'content': prompt}]"
            )
        idx, problem = find_user_message(messages, api=self.api)
        active = active_turn()
        if active is not None and active.owner is self and self._own(active, messages, idx):
            if given:
                raise TypeError(
                    f"inside loop.turn(), pass {sorted(given)} to turn(), not to prepare()"
                )
            turn = active
        else:  # a one-shot turn (SUB_TURN inside any live turn: a sub-agent)
            turn = self._marked(given)
        if problem is not None:
            if turn.injection is not None:  # the turn has had its event: leave the list be
                return _Decision(turn, None, None, problem)
            return _Decision(turn, turn.input("", self._meta(turn.turn_id)), None, problem)
        if turn.serving or turn.injection is not None or idx is None:
            return _Decision(turn, None, None)
        if has_block(messages, api=self.api):
            return _Decision(turn, None, None)
        text = turn.user_text = message_text(messages[idx])
        req = turn.input(text if query is None else query, self._meta(turn.turn_id))
        saved = None if turn is not active and tool_names(messages[idx + 1 :]) else text
        return _Decision(turn, req, saved)

    def _own(self, turn: LoopTurn, messages: Sequence[Any], idx: int | None) -> bool:
        """Whether ``messages`` are the turn's own conversation: before its first
        ``prepare`` anything is; after it, the same user message, or the block placed."""
        if turn.user_text is None or idx is None:
            return True
        return message_text(messages[idx]) == turn.user_text or has_block(messages, api=self.api)

    def _place(
        self, messages: Sequence[Any], decision: _Decision, injection: _core.Injection | None
    ) -> LoopInjection:
        if injection is not None:
            decision.turn.injection = injection
        if decision.problem is not None:  # unreadable: the list goes out as it came
            return LoopInjection(
                messages=list(messages), injection=decision.turn.injection, placed=False
            )
        current = decision.turn.injection
        out = inject_block(
            messages, current.block if current else "", placement=self.placement, api=self.api
        )
        return LoopInjection(
            messages=out,
            injection=current,
            placed=len(out) != len(messages)
            or any(a is not b for a, b in zip(out, messages, strict=False)),
        )

    def _unreadable(self, decision: _Decision) -> _core.Injection:
        assert decision.req is not None and decision.problem is not None  # noqa: S101 - by _decide
        return _core.unreadable(self.store, self.agent_config, decision.req, decision.problem)

    @staticmethod
    def _save(decision: _Decision) -> _core.Save | None:
        """The user's message, keyed by turn, in the turn's first session scope."""
        key, text = f"user_msg_{decision.turn.turn_id}", decision.user_text
        first = next((s for s in decision.turn.sessions if s is not None), None)
        return None if text is None else _core.Save(key, text, first)

    @staticmethod
    def _new_tools(
        decision: _Decision, messages: Sequence[Any]
    ) -> tuple[_core.Injection, tuple[str, ...]] | None:
        """A tool-loop step of a turn whose session row was recorded: the turn's injection
        and the tools called so far, when some are new (the row gets them), else None."""
        turn, injection = decision.turn, decision.turn.injection
        if decision.problem is not None or injection is None or not injection.session_key:
            return None
        tools = tool_names(messages)
        if set(tools) <= set(turn.tools):
            return None
        turn.tools = tools
        return injection, tools

    def inject(
        self,
        messages: Sequence[Any],
        *,
        query: str | None = None,
        **turn: Unpack[TurnOptions],
    ) -> LoopInjection:
        """Like :meth:`prepare`, also returning the policy, block and event of the turn."""
        decision = self._decide(messages, query, turn)
        if decision.req is None:
            step = self._new_tools(decision, messages)
            if step is not None:
                decision.turn.injection = _core.record_turn(
                    self.store, step[0], tools=step[1], cwd=self.cwd
                )
            return self._place(messages, decision, None)
        if decision.problem is not None:
            return self._place(messages, decision, self._unreadable(decision))
        decision.turn.tools = tool_names(messages)
        with serving(decision.turn):
            served = self._serve(decision.req, self._save(decision), decision.turn.tools)
        return self._place(messages, decision, served)

    async def ainject(
        self,
        messages: Sequence[Any],
        *,
        query: str | None = None,
        **turn: Unpack[TurnOptions],
    ) -> LoopInjection:
        """The async twin of :meth:`inject`. Calls of one turn made at once (``gather``)
        render once: the later ones wait for the first and place its block."""
        decision = self._decide(messages, query, turn)
        while decision.turn.rendering is not None and (decision.req or decision.turn.serving):
            await asyncio.shield(decision.turn.rendering)
            decision = self._decide(messages, query, turn)
        if decision.req is None:
            step = self._new_tools(decision, messages)
            if step is not None:
                decision.turn.injection = await _core.arecord_turn(
                    self.store, step[0], tools=step[1], cwd=self.cwd
                )
            return self._place(messages, decision, None)
        if decision.problem is not None:
            return self._place(messages, decision, self._unreadable(decision))
        decision.turn.tools = tool_names(messages)
        rendering = decision.turn.rendering = asyncio.get_running_loop().create_future()
        try:
            with serving(decision.turn):
                served = await self._aserve(decision.req, self._save(decision), decision.turn.tools)
            return self._place(messages, decision, served)
        finally:
            decision.turn.rendering = None
            rendering.set_result(None)

    def prepare(
        self,
        messages: Sequence[Any],
        *,
        query: str | None = None,
        **turn: Unpack[TurnOptions],
    ) -> list[Any]:
        """A new message list carrying this turn's block; the input is never mutated.

        ``query`` defaults to the raw text of the user's message. ``origin``,
        ``sessions``, ``suppress`` and ``turn_id`` (:class:`TurnOptions`)
        describe a one-shot turn and are refused inside :meth:`turn`, which
        sets them. Never raises because of memory: a failing store gives the
        list back without a block.
        """
        return self.inject(messages, query=query, **turn).messages

    async def aprepare(
        self,
        messages: Sequence[Any],
        *,
        query: str | None = None,
        **turn: Unpack[TurnOptions],
    ) -> list[Any]:
        """The async twin of :meth:`prepare`."""
        return (await self.ainject(messages, query=query, **turn)).messages
