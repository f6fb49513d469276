"""LangChain v1 agents: a ``create_agent`` middleware that gives each run one block.

::

    memory = MemoryMiddleware(store, agent, sessions=["user_u1"])
    graph = create_agent(model, tools, system_prompt=SYSTEM, middleware=[memory],
                         checkpointer=InMemorySaver())
    graph.invoke({"messages": [{"role": "user", "content": text}]}, config)

One ``invoke`` is one turn. ``before_agent`` recalls and renders once (one
event) and keeps the block in a private state key; ``wrap_model_call`` places
it on the newest ``HumanMessage`` of every model call of the run (ids kept,
the system message untouched); ``wrap_tool_call`` runs each tool inside the
turn's mark, so an agent started by a tool is a ``sub_turn`` (no parent
block, its own event). By default the block is in the model request only,
so the checkpointed history never collects blocks; ``earlier_blocks="keep"``
writes it into the state instead (the request of turn N then starts with
the exact bytes of turn N-1's).

A plain chat model or an LCEL chain gets memory in one line, with no agent:

::

    chat = with_memory(ChatOpenAI(model="gpt-4o-mini"), store, agent, sessions=["user_u1"])
    chat.invoke("where do deploys go?")                      # one turn, one event
    chain = prompt | memory_step(store, agent, sessions=["user_u1"]) | model

:func:`memory_step` takes what a chat model takes (a string, a ``PromptValue``
such as a chat prompt's output, or a list of messages) and gives the messages
with the block on the newest ``HumanMessage`` (ids kept). Each ``invoke`` is a
one-shot turn; inside another adapter's live turn (a tool of an agent) it is a
``sub_turn``. ``sessions`` may be a function of the run's ``RunnableConfig``.

Needs the ``langchain`` extra (``pip install "memory-inject[langchain]"``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Annotated, Any, NotRequired, Unpack

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._base import AdapterOptions
from ._framework import FrameworkOptions, Sessions
from .langgraph import LangGraphMemory, langchain_tools, place_block
from .loop import MemoryLoop, current_turn

__all__ = [
    "MemoryAgentState",
    "MemoryMiddleware",
    "langchain_tools",
    "memory_step",
    "with_memory",
]

_log = logging.getLogger("memory_inject.adapters")


class MemoryAgentState(AgentState[Any]):
    """The agent state plus the turn's block, private to the middleware."""

    memory_block: NotRequired[Annotated[str, PrivateStateAttr]]
    memory_block_for: NotRequired[Annotated[str | None, PrivateStateAttr]]
    memory_block_text: NotRequired[Annotated[str, PrivateStateAttr]]


class MemoryMiddleware(AgentMiddleware[MemoryAgentState, Any]):
    """The ``create_agent`` middleware (sync and async agents alike).

    Takes the store, the agent config and the options of
    :class:`~.langgraph.LangGraphMemory` (``sessions`` may be a function of
    the run's ``Runtime``). ``self.memory`` is the adapter doing the work.
    """

    state_schema = MemoryAgentState

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[FrameworkOptions]
    ) -> None:
        """Check the store and keep the adapter; a wrong store is a ``TypeError`` here."""
        super().__init__()
        options.setdefault("channel", "langchain")
        self.memory = LangGraphMemory(store, agent_config, **options)

    @property
    def name(self) -> str:
        """The middleware's name in the graph."""
        return "MemoryInject"

    def before_agent(self, state: MemoryAgentState, runtime: Any) -> dict[str, Any] | None:
        """Render this run's block (one event per ``invoke``)."""
        return self.memory.update(state, runtime)

    async def abefore_agent(self, state: MemoryAgentState, runtime: Any) -> dict[str, Any] | None:
        """The async twin of :meth:`before_agent`."""
        return await self.memory.aupdate(state, runtime)

    def _placed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        try:
            runtime = getattr(request, "runtime", None)
            block = self.memory.block_for(request.state or {}, request.messages, runtime)
            return request.override(messages=place_block(request.messages, block))
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: placing the block failed")
            return request

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> Any:
        """Send the model call with the block on the newest human message."""
        return handler(self._placed(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        """The async twin of :meth:`wrap_model_call`."""
        return await handler(self._placed(request))

    def wrap_tool_call(self, request: Any, handler: Callable[..., Any]) -> Any:
        """Run the tool inside the turn's mark: agents it starts are sub-turns."""
        return self.memory.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[..., Awaitable[Any]]) -> Any:
        """The async twin of :meth:`wrap_tool_call`."""
        return await self.memory.awrap_tool_call(request, handler)


# -- a plain chat model or chain ------------------------------------------------------


def _as_messages(value: Any) -> list[Any] | None:
    """What a chat model takes, as a message list; None for a shape it does not take."""
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, Sequence):
        items = list(value)
        if any(isinstance(m, tuple | str) for m in items):
            try:  # ("human", "...") and plain strings, as chat models take them
                return list(convert_to_messages(items))
            except (ValueError, TypeError, NotImplementedError):
                return items  # read as it is: an unreadable shape is named on the event
        return items
    return None


