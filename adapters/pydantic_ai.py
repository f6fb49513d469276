"""pydantic-ai: a capability that gives each agent run one block (the history-processor hook).

::

    memory = PydanticAIMemory(store, agent, sessions=["user_u1"])
    agent = Agent(model, system_prompt=SYSTEM, capabilities=[memory.capability()])
    result = await agent.run(text, message_history=history)

One ``agent.run`` (``run_sync``, ``iter``, ``run_stream``) is one turn:
``wrap_run`` recalls and renders once (one event) and marks the run's
context, so an agent a tool runs is a ``sub_turn`` (no parent block, its own
event). ``before_model_request``, the hook pydantic-ai's history processors
run in (``ProcessHistory``), places the block in front of the newest
``UserPromptPart`` of every model request of the run (``dataclasses.replace``;
the system prompt parts and instructions untouched). By default it changes
the request only, so ``result.all_messages()`` keeps the user's prompt
without the block; ``earlier_blocks="keep"`` writes it into the run's history, as
a history processor does. The block is held for the run by an object pydantic-ai
makes for that run alone and shares with every ``RunContext`` of it (see
``_run_of``), never by ``run_id``: the host may pass the same one to two users'
overlapping runs, which then got each other's block.

Needs the ``pydantic-ai`` extra (``pip install "memory-inject[pydantic-ai]"``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Unpack

from pydantic_ai import RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestContext

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory

from . import _core
from ._framework import FrameworkAdapter, FrameworkOptions, ToolCore
from .messages import starts_with_block

_log = logging.getLogger("memory_inject.adapters")

__all__ = [
    "MemoryCapability",
    "PydanticAIMemory",
    "place_block",
    "prompt_text",
    "pydantic_ai_tools",
]


def prompt_text(content: str | Sequence[Any] | None) -> str:
    """The text of a user prompt: the string, or its string parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(c for c in content if isinstance(c, str))


def _newest_prompt(messages: Sequence[ModelMessage]) -> tuple[int, int] | None:
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, ModelRequest):
            for j in range(len(msg.parts) - 1, -1, -1):
                if isinstance(msg.parts[j], UserPromptPart):
                    return i, j
    return None


def place_block(messages: Sequence[ModelMessage], block: str) -> list[ModelMessage]:
    """A new list with ``block`` in front of the newest ``UserPromptPart`` (other parts kept).

    Nothing is placed when the block is empty, when there is no user prompt or
    when it already starts with a block; other messages are the same objects.
    """
    out = list(messages)
    where = _newest_prompt(out)
    if not block or where is None:
        return out
    i, j = where
    request = out[i]
    assert isinstance(request, ModelRequest)  # noqa: S101 - _newest_prompt found it
    part = request.parts[j]
    assert isinstance(part, UserPromptPart)  # noqa: S101
    content = part.content
    first = content if isinstance(content, str) else (content[0] if content else "")
    if isinstance(first, str) and starts_with_block(first):
        return out
    new: Any = block + content if isinstance(content, str) else [block, *content]
    parts = list(request.parts)
    parts[j] = dataclasses.replace(part, content=new)
    out[i] = dataclasses.replace(request, parts=parts)
    return out


def _run_of(ctx: RunContext[Any]) -> object | None:
    """An object of this run alone, the same one in every ``RunContext`` of the run.

    pydantic-ai makes ``discovered_tool_names`` a new set for each run and passes
    that set by reference into every context of the run (never reassigned: its own
    in-step tool reveals rely on it; so from 2.68, the oldest the extra allows).
    ``run_id`` is not such a key: it is the host's argument to ``Agent.run``, and
    two users' runs may give the same one. None: no block (never another run's).
    """
    return getattr(ctx, "discovered_tool_names", None)


def pydantic_ai_tools(tools: ToolCore) -> list[Tool[Any]]:
    """The memory tools as pydantic-ai ``Tool`` objects (``Agent(tools=[...])``).

    Built with ``Tool.from_schema`` from the core's JSON schema; a call
    answers the model with the core's text and never raises.
    """

    def run(name: str) -> Any:
        async def call(**arguments: Any) -> str:
            return await tools.acall(name, arguments)

        return call

    return [
        Tool.from_schema(
            run(spec.name),
            name=spec.name,
            description=spec.description,
            json_schema=dict(spec.parameters),
        )
        for spec in tools
    ]


class PydanticAIMemory(FrameworkAdapter):
    """The pydantic-ai adapter; :meth:`capability` is what an ``Agent`` takes.

    ``sessions`` may be a function of the run's ``RunContext`` (e.g.
    ``lambda ctx: [ctx.deps.user_id]``). Never raises because of memory.
    """

    default_channel = "pydantic-ai"

    def __init__(
        self, store: Memory, agent_config: AgentConfig, **options: Unpack[FrameworkOptions]
    ) -> None:
        """As :class:`~._framework.FrameworkAdapter`."""
        super().__init__(store, agent_config, **options)
        # id(the run's object, see _run_of) -> (that object, the run's turn); never the
        # host's run_id, which concurrent runs of different users may share
        self.runs: dict[int, tuple[object, _core.Injection]] = {}

    def capability(self) -> MemoryCapability:
        """A capability for ``Agent(capabilities=[...])`` backed by this adapter."""
        return MemoryCapability(self)

    def query(self, ctx: RunContext[Any]) -> str | None:
        """The run's query: its prompt, else the newest user prompt of its history."""
        if ctx.prompt is not None:
            return prompt_text(ctx.prompt)
        where = _newest_prompt(ctx.messages)
        if where is None:
            return None
        request = ctx.messages[where[0]]
        assert isinstance(request, ModelRequest)  # noqa: S101
        part = request.parts[where[1]]
        assert isinstance(part, UserPromptPart)  # noqa: S101
        return prompt_text(part.content)


@dataclasses.dataclass
class MemoryCapability(AbstractCapability[Any]):
    """One render per run in ``wrap_run``; the block placed in ``before_model_request``."""

    memory: PydanticAIMemory

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not serialisable into an agent spec (it holds a store)."""
        return None

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        """Render this run's block, then run it inside the turn's mark."""
        run = _run_of(ctx)
        try:
            text = self.memory.query(ctx)
            injection = await self.memory.abegin(text, ctx) if text is not None else None
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: the pydantic-ai memory render failed")
            injection = None
        if injection is not None and run is None:  # a pydantic-ai without the run's set
            _log.warning("memory_inject: this pydantic-ai gives no per-run object; no block")
        elif injection is not None:
            self.memory.runs[id(run)] = (run, injection)  # held: its id is not reused
        try:
            with self.memory.running(injection):
                return await handler()
        finally:
            if run is not None:
                self.memory.runs.pop(id(run), None)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Place the run's block on the newest user prompt of this request."""
        run = _run_of(ctx)
        entry = self.memory.runs.get(id(run)) if run is not None else None
        injection = entry[1] if entry is not None and entry[0] is run else None
        if injection is None or not injection.block:
            return request_context
        try:
            placed = place_block(request_context.messages, injection.block)
        except Exception:  # noqa: BLE001 - memory never fails the turn
            _log.exception("memory_inject: placing the block failed")
            return request_context
        request_context.messages = placed
        if self.memory.earlier_blocks == "keep":
            ctx.messages[:] = placed
        return request_context
