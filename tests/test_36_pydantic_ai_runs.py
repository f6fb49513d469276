"""pydantic-ai: each run's model requests carry its own run's block, however the host
chooses ``run_id`` (issue 36).

``Agent.run(run_id=...)`` is the host's argument and two users' runs may share one
(a per-conversation id such as ``"turn-1"``). The adapter once kept the runs' blocks
by ``run_id``: two overlapping runs with the same id saw each other's memory, and the
first to end removed the other's block. The runs here interleave deterministically
(each model call waits for the other run to reach a given call).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from memory_inject import AgentConfig, InMemoryStore

if TYPE_CHECKING:
    from adapters.pydantic_ai import PydanticAIMemory
    from adapters.tools import remember
else:
    from memory_inject.adapters.pydantic_ai import PydanticAIMemory
    from memory_inject.adapters.tools import remember

AGENT = AgentConfig(agent="alice")
PIN = {"alice": "1111", "bob": "2222"}
BLOCK = "[Memory context]"


def question(user: str) -> str:
    return f"I am {user}: what is my bank PIN for the dashboards login?"


def users_store() -> InMemoryStore:
    store = InMemoryStore()
    for user, pin in PIN.items():
        r = remember(
            store,
            AGENT,
            f"{user.title()}'s bank PIN is {pin}, for the dashboards login.",
            session_id=user,
        )
        assert r.ok, r
    return store


def newest_prompt(messages: list[ModelMessage]) -> str:
    """The newest user prompt's text, as the model received it."""
    for msg in reversed(messages):
        if isinstance(msg, ModelRequest):
            for part in reversed(msg.parts):
                if isinstance(part, UserPromptPart):
                    c = part.content
                    return c if isinstance(c, str) else " ".join(x for x in c if isinstance(x, str))
    return ""


def owner(text: str) -> str:
    return "alice" if "I am alice" in text else "bob"


class Gate:
    """A model that records each call's prompt; a call may wait for another user's call."""

    def __init__(self, waits: dict[tuple[str, int], tuple[str, int]]) -> None:
        self.waits = waits
        self.calls: list[tuple[str, int, str]] = []  # (user, n-th call, newest prompt)
        self.arrived: dict[tuple[str, int], asyncio.Event] = {}

    def event(self, key: tuple[str, int]) -> asyncio.Event:
        return self.arrived.setdefault(key, asyncio.Event())

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = newest_prompt(messages)
        who = owner(text)
        step = 1 + sum(1 for c in self.calls if c[0] == who)
        self.calls.append((who, step, text))
        self.event((who, step)).set()
        if (who, step) in self.waits:
            await asyncio.wait_for(self.event(self.waits[who, step]).wait(), 10)
        if step == 1 and info.function_tools:
            return ModelResponse(parts=[ToolCallPart("lookup", {})])
        return ModelResponse(parts=[TextPart("ok")])

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        """The same replies, streamed."""
        reply = await self(messages, info)
        part = reply.parts[0]
        if isinstance(part, ToolCallPart):
            yield {0: DeltaToolCall(name=part.tool_name, json_args="{}")}
        else:
            yield "ok"


def agent_for(memory: PydanticAIMemory, gate: Gate) -> Agent[str, str]:
    model = FunctionModel(gate, stream_function=gate.stream)
    agent = Agent(model, deps_type=str, capabilities=[memory.capability()])

    @agent.tool_plain
    def lookup() -> str:
        """Look up the login runbook."""
        return "runbook"

    return agent


def assert_own_blocks(gate: Gate, calls: int) -> None:
    """Every call carries a block with its own user's memory and never the other's."""
    assert len(gate.calls) == calls
    for who, step, text in gate.calls:
        other = "bob" if who == "alice" else "alice"
        assert BLOCK in text, (who, step, text)
        assert PIN[who] in text, (who, step, text)
        assert PIN[other] not in text, (who, step, text)


# alice's first call waits until bob's run has rendered and called; bob's second call
# waits until alice's second call went out: the two runs overlap over their whole life
OVERLAP = {("alice", 1): ("bob", 1), ("bob", 2): ("alice", 2)}


def test_concurrent_runs_sharing_a_run_id_keep_their_own_blocks() -> None:
    memory = PydanticAIMemory(users_store(), AGENT, sessions=lambda ctx: [ctx.deps])
    gate = Gate(OVERLAP)
    agent = agent_for(memory, gate)

    async def main() -> None:
        async def run(user: str) -> None:
            await agent.run(question(user), deps=user, run_id="turn-1")

        await asyncio.wait_for(asyncio.gather(run("alice"), run("bob")), 20)

    asyncio.run(main())
    assert_own_blocks(gate, 4)
    assert memory.runs == {}


