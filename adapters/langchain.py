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

Needs the ``langchain`` extra (``pip install "memory-inject[langchain]"``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired, Unpack

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import PrivateStateAttr

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from ._framework import FrameworkOptions
from .langgraph import LangGraphMemory, langchain_tools, place_block

__all__ = ["MemoryAgentState", "MemoryMiddleware", "langchain_tools"]

_log = logging.getLogger("memory_inject.adapters")


class MemoryAgentState(AgentState[Any]):
    """The agent state plus the turn's block, private to the middleware."""

    memory_block: NotRequired[Annotated[str, PrivateStateAttr]]
    memory_block_for: NotRequired[Annotated[str | None, PrivateStateAttr]]


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
            block = self.memory.block_for(request.state or {}, request.messages)
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
