"""The OpenAI Agents SDK: a ``call_model_input_filter`` that gives each run one block.

::

    memory = AgentsMemory(store, agent, sessions=["user_u1"])
    result = await Runner.run(agent, text, run_config=memory.run_config())
    # or RunConfig(call_model_input_filter=memory.call_model_input_filter, ...)

One ``Runner.run`` is one turn: the run's first model call recalls and
renders (one event), the later calls of the same run (tool loop, handoffs)
place the same block. The block is an ``input_text`` part in front of the
newest user message's content (a string content gets it as a prefix), so
the input stays a valid ``ResponseInputParam``; ``instructions`` (the system
prompt) are never touched. The filter changes the model input only: the
run's ``to_input_list()`` and any session keep the user's message without
the block, so a replayed history never collects blocks.

A run started inside a tool of a run (``Runner.run`` in a function tool, or
``agent.as_tool()``) is a ``sub_turn``: no parent block, its own event.

Needs the ``agents`` extra (``pip install "memory-inject[agents]"``).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from agents import FunctionTool, RunConfig, Tool
from agents.run_config import CallModelData, ModelInputData

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from . import _core
from ._framework import FrameworkAdapter, FrameworkOptions, ToolCore
from .messages import starts_with_block

__all__ = ["AgentsMemory", "agents_tools", "input_text", "place_block", "user_item_index"]

_log = logging.getLogger("memory_inject.adapters")
_TEXT_PARTS = ("input_text", "text", "output_text")
_MAX_RUNS = 256

# The run whose filter ran last in this context (inherited by the tool tasks it starts).
_parent: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "memory_inject_agents_run", default=None
)


def _run_identity() -> Any:
    """The SDK's per-``Runner.run`` object (closed when the run ends), or None."""
    try:
        from agents.run_internal.agent_tool_configuration import _current_run
    except ImportError:  # pragma: no cover - a future SDK without it: one turn per message
        return None
    return _current_run.get()


def user_item_index(items: Sequence[Any]) -> int | None:
    """Index of the newest user message among Responses input items, or None."""
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if (
            isinstance(item, Mapping)
            and item.get("role") == "user"
            and item.get("type", "message") == "message"
        ):
            return i
    return None


def input_text(item: Mapping[str, Any]) -> str:
    """The text of an input message: its string content or its text parts, joined."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p["text"])
            for p in content
            if isinstance(p, Mapping) and p.get("type") in _TEXT_PARTS and "text" in p
        )
    return ""


def _first_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        return str(content[0].get("text", ""))
    return ""


def place_block(items: Sequence[Any], block: str) -> list[Any]:
    """A new list with ``block`` in front of the newest user message (an ``input_text`` part).

    Nothing is placed when the block is empty, when there is no user message
    or when it already starts with a block; other items are the same objects.
    """
    out = list(items)
    idx = user_item_index(out)
    if not block or idx is None or starts_with_block(_first_text(out[idx])):
        return out
    item = out[idx]
    content = item.get("content")
    if isinstance(content, str):
        new: Any = block + content
    elif isinstance(content, list):
        new = [{"type": "input_text", "text": block}, *content]
    else:
        return out
    out[idx] = {**item, "content": new}
    return out


def agents_tools(tools: ToolCore) -> list[Tool]:
    """The memory tools as Agents SDK ``FunctionTool`` objects (``Agent(tools=[...])``).

    The core's JSON schema is passed as is (``strict_json_schema=False``: its
    optional arguments are optional); a call answers the model with the
    core's text and never raises.
    """

    def invoke(name: str) -> Any:
        async def on_invoke_tool(_ctx: Any, arguments: str) -> str:
            return await tools.acall(name, arguments)

        return on_invoke_tool

    return [
        FunctionTool(
            name=spec.name,
            description=spec.description,
            params_json_schema=dict(spec.parameters),
            on_invoke_tool=invoke(spec.name),
            strict_json_schema=False,
        )
        for spec in tools
    ]


class AgentsMemory(FrameworkAdapter):
    """The Agents SDK adapter: :meth:`call_model_input_filter` and :meth:`run_config`.

    ``sessions`` may be a function of the run's context object (the
    ``context=`` given to ``Runner.run``). ``earlier_blocks`` can only be
    ``"strip"``: the SDK does not keep what a filter returns.
    """

    default_channel = "openai-agents"

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[FrameworkOptions]
    ) -> None:
        """As :class:`~._framework.FrameworkAdapter`; ``earlier_blocks="keep"``: ``ValueError``."""
        if options.get("earlier_blocks", "strip") != "strip":
            raise ValueError(
                "AgentsMemory: 'earlier_blocks' must be 'strip' (the SDK keeps the input it "
                f"was given, not the filtered one; got {options.get('earlier_blocks')!r})"
            )
        super().__init__(store, agent_config, **options)
        self._runs: dict[int, tuple[Any, _core.Injection]] = {}

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A ``RunConfig`` with this filter (``kwargs``: any other ``RunConfig`` field)."""
        return RunConfig(call_model_input_filter=self.call_model_input_filter, **kwargs)

    def _known(self, key: Any) -> _core.Injection | None:
        for k, (run, _) in list(self._runs.items()):
            if getattr(run, "closed", False):
                del self._runs[k]
        hit = self._runs.get(id(key))
        return hit[1] if hit is not None and hit[0] is key else None

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Place the run's block on the newest user message; render it on the run's first call.

        Never raises because of memory: a failure is logged and the input goes unchanged.
        """
        try:
            return await self._filter(data)
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: the Agents SDK input filter failed")
            return data.model_data

    async def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        items = data.model_data.input
        idx = user_item_index(items)
        if idx is None:
            return data.model_data
        run = _run_identity()
        key = run if run is not None else items[idx]
        injection = self._known(key)
        if injection is None:
            parent = _parent.get()
            nested = (
                parent is not None and parent is not key and not getattr(parent, "closed", True)
            )
            if nested:
                with self.running(None):  # the parent's tool is running: this is a sub-turn
                    injection = await self.abegin(input_text(items[idx]), data.context)
            else:
                injection = await self.abegin(input_text(items[idx]), data.context)
            self._runs[id(key)] = (key, injection)
            while len(self._runs) > _MAX_RUNS:  # runs the SDK never closed (fallback keys)
                del self._runs[next(iter(self._runs))]
        _parent.set(key)
        return ModelInputData(
            input=place_block(items, injection.block), instructions=data.model_data.instructions
        )