def test_streamed_and_iterated_runs_sharing_a_run_id() -> None:
    memory = PydanticAIMemory(users_store(), AGENT, sessions=lambda ctx: [ctx.deps])
    gate = Gate(OVERLAP)
    agent = agent_for(memory, gate)

    async def main() -> None:
        async def iterated(user: str) -> None:
            async with agent.iter(question(user), deps=user, run_id="same") as run:
                async for _ in run:
                    pass

        async def streamed(user: str) -> None:
            async with agent.run_stream(question(user), deps=user, run_id="same") as r:
                async for _ in r.stream_text():
                    pass

        await asyncio.wait_for(asyncio.gather(iterated("alice"), streamed("bob")), 20)

    asyncio.run(main())
    assert len(gate.calls) >= 3
    for who, step, text in gate.calls:
        other = "bob" if who == "alice" else "alice"
        assert BLOCK in text and PIN[who] in text and PIN[other] not in text, (who, step)
    assert memory.runs == {}


def test_interleaved_iter_runs_in_one_task() -> None:
    """Two ``agent.iter`` runs driven alternately by one task (no task boundary between
    them, so nothing task- or context-local tells them apart), with the same run_id.

    The second, entered inside the first's context, is a ``sub_turn`` (no block of its
    own, as a run a tool starts); the first keeps its block on all its requests."""
    memory = PydanticAIMemory(users_store(), AGENT, sessions=lambda ctx: [ctx.deps])
    gate = Gate({})
    agent = agent_for(memory, gate)

    async def main() -> None:
        async with (
            agent.iter(question("alice"), deps="alice", run_id="r") as r1,
            agent.iter(question("bob"), deps="bob", run_id="r") as r2,
        ):
            runs = [r1.__aiter__(), r2.__aiter__()]
            done = [False, False]
            while not all(done):
                for i, it in enumerate(runs):
                    if not done[i]:
                        try:
                            await it.__anext__()
                        except StopAsyncIteration:
                            done[i] = True

    asyncio.run(main())
    assert len(gate.calls) == 4
    for who, step, text in gate.calls:
        if who == "alice":
            assert BLOCK in text and PIN["alice"] in text, (who, step, text)
        assert PIN["bob" if who == "alice" else "alice"] not in text, (who, step, text)
    assert memory.runs == {}


def test_child_run_with_the_parents_run_id_leaves_the_parents_block() -> None:
    """A tool that runs an agent with the parent's ``run_id``: the child is its own turn,
    and the parent's next request still carries the parent's block."""
    memory = PydanticAIMemory(users_store(), AGENT, sessions=lambda ctx: [ctx.deps])
    prompts: list[str] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(newest_prompt(messages))
        asks = info.function_tools and not any(isinstance(m, ModelResponse) for m in messages)
        return ModelResponse(parts=[ToolCallPart("delegate", {})] if asks else [TextPart("ok")])

    child = Agent(FunctionModel(model), deps_type=str, capabilities=[memory.capability()])
    parent = Agent(FunctionModel(model), deps_type=str, capabilities=[memory.capability()])

    @parent.tool
    async def delegate(ctx: RunContext[str]) -> str:
        """Ask the child agent."""
        r = await child.run(question(ctx.deps), deps=ctx.deps, run_id=ctx.run_id)
        return r.output

    asyncio.run(parent.run(question("alice"), deps="alice", run_id="turn-1"))
    assert len(prompts) == 3  # parent asks the tool, the child answers, the parent answers
    assert BLOCK in prompts[0] and PIN["alice"] in prompts[0]
    assert BLOCK in prompts[2] and PIN["alice"] in prompts[2], prompts[2]
    assert all(PIN["bob"] not in p for p in prompts)
    assert memory.runs == {}


def test_runs_with_distinct_ids_unchanged() -> None:
    """The default (a fresh run_id per run): concurrent users, their own blocks."""
    memory = PydanticAIMemory(users_store(), AGENT, sessions=lambda ctx: [ctx.deps])
    gate = Gate(OVERLAP)
    agent = agent_for(memory, gate)

    async def main() -> list[Any]:
        return await asyncio.wait_for(
            asyncio.gather(*(agent.run(question(u), deps=u) for u in ("alice", "bob"))), 20
        )

    asyncio.run(main())
    assert_own_blocks(gate, 4)
    assert memory.runs == {}
