"""A Responses tool loop on server-side state ends its turn at the model's text answer.

With ``previous_response_id`` (or ``conversation=``) a host sends only what is new: the
first call the user's question, the next one only the tool's ``function_call_output``.
That request has no user message, so the wrapper tied it to no turn, and the model's
text answer to it closed nothing: the turn stayed open, and the user's next question,
sent from the same code, was a ``sub_turn`` (no block, no recall). The same code on Chat
Completions, which resends the whole conversation, closed the turn. A tool output is now
tied to the turn whose reply asked for that call (by the call's id), so it continues the
turn and its answer settles it, as a whole-history request does. Real SDK clients, sync
and async, plain and streamed, against a scripted Responses server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from openai import AsyncOpenAI, OpenAI

from memory_inject import AgentConfig, InMemoryStore
from tests import _sse
from tests._frameworks import events
from tests._stream_drivers import RESPONSES_TOOLS, responses_result

if TYPE_CHECKING:
    from adapters.loop import current_turn
    from adapters.openai_client import wrap_openai
else:
    from memory_inject.adapters.loop import current_turn
    from memory_inject.adapters.openai_client import wrap_openai

Q1 = "where do production deploys go?"
Q2 = "who approves production deploys?"
CHILD = "summarise the incident report"
STYLES = ["plain", "create", "stream"]
STATES = ["previous_response_id", "conversation"]
BLOCK = "[Memory context]"


class Server(_sse.ResponsesStreams):
    """Asks for the tool ``calls`` times in a row for a question sent with tools, then
    answers with text (a tool output, or a question without tools, gets text at once)."""

    def __init__(self, calls: int = 1) -> None:
        super().__init__()
        self.calls = calls
        self._left = 0

    def wants_call(self, body: dict[str, Any]) -> bool:
        if not body.get("tools"):
            return False
        if super().wants_call(body):
            self._left = self.calls
        self._left -= 1
        return self._left >= 0


@pytest.fixture
def store() -> InMemoryStore:
    s = InMemoryStore()
    s.store("deploy_target", "Production deploys go to prod-3.", session_id="ana")
    s.store("approver", "Dana approves every production deploy.", session_id="ana")
    return s


@pytest.fixture(autouse=True)
def no_turn_left_open() -> Iterator[None]:
    """Every loop here ends with a text answer, so no turn may stay open after a test."""
    yield
    assert current_turn() is None


def _state(state: str, prev: str | None) -> dict[str, Any]:
    if state == "conversation":
        return {"conversation": "conv_1"}
    return {"previous_response_id": prev} if prev else {}


def _kw(state: str, prev: str | None, new: Any, tools: bool) -> dict[str, Any]:
    extra = {"tools": RESPONSES_TOOLS} if tools else {}
    return {"model": "m", "input": new, **_state(state, prev), **extra}


def _calls(output: list[Any]) -> list[tuple[str, str]]:
    return [(o.call_id, o.name) for o in output if o.type == "function_call"]


def _method(client: Any, style: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The SDK method a style calls, and what it adds to the keywords."""
    if style == "stream":
        return client.responses.stream, {}
    return client.responses.create, ({"stream": True} if style == "create" else {})


def _read(style: str, got: Any) -> Any:
    """The whole response of a call, read the way its style is read."""
    if style == "create":
        with got as stream:
            return next(e.response for e in stream if e.type == "response.completed")
    if style == "stream":
        with got as stream:
            return stream.get_final_response()
    return got


async def _aread(style: str, got: Any) -> Any:
    if style == "create":
        async with got as stream:
            return next(
                [e.response async for e in stream if e.type == "response.completed"].__iter__()
            )
    if style == "stream":
        async with got as stream:
            return await stream.get_final_response()
    return got


def two_turns(client: Any, style: str, state: str, run_tool: Callable[[], None]) -> bool:
    """Q1 with tools, then only the tools' outputs until a text answer, then Q2: each
    call written out in this one frame, as straight-line host code makes them (a turn
    stays open only while the code that made its call runs). True: the turn was still
    open after the text answer."""
    fn, extra = _method(client, style)
    resp = _read(style, fn(**_kw(state, None, Q1, True), **extra))
    while calls := _calls(resp.output):
        run_tool()
        outputs = [responses_result(c) for c in calls]
        resp = _read(style, fn(**_kw(state, resp.id, outputs, True), **extra))
    open_after = current_turn() is not None
    _read(style, fn(**_kw(state, resp.id, Q2, False), **extra))
    return open_after


async def atwo_turns(client: Any, style: str, state: str) -> bool:
    """The async twin of :func:`two_turns` (its tools run nothing)."""
    fn, extra = _method(client, style)
    got = fn(**_kw(state, None, Q1, True), **extra)
    resp = await _aread(style, got if style == "stream" else await got)
    while calls := _calls(resp.output):
        outputs = [responses_result(c) for c in calls]
        got = fn(**_kw(state, resp.id, outputs, True), **extra)
        resp = await _aread(style, got if style == "stream" else await got)
    open_after = current_turn() is not None
    got = fn(**_kw(state, resp.id, Q2, False), **extra)
    await _aread(style, got if style == "stream" else await got)
    return open_after


