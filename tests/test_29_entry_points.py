"""The channel, direct, cron and daemon entry points, as a helper used them (round 25).

* ``""`` as a channel id or a direct session was one id for everyone, as ``None`` had been
  (Bob's block showed Alice's autosaved message): refused now.
* A ``CronJob`` built in code was not checked: ``uses_memory="false"`` (a true string) ran
  the job with memory.
* A turn of an origin the config disables still autosaved the user's message.
* ``"\\n[Memory context]..."`` passed the "never save a recall block" rule.
* ``heartbeat("")`` recalled on the wrapper's own words ("Heartbeat", "Task", "high").
"""

from __future__ import annotations

import asyncio
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject.config import parse_agent_config
from memory_inject.config.schema import CronJob
from memory_inject.policy import resolve_inject_policy
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from adapters import (
        AgentDirectAdapter,
        ChannelAdapter,
        CronAdapter,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        should_autosave,
    )
else:
    from memory_inject.adapters import (
        AgentDirectAdapter,
        ChannelAdapter,
        CronAdapter,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        should_autosave,
    )

MESSAGE: dict[str, Any] = {
    "channel": "slack",
    "sender": "u1",
    "text": "my salary is 180k and I am interviewing at Acme",
    "reply_target": "u1",
    "message_id": "m1",
    "history_key": "slack_u1",
}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SQLiteStore(tmp_path / "m.db")
    yield s
    s.close()


@pytest.mark.parametrize("field", ["channel", "sender", "message_id", "history_key"])
@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_channel_id_is_refused(field: str, blank: str) -> None:
    with pytest.raises(ValueError, match=f"InboundMessage.{field} must not be empty"):
        InboundMessage(**{**MESSAGE, field: blank})
    assert InboundMessage(**{**MESSAGE, field: 7}).message_id  # an int id is still one


@pytest.mark.parametrize("blank", ["", " \n"])
def test_a_blank_direct_session_is_refused(store: SQLiteStore, blank: str) -> None:
    adapter = AgentDirectAdapter(store, parse_agent_config({"agent": "bot"}), autosave=True)
    with pytest.raises(ValueError, match="'session_id' must be a non-empty str or None"):
        adapter.request("my salary is 180k and I am interviewing at Acme", session_id=blank)
    assert 0 == store.count()
    assert adapter.request("where do I interview?", session_id="s1").policy.inject


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"uses_memory": "false"}, "'uses_memory' must be true or false (got 'false')"),
        ({"id": None}, "'id' must be a non-empty string (got None)"),
        ({"prompt": "  "}, "'prompt' must be a non-empty string"),
    ],
)
def test_a_cron_job_built_in_code_is_checked_as_a_files_is(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"CronJob: {problem}")):
        CronJob(**{"id": "nightly", "name": "Nightly", "prompt": "summarise", **fields})
    assert CronJob(id="nightly", name="Nightly", prompt="summarise", uses_memory=False)


@pytest.mark.parametrize("origin", ["channel", "agent_direct"])
def test_a_disabled_origin_autosaves_nothing(store: SQLiteStore, origin: str) -> None:
    agent = parse_agent_config(
        {"agent": "bot", "memory": {"origins": {origin: {"enabled": False}}}}
    )
    if origin == "channel":
        turn: Any = ChannelAdapter(store, agent, channel_name="slack", autosave=True).handle(
            InboundMessage(**MESSAGE)
        )
    else:
        turn = AgentDirectAdapter(store, agent, autosave=True).request(
            MESSAGE["text"], session_id="s1"
        )
    assert ("origin_disabled", None) == (turn.policy.reason, turn.autosaved_key)
    assert 0 == store.count()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_suppressed_turn_autosaves_nothing(store: SQLiteStore, mode: str) -> None:
    """The spawn site opted out: no recall, and none of the turn's text is written either."""
    loop = MemoryLoop(store, parse_agent_config({"agent": "bot"}), api="openai", autosave=True)
    said = [{"role": "user", "content": "please do not remember: my password is hunter2"}]

    async def in_turn() -> Any:
        async with loop.aturn(sessions=["s1"], suppress=True) as turn:
            await loop.aprepare(said)
        return turn

    if mode == "sync":
        with loop.turn(sessions=["s1"], suppress=True) as turn:
            loop.prepare(said)
    else:
        turn = asyncio.run(in_turn())
    injection = turn.injection
    assert injection is not None
    assert ("suppressed", None) == (injection.policy.reason, injection.autosaved_key)
    assert 0 == store.count()


@pytest.mark.parametrize("lead", ["", "\n", "  ", "\r\n\t"])
def test_a_recall_block_is_never_autosaved_whatever_comes_before_it(lead: str) -> None:
    blob = lead + "[Memory context]\n- deploy: Production deploys go to prod-3.\n[/Memory context]"
    assert not should_autosave("channel", blob)
    assert should_autosave("channel", lead + "Production deploys go to prod-3 from now on.")


def test_a_heartbeat_with_nothing_to_ask_abstains(store: SQLiteStore) -> None:
    store.store("todo", "task list: renew the TLS certificate, high priority")
    store.store("ops", "normal operations resume after the maintenance window")
    daemon = DaemonAdapter(store, parse_agent_config({"agent": "bot"}))
    for args in [("",), ("   ",), ("👍",), ("", "high")]:
        turn = daemon.heartbeat(*args)
        assert turn.event is not None
        assert ("", "no_query_terms") == (turn.block, turn.event.abstained), args
    turn = daemon.heartbeat("renew the TLS certificate", "high")
    assert turn.query == "[Heartbeat Task | high] renew the TLS certificate"
    assert turn.event is not None
    assert turn.event.rendered_keys == ("todo",)


