"""Which model calls of the Agents SDK are one turn: the calls of one ``Runner.run``, over a
chat of many runs (issue 29, thirtieth round).

The filter told a run's calls apart by their input: a handoff whose input filter dropped
history (``handoff_filters.remove_all_tools``, or keeping the question alone) was the run's
turn only while the conversation before the question was the same as the triage call's, so
from the second turn of a chat on (a session, or ``to_input_list()`` history) the handoff
target recalled again: two events, the user's message autosaved twice. And a handoff was
recognised by the agent graph in the same trace, so with agents that hand off both ways a
new ``Runner.run`` of a repeated question was taken for the last run's handoff: no event and
the last run's block, a fact forgotten or rewritten since included. The run is now the
SDK's own (the ``RunContextWrapper`` it passes to all of a run's calls). Real SDK objects
against a scripted Responses server (JSON, or SSE when streamed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from agents import (
    Agent,
    HandoffInputData,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
    function_tool,
    handoff,
    set_trace_processors,
    set_tracing_disabled,
    trace,
)
from agents.extensions import handoff_filters
from openai import AsyncOpenAI

from tests import _frameworks as fw
from tests._sse import sse

if TYPE_CHECKING:
    from adapters.openai_agents import AgentsMemory
else:
    from memory_inject.adapters.openai_agents import AgentsMemory

MODES = ["async", "sync", "streamed"]
PROD3, PROD4 = "prod-3 (eu-west-1)", "prod-4 (us-east-2)"


def question_only(data: HandoffInputData) -> HandoffInputData:
    """A handoff filter that passes on the newest user message alone (no history)."""
    history = data.input_history
    items = [{"role": "user", "content": history}] if isinstance(history, str) else history
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    return data.clone(input_history=tuple(users[-1:]), pre_handoff_items=(), new_items=())


FILTERS: dict[str, Any] = {
    "remove_all_tools": handoff_filters.remove_all_tools,
    "question_only": question_only,
    "no_filter": None,
}


@function_tool
def lookup() -> str:
    """Look up the runbook."""
    return "the prod runbook"


class HandoffServer:
    """A Responses endpoint: a request offering a ``transfer_to_*`` tool whose input ends with
    the user's message hands off; one offering ``lookup`` calls it once per user message;
    any other request is answered. Streams when asked."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def output(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        items = body["input"]
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items
        last = items[-1]
        names = [t["name"] for t in body.get("tools", []) if t["name"].startswith("transfer_to")]
        tools = [t["name"] for t in body.get("tools", [])]
        if names and last.get("role") == "user":
            return self.call(names[0], n)
        turn = items[max(i for i, it in enumerate(items) if it.get("role") == "user") :]
        if "lookup" in tools and not any(it.get("name") == "lookup" for it in turn):
            return self.call("lookup", n)
        text = {"type": "output_text", "text": f"answer {n}", "annotations": []}
        return {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }

    def call(self, name: str, n: int) -> dict[str, Any]:
        """A call of the tool ``name`` (a handoff is one)."""
        return {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": name,
            "arguments": "{}",
            "status": "completed",
        }

    def response(self, n: int, output: list[Any], status: str) -> dict[str, Any]:
        tokens = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
        details = {"input_tokens_details": {"cached_tokens": 0}}
        usage = {**tokens, **details, "output_tokens_details": {"reasoning_tokens": 0}}
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": "gpt-4o-mini",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        n = len(self.requests)
        item = self.output(body, n)
        if not body.get("stream"):
            return httpx2.Response(200, json=self.response(n, [item], "completed"))
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": self.response(n, [], "in_progress")},
            {"type": "response.output_item.added", "item": item, "output_index": 0},
            {"type": "response.output_item.done", "item": item, "output_index": 0},
            {"type": "response.completed", "response": self.response(n, [item], "completed")},
        ]
        for i, event in enumerate(events):
            event["sequence_number"] = i
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, content=sse([(e["type"], e) for e in events]), headers=headers)

    def model(self) -> OpenAIResponsesModel:
        """A model of this server (a client of its own: each run may have its own loop)."""
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        client = AsyncOpenAI(api_key="test", http_client=http)
        return OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    yield from fw.facts_store(tmp_path)


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(True)