def child_turn(client: Any) -> None:
    """An agent a tool runs: its own question and server-side tool loop, in its frame."""
    resp = client.responses.create(model="m", input=CHILD, tools=RESPONSES_TOOLS)
    while calls := _calls(resp.output):
        outputs = [responses_result(c) for c in calls]
        resp = client.responses.create(
            model="m", input=outputs, tools=RESPONSES_TOOLS, previous_response_id=resp.id
        )


def _wrapped(server: Server, store: InMemoryStore, *, aio: bool) -> Any:
    if aio:
        sdk: Any = AsyncOpenAI(api_key="k", http_client=server.aclient())
    else:
        sdk = OpenAI(api_key="k", http_client=server.client())
    return wrap_openai(sdk, store, AgentConfig(agent="t"), sessions=["ana"])


def _asked(rec: Any) -> list[str]:
    return [e.query_summary for e in rec.recalls]


def _skipped(rec: Any) -> list[str]:
    return [str(e.origin) for e in rec.skips]


def _blocks(server: Server) -> list[int]:
    return [str(b["input"]).count(BLOCK) for b in server.bodies]


class TestTheAnswerToAToolOutputEndsTheTurn:
    @pytest.mark.parametrize("state", STATES)
    @pytest.mark.parametrize("style", STYLES)
    def test_sync(self, store: InMemoryStore, style: str, state: str) -> None:
        """Q1 (a tool call), the tool's output alone (a text answer), then Q2: the turn
        closed after the answer, and Q2 is a turn of its own, with its own recall."""
        server = Server()
        client = _wrapped(server, store, aio=False)
        with events() as rec:
            open_after = two_turns(client, style, state, lambda: None)
        assert (False, [Q1, Q2], []) == (open_after, _asked(rec), _skipped(rec))
        assert [1, 0, 1] == _blocks(server)

    @pytest.mark.parametrize("state", STATES)
    @pytest.mark.parametrize("style", STYLES)
    def test_async(self, store: InMemoryStore, style: str, state: str) -> None:
        """The async twin: the same three requests, the same two recalls."""
        server = Server()

        async def main() -> bool:
            return await atwo_turns(_wrapped(server, store, aio=True), style, state)

        with events() as rec:
            open_after = asyncio.run(main())
        assert (False, [Q1, Q2], []) == (open_after, _asked(rec), _skipped(rec))
        assert [1, 0, 1] == _blocks(server)

    @pytest.mark.parametrize("style", STYLES)
    def test_a_chain_of_tool_calls_keeps_it_open_to_the_end(
        self, store: InMemoryStore, style: str
    ) -> None:
        """The model asks for a tool three times in a row: the turn stays open while each
        tool runs, and ends at the text answer."""
        server = Server(calls=3)
        client = _wrapped(server, store, aio=False)
        open_in_tool: list[bool] = []
        with events() as rec:
            open_after = two_turns(
                client,
                style,
                "previous_response_id",
                lambda: open_in_tool.append(current_turn() is not None),
            )
        assert [True, True, True] == open_in_tool
        assert (False, [Q1, Q2], []) == (open_after, _asked(rec), _skipped(rec))
        assert [1, 0, 0, 0, 1] == _blocks(server)

    def test_an_agent_in_a_tool_ends_its_own_turn_not_the_outer_one(
        self, store: InMemoryStore
    ) -> None:
        """A tool runs an agent with its own server-side tool loop (a sub_turn): that
        loop's answer ends the sub_turn only, and the outer turn is open again."""
        server = Server()
        client = _wrapped(server, store, aio=False)
        outer_open: list[bool] = []

        def tool() -> None:
            outer = current_turn()
            child_turn(client)
            outer_open.append(outer is not None and current_turn() is outer)

        with events() as rec:
            open_after = two_turns(client, "plain", "previous_response_id", tool)
        assert ([True], False) == (outer_open, open_after)
        assert ([Q1, Q2], ["sub_turn"]) == (_asked(rec), _skipped(rec))

    def test_a_tool_output_for_a_call_it_never_saw_closes_nothing(
        self, store: InMemoryStore
    ) -> None:
        """A tool output whose call this wrapper did not see (another process made it)
        is no step of the open turn: that turn stays open until its own answer."""
        server = Server()
        client = _wrapped(server, store, aio=False)
        resp = client.responses.create(model="m", input=Q1, tools=RESPONSES_TOOLS)
        stranger = responses_result(("call_elsewhere", "lookup"))
        client.responses.create(model="m", input=[stranger], previous_response_id="resp_x")
        assert current_turn() is not None
        outputs = [responses_result(c) for c in _calls(resp.output)]
        client.responses.create(model="m", input=outputs, previous_response_id=resp.id)
        assert current_turn() is None

    def test_a_question_sent_with_the_tools_outputs_is_the_next_turn(
        self, store: InMemoryStore
    ) -> None:
        """The user's next question sent along with the tools' outputs (the host answers
        the calls and asks on in one request) is the next turn of that conversation, with
        its recall, not an agent nested in the open turn."""
        server = Server()
        client = _wrapped(server, store, aio=False)
        with events() as rec:
            resp = client.responses.create(model="m", input=Q1, tools=RESPONSES_TOOLS)
            outputs: list[Any] = [responses_result(c) for c in _calls(resp.output)]
            client.responses.create(
                model="m",
                input=[*outputs, {"role": "user", "content": Q2}],
                previous_response_id=resp.id,
            )
            open_after = current_turn() is not None
        assert (False, [Q1, Q2], []) == (open_after, _asked(rec), _skipped(rec))
        assert [1, 1] == _blocks(server)
