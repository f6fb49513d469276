"""LangGraph: a graph node that renders the turn's block, and the messages to send with it.

::

    memory = LangGraphMemory(store, agent, sessions=["user_u1"])

    def call_model(state: MemoryState) -> dict:
        return {"messages": [model.invoke(memory.messages(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("memory", memory.node)          # once per invoke: one event
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(tools, wrap_tool_call=memory.wrap_tool_call))
    builder.add_edge(START, "memory")
    builder.add_edge("memory", "model")

One ``invoke`` is one turn: the ``memory`` node recalls and renders once and
keeps the block in the state (``memory_block``); :meth:`LangGraphMemory.messages`
places it on the newest ``HumanMessage`` of each model call (``model_copy``:
ids, names and metadata kept; the system message untouched). Tools wrapped
with :meth:`LangGraphMemory.wrap_tool_call` run inside the turn's mark, so an
agent a tool starts is a ``sub_turn``. For ``langchain.agents.create_agent``
use :class:`memory_inject.adapters.langchain.MemoryMiddleware`.

Needs the ``langgraph`` extra (``pip install "memory-inject[langgraph]"``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NotRequired, Unpack

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.config import get_config
from langgraph.graph import MessagesState

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from ._framework import FrameworkAdapter, FrameworkOptions, ToolCore
from .messages import starts_with_block

__all__ = [
    "BLOCK_FOR_KEY",
    "BLOCK_KEY",
    "BLOCK_TEXT_KEY",
    "LangGraphMemory",
    "MemoryState",
    "langchain_tools",
    "message_text",
    "place_block",
    "user_message_index",
]

#: The state key the turn's block is kept under.
BLOCK_KEY = "memory_block"
#: The state key of the id of the human message the block was rendered for.
BLOCK_FOR_KEY = "memory_block_for"
#: The state key of a digest of that message's text: an edited message (the same id,
#: another text, as LangGraph replaces a message) is a new turn, not a resumed one.
BLOCK_TEXT_KEY = "memory_block_text"
_log = logging.getLogger("memory_inject.adapters")
#: How many messages' blocks an adapter keeps in process (oldest forgotten first).
_MEMO_SIZE = 4096


class MemoryState(MessagesState):
    """``MessagesState`` plus the turn's block (``memory_block``), for :class:`LangGraphMemory`."""

    memory_block: NotRequired[str]
    memory_block_for: NotRequired[str | None]
    memory_block_text: NotRequired[str]