def chat(
    agent: Agent[Any],
    memory: AgentsMemory,
    questions: list[str],
    *,
    mode: str,
    history: str,
    outer_trace: bool = False,
    before: Callable[[int], None] = lambda _: None,
) -> None:
    """One ``Runner.run`` (``run_sync``, ``run_streamed``) per question, as a host's chat
    does: history from a ``SQLiteSession``, ``to_input_list()``, or none (``"none"``), all
    in one ``trace()`` when ``outer_trace``; ``before(i)`` runs before turn ``i``."""
    session = SQLiteSession("chat") if history == "session" else None
    past: list[Any] = []

    def turn_input(q: str) -> Any:
        return q if history != "to_input_list" else [*past, {"role": "user", "content": q}]

    def keep(result: Any) -> None:
        if history == "to_input_list":
            past[:] = result.to_input_list()

    def tracing() -> Any:
        return trace("support chat") if outer_trace else nullcontext()

    if mode == "sync":
        with tracing():
            for i, q in enumerate(questions):
                before(i)
                # run_sync runs on the thread's loop and shuts its async generators down
                # after each run: a loop per run.
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                try:
                    config = memory.run_config()
                    keep(Runner.run_sync(agent, turn_input(q), session=session, run_config=config))
                finally:
                    loop.close()
                    asyncio.set_event_loop(None)
        return

    async def go() -> None:
        with tracing():
            for i, q in enumerate(questions):
                before(i)
                config = memory.run_config()
                if mode == "async":
                    keep(await Runner.run(agent, turn_input(q), session=session, run_config=config))
                    continue
                result = Runner.run_streamed(
                    agent, turn_input(q), session=session, run_config=config
                )
                async for _ in result.stream_events():
                    pass
                keep(result)

    asyncio.run(go())


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of each user message of a request, in order."""
    items = body["input"]
    if isinstance(items, str):
        return [items]
    return [fw.user_text(i) for i in items if i.get("role") == "user"]


def autosaved(store: Any) -> list[str]:
    """The user messages autosaved, oldest first."""
    rows = [r for r in store.list() if r.key.startswith("user_msg_")]
    return sorted(r.content for r in rows)


class TestAFilteredHandoffEveryTurn:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("history", ["session", "to_input_list"])
    @pytest.mark.parametrize("name", list(FILTERS))
    def test_one_recall_and_the_block_in_both_agents_each_turn(
        self, store: Any, mode: str, history: str, name: str
    ) -> None:
        """Three turns of triage handing off to billing, which runs a tool (the handoff
        filtered or not): one ``memory_recall`` per turn, each turn's three requests carry
        that turn's block once, in front of its question, and the user's message is
        autosaved once (it was recalled, and saved, again by billing from turn 2 on)."""
        server = HandoffServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"], autosave=True)
        billing = Agent(
            name="billing", instructions="billing", model=server.model(), tools=[lookup]
        )
        target = billing if FILTERS[name] is None else handoff(billing, input_filter=FILTERS[name])
        triage = Agent(
            name="triage", instructions="triage", model=server.model(), handoffs=[target]
        )
        questions = list(fw.QUESTIONS[:3])
        with fw.events() as rec:
            chat(triage, memory, questions, mode=mode, history=history)
        assert (questions, []) == ([e.query_summary for e in rec.recalls], rec.skips)
        assert 3 == len({e.turn_id for e in rec.recalls})
        bodies = server.requests  # per turn: triage hands off, billing looks up, answers
        assert ["triage", "billing", "billing"] * 3 == [b["instructions"] for b in bodies]
        for i, body in enumerate(bodies):
            *earlier, newest = user_texts(body)
            assert newest.startswith(fw.BLOCK_START) and newest.endswith(questions[i // 3])
            assert 1 == newest.count(fw.BLOCK_START)
            assert all(fw.BLOCK_START not in t for t in earlier)
            assert newest == user_texts(bodies[i - i % 3])[-1]
        assert sorted(questions) == autosaved(store)


class TestANewRunIsANewTurn:
    @pytest.fixture(params=["tracing_off", "outer_trace"])
    def outer_trace(self, request: pytest.FixtureRequest) -> bool:
        """Tracing off (each run a no-op trace of its own), or on (exporting nothing) with
        the whole chat in one ``trace()``, which every run then shares."""
        if request.param == "outer_trace":
            set_trace_processors([])
            set_tracing_disabled(False)
        return bool(request.param == "outer_trace")

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("history", ["none", "session"])
    def test_a_repeated_question_gets_the_store_as_it_is_now(
        self, store: Any, mode: str, history: str, outer_trace: bool
    ) -> None:
        """Triage and billing hand off to each other; the same question three times, the fact
        rewritten before turn 2 and forgotten before turn 3: each run recalls anew and sends
        the fact as it is then, never the last run's block."""
        server = HandoffServer()
        memory = AgentsMemory(store, fw.AGENT, sessions=["user_u1"])
        billing = Agent(name="billing", instructions="billing", model=server.model())
        triage = Agent(name="triage", instructions="triage", model=server.model())
        billing.handoffs, triage.handoffs = [triage], [billing]

        def before(i: int) -> None:
            if i == 1:
                store.store("deploy_target", f"Production deploys go to {PROD4}.", "core")
            if i == 2:
                assert store.forget("deploy_target")

        with fw.events() as rec:
            chat(
                triage,
                memory,
                [fw.QUESTIONS[0]] * 3,
                mode=mode,
                history=history,
                outer_trace=outer_trace,
                before=before,
            )
        assert 3 == len(rec.recalls) and [] == rec.skips
        assert 3 == len({e.turn_id for e in rec.recalls})
        rendered = [("deploy_target" in e.rendered_keys) for e in rec.recalls]
        assert [True, True, False] == rendered
        assert ["triage", "billing"] * 3 == [b["instructions"] for b in server.requests]
        facts = [(PROD3 in t, PROD4 in t) for t in (user_texts(b)[-1] for b in server.requests)]
        assert [(True, False)] * 2 + [(False, True)] * 2 + [(False, False)] * 2 == facts
