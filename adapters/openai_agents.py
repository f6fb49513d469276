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

A run's calls are one turn by the SDK's own word for the run: the
``RunContextWrapper`` it makes for each ``Runner.run`` (``run_sync``,
``run_streamed``) and passes to every hook, tool and handoff of that run.
The filter is not given it: it is the one held by the SDK's frame that
calls the filter (no private attribute is read). The first call of a run
renders; every later call of the same run reuses the block, whatever a
handoff's input filter kept, and a new run always renders (the same
question again, in one outer ``trace()`` or not). A run resumed from a
``RunState`` keeps its wrapper; one read back from JSON has a new one, and
its call still continues the turn of the same conversation and sessions when
the items after the newest user message are the model's (tool results, no
developer or system note). A run is nested while the run that filtered last
in this context is still running: the filter remembers the outermost frame
of the SDK's own code around it (its ``Runner.run``, or the task of its
current model turn, where its tools run), and that frame is live exactly
while the run (or its turn's tools) is.

Needs the ``agents`` extra (``pip install "memory-inject[agents]"``).
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import sys
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any, Unpack

from agents import FunctionTool, RunConfig, RunContextWrapper, Tool
from agents.run_config import CallModelData, ModelInputData
from attrs import frozen

from memory_inject.config import AgentConfig
from memory_inject.contract import Memory
from memory_inject.models import TurnOrigin

from . import _core
from ._framework import FrameworkAdapter, FrameworkOptions, ToolCore
from ._turns import CURRENT, LoopTurn, _running, where_running
from .messages import starts_with_block

__all__ = ["AgentsMemory", "agents_tools", "input_text", "place_block", "user_item_index"]

_log = logging.getLogger("memory_inject.adapters")
_TEXT_PARTS = ("input_text", "text", "output_text")
_MAX_RUNS = 4096


@frozen(eq=False)
class _RunMark:
    """The run that filtered last in a context: its turn key and where its code runs."""

    key: str
    frame: FrameType | None
    thread: int
    task: Any

    @property
    def live(self) -> bool:
        return self.frame is not None and _running(self.frame, self.thread, self.task)


class _ByRun:
    """Each run's injection, by the run's ``RunContextWrapper`` (held weakly: by its id,
    checked to be the same object, the oldest dropped past ``_MAX_RUNS``)."""

    def __init__(self) -> None:
        self._runs: OrderedDict[int, tuple[weakref.ref[Any], _core.Injection]] = OrderedDict()

    def get(self, run: object) -> _core.Injection | None:
        entry = self._runs.get(id(run))
        return entry[1] if entry is not None and entry[0]() is run else None

    def put(self, run: object, injection: _core.Injection) -> None:
        try:
            ref = weakref.ref(run)
        except TypeError:  # not weakly referable: not kept (the conversation decides)
            return
        self._runs[id(run)] = (ref, injection)
        self._runs.move_to_end(id(run))
        while len(self._runs) > _MAX_RUNS:
            self._runs.popitem(last=False)


# The run whose filter ran last in this context (inherited by the tool tasks it starts).
_parent: contextvars.ContextVar[_RunMark | None] = contextvars.ContextVar(
    "memory_inject_agents_run", default=None
)


def _sdk_call() -> tuple[FrameType | None, RunContextWrapper[Any] | None]:
    """The SDK's code (the ``agents`` package) that called the filter: its outermost frame
    before the host's code (the run's ``Runner.run``, or the task of its model turn), and
    the run's ``RunContextWrapper``, the innermost one its frames hold (the one the SDK
    builds the filter's ``CallModelData`` from)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and not _in_sdk(f):
        f = f.f_back
    found, run = None, None
    while f is not None and _in_sdk(f):
        if run is None:
            run = _wrapper_in(f)
        found, f = f, f.f_back
    return found, run


def _wrapper_in(frame: FrameType) -> RunContextWrapper[Any] | None:
    local = frame.f_locals
    named = local.get("context_wrapper")
    if isinstance(named, RunContextWrapper):
        return named
    return next((v for v in local.values() if isinstance(v, RunContextWrapper)), None)


def _in_sdk(frame: FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).split(".", 1)[0] == "agents"


def _turn_key(items: Sequence[Any], idx: int, sessions: object) -> str:
    """A fingerprint of the input up to the newest user message, and the turn's sessions."""
    h = hashlib.sha256(repr(sessions).encode("utf-8", "surrogatepass"))
    for item in items[: idx + 1]:
        role = item.get("role") if isinstance(item, Mapping) else None
        text = input_text(item) if isinstance(item, Mapping) else type(item).__name__
        h.update(f"\x1e{role}\x1f{text}".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


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


#: The roles of messages a host writes into a run's input (the model writes the others).
_HOST_ROLES = frozenset({"user", "developer", "system"})


def _get(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


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
        self._runs: OrderedDict[str, _core.Injection] = OrderedDict()
        self._by_run = _ByRun()

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A ``RunConfig`` with this filter (``kwargs``: any other ``RunConfig`` field)."""
        return RunConfig(call_model_input_filter=self.call_model_input_filter, **kwargs)

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
        try:
            sessions: object = self._scopes(data.context)
        except Exception:  # noqa: BLE001 - abegin reports it on the turn
            sessions = None
        key = _turn_key(items, idx, sessions)
        sdk, run = _sdk_call()
        # The SDK's run decides: every call of a run (its tool loop, its handoffs, whatever
        # their input filters kept) is the turn its first call began, and another run (the
        # same question asked again, in the same trace or not) is a turn of its own.
        injection = self._by_run.get(run) if run is not None else None
        # A run of its own wrapper continuing a conversation's turn (resumed from a RunState
        # read back from JSON): items the model wrote after the user message, and no message
        # the host wrote (a developer or system note: a new run of the same question).
        continues = idx < len(items) - 1 and not any(
            _get(item, "role") in _HOST_ROLES for item in items[idx + 1 :]
        )
        if injection is None and continues:
            injection = self._runs.get(key)
        if injection is None:
            parent = _parent.get()
            # The parent's tool is running and this is another run (another question, or
            # the same question passed on to an agent run as a tool: another SDK frame).
            if (
                parent is not None
                and parent.live
                and (parent.key != key or parent.frame is not sdk)
            ):
                with self.running(None):  # the parent's tool is running: this is a sub-turn
                    injection = await self.abegin(input_text(items[idx]), data.context)
            else:
                injection = await self.abegin(input_text(items[idx]), data.context)
        if run is not None:
            self._by_run.put(run, injection)
        self._runs[key] = injection
        self._runs.move_to_end(key)
        while len(self._runs) > _MAX_RUNS:
            self._runs.popitem(last=False)
        thread, task = where_running()
        if sdk is not None:  # called outside a run, nothing would end the mark: none
            self._mark(injection, sdk, thread, task)
        _parent.set(_RunMark(key, sdk, thread, task))
        return ModelInputData(
            input=place_block(items, injection.block), instructions=data.model_data.instructions
        )

    def _mark(self, injection: _core.Injection, sdk: FrameType, thread: int, task: Any) -> None:
        """Mark the context as inside this run's turn while the SDK's frame runs, so an agent
        started in one of its tools (a :class:`~.loop.MemoryLoop`, a client wrapper,
        pydantic-ai) is a ``sub_turn``. The mark is left set, as the client wrappers' are:
        it is live while the frame runs, and the run's context is not the host's (the SDK
        runs each model turn in a task of its own)."""
        turn = LoopTurn(
            origin=injection.origin,
            sessions=injection.sessions,
            suppress=False,
            turn_id=injection.turn.turn_id,
            owner=self._marker,
            nested=injection.origin is TurnOrigin.SUB_TURN,
            injection=injection,
            frame=sdk,
            thread=thread,
            task=task,
        )
        CURRENT.set(turn)