def user_message_index(messages: Sequence[Any]) -> int | None:
    """Index of the newest ``HumanMessage`` (the one that started the turn), or None."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, BaseMessage) and msg.type == "human":
            return i
    return None


def message_text(message: BaseMessage) -> str:
    """The text of a LangChain message (its string content or its text blocks)."""
    return message.text


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _first_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    first = content[0] if content else None
    if isinstance(first, str):
        return first
    if isinstance(first, dict) and first.get("type") == "text":
        return str(first.get("text", ""))
    return ""


def place_block(messages: Sequence[AnyMessage], block: str) -> list[AnyMessage]:
    """A new list with ``block`` in front of the newest ``HumanMessage`` (ids kept).

    Nothing is placed when the block is empty, when there is no human
    message, or when that message already starts with a block. Other
    messages are the same objects; the placed one is a ``model_copy``.
    """
    out = list(messages)
    idx = user_message_index(out)
    if not block or idx is None or starts_with_block(_first_text(out[idx])):
        return out
    msg = out[idx]
    content = msg.content
    new: Any = (
        block + content
        if isinstance(content, str)
        else [
            {"type": "text", "text": block},
            *content,
        ]
    )
    out[idx] = msg.model_copy(update={"content": new})
    return out


def _owns(state: Any, message_id: str, text: str) -> bool:
    """Whether the state's block was rendered for this message: its id and, when the state
    says, its text (an edited message keeps its id)."""
    if state.get(BLOCK_FOR_KEY) != message_id:
        return False
    digest = state.get(BLOCK_TEXT_KEY)
    return digest is None or digest == _digest(text)


def langchain_tools(tools: ToolCore) -> list[StructuredTool]:
    """The memory tools as LangChain tools (for ``create_agent``, ``ToolNode``, ``bind_tools``).

    Each is a ``StructuredTool`` with the core's name, description and JSON
    schema; its sync and async runs call the core, which answers the model
    with text and never raises.
    """

    def wrap(name: str) -> tuple[Callable[..., str], Callable[..., Awaitable[str]]]:
        def run(**arguments: Any) -> str:
            return tools.call(name, arguments)

        async def arun(**arguments: Any) -> str:
            return await tools.acall(name, arguments)

        return run, arun

    out = []
    for spec in tools:
        run, arun = wrap(spec.name)
        out.append(
            StructuredTool.from_function(
                func=run,
                coroutine=arun,
                name=spec.name,
                description=spec.description,
                args_schema=dict(spec.parameters),
            )
        )
    return out


class LangGraphMemory(FrameworkAdapter):
    """One turn per graph ``invoke``: :meth:`node` renders, :meth:`messages` places.

    ``sessions`` may be a function of the node's ``RunnableConfig`` (e.g.
    ``lambda config: [config["configurable"]["thread_id"]]``). Never raises
    because of memory: a failing store gives an empty block and one event
    with ``success=False``.
    """

    default_channel = "langgraph"

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[FrameworkOptions]
    ) -> None:
        """As :class:`~._framework.FrameworkAdapter`."""
        super().__init__(store, agent_config, **options)
        # (the turn's scopes, message id, its text's digest) -> block, for graphs whose
        # state has no memory_block key. Message ids are the host's: a frontend that
        # numbers each conversation's messages gives every user a message "1".
        self._blocks: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def _update(self, state: Any, block: str, start: tuple[str, str | None]) -> dict[str, Any]:
        update: dict[str, Any] = {BLOCK_KEY: block, BLOCK_FOR_KEY: start[1]}
        update[BLOCK_TEXT_KEY] = _digest(start[0])
        if self.earlier_blocks == "keep" and block:
            messages = state["messages"]
            idx = user_message_index(messages)
            placed = place_block(messages, block)
            if idx is not None and placed[idx] is not messages[idx]:
                update["messages"] = [placed[idx]]  # add_messages replaces it by id
        return update

    @staticmethod
    def _start(state: Any) -> tuple[str, str | None] | None:
        """The user's text and message id of a new turn; None when there is nothing to render:
        no human message, or a resumed run whose message already has its block."""
        messages = state["messages"]
        idx = user_message_index(messages)
        if idx is None:
            return None
        msg = messages[idx]
        text = message_text(msg)
        if starts_with_block(_first_text(msg)):
            return None
        if msg.id is not None and _owns(state, msg.id, text):
            return None
        return text, msg.id

    def _opening(self, state: Any) -> tuple[str, str | None] | dict[str, Any]:
        """The new turn's ``(text, message id)``, or the update to return instead: ``{}``
        when there is nothing to render, a cleared block when the state cannot be read."""
        try:
            start = self._start(state)
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: the LangGraph state could not be read")
            return {BLOCK_KEY: "", BLOCK_FOR_KEY: None, BLOCK_TEXT_KEY: ""}
        return {} if start is None else start

    def update(self, state: Any, run_context: Any = None) -> dict[str, Any]:
        """The state update of a turn's start: its block under ``memory_block`` (one event).

        ``run_context`` is what a ``sessions`` function is called with. A run
        resumed on the same human message (an interrupt, a retry) renders
        nothing again. Never raises: a failure is logged, and the update then
        clears the block, so no earlier turn's block is sent with this message.
        """
        start = self._opening(state)
        if isinstance(start, dict):
            return start
        try:
            return self._update(state, self._kept(self.begin(start[0], run_context), start), start)
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: the LangGraph memory update failed")
            return {BLOCK_KEY: "", BLOCK_FOR_KEY: start[1], BLOCK_TEXT_KEY: _digest(start[0])}

    async def aupdate(self, state: Any, run_context: Any = None) -> dict[str, Any]:
        """The async twin of :meth:`update`."""
        start = self._opening(state)
        if isinstance(start, dict):
            return start
        try:
            injection = await self.abegin(start[0], run_context)
            return self._update(state, self._kept(injection, start), start)
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: the LangGraph memory update failed")
            return {BLOCK_KEY: "", BLOCK_FOR_KEY: start[1], BLOCK_TEXT_KEY: _digest(start[0])}

    def _kept(self, injection: Any, start: tuple[str, str | None]) -> str:
        """The turn's block, also kept in process under its scopes, its message's id and
        text: a graph whose state has no ``memory_block`` key (a plain ``MessagesState``)
        drops the state update, and :meth:`messages` then finds the block here."""
        block = str(injection.block)
        if start[1] is not None:
            self._blocks[(tuple(injection.sessions), start[1], _digest(start[0]))] = block
            while len(self._blocks) > _MEMO_SIZE:
                self._blocks.popitem(last=False)
        return block

    def _run_scopes(self, run_context: Any) -> tuple[str | None, ...] | None:
        """The scopes of the run placing a block (as :meth:`begin` resolved them for it);
        None when they cannot be known (no run context for a ``sessions`` function)."""
        if not callable(self.sessions):
            return tuple(self.sessions)
        try:
            context = get_config() if run_context is None else run_context
            return self._scopes(context)
        except Exception:  # noqa: BLE001 - no block is the safe answer
            return None

    def block_for(self, state: Any, messages: Sequence[Any], run_context: Any = None) -> str:
        """The block to place on ``messages``: the state's, or the one kept in process for
        the newest human message of this run's scopes; ``""`` when the block is another
        message's. ``run_context`` is what a ``sessions`` function takes (by default the
        running graph node's config)."""
        idx = user_message_index(messages)
        msg = messages[idx] if idx is not None else None
        msg_id = getattr(msg, "id", None)
        block = str(state.get(BLOCK_KEY) or "")
        owner = state.get(BLOCK_FOR_KEY)
        if msg is None or msg_id is None:
            return block if owner is None else ""
        text = message_text(msg)
        if _owns(state, msg_id, text) or (block and owner is None):
            return block  # the state's record of this message's turn, an empty block too
        scopes = self._run_scopes(run_context)
        if scopes is None:
            return ""
        return self._blocks.get((scopes, msg_id, _digest(text)), "")

    def node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The graph node: :meth:`update` with the node's config as the run context."""
        return self.update(state, config)

    async def anode(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The async graph node (for ``ainvoke``-only graphs)."""
        return await self.aupdate(state, config)

    def messages(self, state: Any) -> list[AnyMessage]:
        """The state's messages with the turn's block placed (the state is not changed).

        Never raises because of memory: a failure gives the messages unchanged.
        """
        messages = state["messages"]
        try:
            return place_block(messages, self.block_for(state, messages))
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: placing the block failed")
            return list(messages)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """A ``ToolNode(wrap_tool_call=...)`` wrapper: agents the tool starts are sub-turns."""
        with self.running(None):
            return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """The async twin of :meth:`wrap_tool_call` (``ToolNode(awrap_tool_call=...)``)."""
        with self.running(None):
            return await handler(request)