def memory_step(
    store: Memory,
    agent_config: AgentConfig,
    *,
    sessions: Sessions = (),
    origin: TurnOrigin | str = TurnOrigin.INTERACTIVE,
    **options: Unpack[AdapterOptions],
) -> Runnable[Any, Any]:
    """A runnable that gives a chat model's input this turn's block (see the module docstring).

    Never raises because of memory: a shape it cannot read goes through as it came, with
    one ``memory_skipped`` (``unreadable_message``); a ``sessions`` function that raises
    gives no block and one ``memory_skipped`` (``host_callback_failed``).
    """
    options.setdefault("channel", "langchain")
    loop = MemoryLoop(store, agent_config, **options)
    fixed = None if callable(sessions) else _core.scopes(sessions)

    def scopes(config: RunnableConfig | None) -> Iterable[str | None]:
        if fixed is not None:
            return fixed
        assert callable(sessions)  # noqa: S101 - by the line above
        return _core.scopes(sessions(config))  # a wrong shape is the host's bug, reported

    def failed(messages: list[Any], exc: Exception) -> list[Any]:
        nested = current_turn() is not None
        req = _core.TurnInput(
            origin=TurnOrigin.SUB_TURN if nested else TurnOrigin(origin),
            query="",
            turn=loop._meta(None),
        )
        _core.host_failed(store, agent_config, req, "sessions", exc)
        return messages

    def run(value: Any, config: RunnableConfig) -> Any:
        messages = _as_messages(value)
        if messages is None:
            loop.inject([value], origin=origin)  # names the shape on one event
            return value
        try:
            turn = scopes(config)
        except Exception as exc:  # noqa: BLE001 - a host bug is reported on the turn
            return failed(messages, exc)
        return loop.prepare(messages, sessions=turn, origin=origin)

    async def arun(value: Any, config: RunnableConfig) -> Any:
        messages = _as_messages(value)
        if messages is None:
            await loop.ainject([value], origin=origin)
            return value
        try:
            turn = scopes(config)
        except Exception as exc:  # noqa: BLE001 - a host bug is reported on the turn
            return failed(messages, exc)
        return await loop.aprepare(messages, sessions=turn, origin=origin)

    return RunnableLambda(run, afunc=arun, name="memory_inject")


def with_memory(
    runnable: Runnable[Any, Any],
    store: Memory,
    agent_config: AgentConfig,
    *,
    sessions: Sessions = (),
    origin: TurnOrigin | str = TurnOrigin.INTERACTIVE,
    **options: Unpack[AdapterOptions],
) -> Runnable[Any, Any]:
    """``memory_step(...) | runnable``: a chat model (or a chain that takes messages) with
    memory, sync, async and streamed alike."""
    return memory_step(store, agent_config, sessions=sessions, origin=origin, **options) | runnable