@pytest.mark.parametrize("way", ["threads", "tasks"])
def test_concurrent_turns_of_one_session_keep_every_decision(store: SQLiteStore, way: str) -> None:
    """``memory.sessions.record`` reads, merges and writes the session row: 12 concurrent
    turns of one session kept 2 to 5 of their 12 decisions."""
    agent = parse_agent_config(
        {"agent": "bot", "memory": {"sessions": {"record": True, "project": "p"}}}
    )
    api = AgentDirectAdapter(store, agent)
    n = 12
    if way == "threads":
        start = threading.Barrier(n)

        def go(i: int) -> Any:
            start.wait(10)
            return api.request(f"we agreed on item {i} #decision", session_id="s1")

        with ThreadPoolExecutor(n) as pool:
            turns = list(pool.map(go, range(n)))
    else:

        async def all_turns() -> list[Any]:
            return list(
                await asyncio.gather(
                    *(
                        api.arequest(f"we agreed on item {i} #decision", session_id="s1")
                        for i in range(n)
                    )
                )
            )

        turns = asyncio.run(all_turns())
    assert [t.error for t in turns if t.error] == []
    row = store.get("session:s1")
    assert row is not None and row.metadata is not None
    assert sorted(row.metadata["decisions"]) == sorted(
        f"we agreed on item {i} #decision" for i in range(n)
    )


def test_a_turn_names_each_of_its_failed_writes() -> None:
    """When the autosave and the session record both failed, the turn's ``error`` named the
    autosave only (documented: the session record's failure is on ``error`` too)."""

    class FullDisk(InMemoryStore):
        def store(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

    agent = parse_agent_config(
        {"agent": "bot", "memory": {"sessions": {"record": True, "project": "p"}}}
    )
    turn = AgentDirectAdapter(FullDisk(), agent, autosave=True).request(
        "we agreed to ship on friday #decision", session_id="s1"
    )
    assert turn.error == "autosave_failed: OSError: disk full; session_failed: OSError: disk full"


def test_common_mistakes_are_named(store: SQLiteStore) -> None:
    """Each was an AttributeError from inside the library (found by a helper)."""
    agent = parse_agent_config({"agent": "bot"})
    with pytest.raises(TypeError, match=r"pass the AgentConfig, not its \.memory"):
        ChannelAdapter(store, agent.memory, channel_name="slack")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"'config' must be a MemoryInjectConfig \(pass agent"):
        resolve_inject_policy("cron", has_session=False, config=agent)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'job' must be a CronJob"):
        CronAdapter(store, agent).run({"id": "a", "name": "b", "prompt": "c"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'channel_name' must be a non-empty str"):
        ChannelAdapter(store, agent, channel_name=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'session_id' must be a str or None"):
        AgentDirectAdapter(store, agent).request("x", session_id=5)  # type: ignore[arg-type]


def test_a_misspelt_option_fails_when_the_adapter_is_built(store: SQLiteStore) -> None:
    """``session=`` for ``sessions=`` was accepted: every run sessionless, every session's
    shared rows in every user's block (a helper's pydantic-ai agent showed Bob's memory to
    Alice)."""
    if TYPE_CHECKING:
        from adapters.openai_agents import AgentsMemory
        from adapters.pydantic_ai import PydanticAIMemory
    else:
        from memory_inject.adapters.openai_agents import AgentsMemory
        from memory_inject.adapters.pydantic_ai import PydanticAIMemory

    agent = parse_agent_config({"agent": "bot"})
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (PydanticAIMemory, {"session": ["a"]}, "'session' (did you mean 'sessions'?)"),
        (PydanticAIMemory, {"earlier_block": "keep"}, "(did you mean 'earlier_blocks'?)"),
        (AgentsMemory, {"session": ["a"]}, "'session' (did you mean 'sessions'?)"),
        (MemoryLoop, {"sessions": ["a"]}, "MemoryLoop takes sessions per turn"),
        (AgentDirectAdapter, {"autosav": True}, "(did you mean 'autosave'?)"),
    ]
    for cls, options, message in cases:
        with pytest.raises(TypeError, match=re.escape(message)):
            cls(store, agent, **options)
    assert PydanticAIMemory(store, agent, sessions=["a"]).sessions == ("a",)


def test_a_turn_cancelled_during_its_recall_still_announces_itself() -> None:
    """``asyncio.wait_for`` around a turn whose recall was slow: no event at all was sent
    (signals.md: exactly one per turn). It is now one failed recall, and the cancellation
    still reaches the host."""
    from memory_inject import MemoryEntry
    from memory_inject.testing import FixtureMemory, recording

    entry = MemoryEntry(
        "deploy_target", "Production deploys go to prod-3.", "core", None, score=0.9
    )
    loop = MemoryLoop(FixtureMemory({"u1": [entry]}, delay=0.5), parse_agent_config({"agent": "a"}))

    async def turn() -> Any:
        async with loop.aturn(sessions=["u1"]):
            return await loop.aprepare([{"role": "user", "content": "where do deploys go?"}])

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(turn(), 0.1)

    with recording() as rec:
        asyncio.run(main())
    assert [(e.success, e.error) for e in rec.events] == [
        (False, "cancelled: the turn was cancelled during recall")
    ]
