"""The tool-loop adapter (adapters/loop.py) against a real SQLite store."""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, MemoryInjectConfig, TurnOrigin

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import MemoryLoop, current_turn, has_block
else:
    from memory_inject.adapters import MemoryLoop, current_turn, has_block
from memory_inject.config import GovernanceConfig, TrivialPromptConfig
from memory_inject.profile import resolve_profile
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401

QUESTIONS = (
    "where do production deploys go?",
    "when is the daily standup now?",
    "can the prod-3 deploy wait until Friday?",
    "who approves deploys to prod-3?",
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / ".memory" / "memory.db")
    s.store("deploy_target", "Production deploys go to prod-3 (eu-west-1).", "core")
    s.store("standup", "The daily standup moved to 10:00 CET.", "daily")
    s.store("approver", "Dana approves every deploy to prod-3.", "core")
    s.store(
        "friday_chat",
        "We said the prod-3 deploy can wait until Friday.",
        "conversation",
        session_id="cli_main",
    )
    yield s
    s.close()


@pytest.fixture
def agent() -> AgentConfig:
    return AgentConfig(agent="alice")


def user(text: str, api: str = "openai") -> dict[str, Any]:
    if api == "anthropic":
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"role": "user", "content": text}


def assistant(text: str, api: str = "openai") -> dict[str, Any]:
    if api == "anthropic":
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return {"role": "assistant", "content": text}


class TestPrepare:
    def test_the_block_goes_on_the_users_message_and_the_query_is_its_raw_text(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """One-shot prepare recalls with the user's text and prefixes the block to it."""
        loop = MemoryLoop(store, agent)
        history = [{"role": "system", "content": "sys"}, user(QUESTIONS[0])]
        with recording() as rec:
            out = call(loop, "prepare", history, sessions=["cli_main"])
        assert out[-1]["content"].startswith("[Memory context]\n- deploy_target: ")
        assert out[-1]["content"].endswith("[/Memory context]\n\n" + QUESTIONS[0])
        assert [QUESTIONS[0]] == [e.query_summary for e in rec.events]
        assert ("interactive", "cli", "alice") == (
            rec.events[0].origin,
            rec.events[0].channel,
            rec.events[0].agent_alias,
        )

    def test_an_explicit_query_replaces_the_message_text(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """query= is what is recalled against; the message keeps its own text."""
        loop = MemoryLoop(store, agent)
        with recording() as rec:
            out = call(loop, "prepare", [user("[2026-06-01 10:00] hi")], query="daily standup time")
        assert ["daily standup time"] == [e.query_summary for e in rec.events]
        assert "- standup: " in out[0]["content"]

    def test_the_input_list_is_never_mutated(self, store: SQLiteStore, agent: AgentConfig) -> None:
        """prepare returns a new list; the caller's messages stay byte for byte."""
        history = [{"role": "system", "content": "sys"}, user(QUESTIONS[0])]
        before = copy.deepcopy(history)
        call(MemoryLoop(store, agent), "prepare", history)
        assert before == history

    def test_no_user_message_means_no_render_and_no_event(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Without a user message nothing is recalled (zeroclaw's "no user message" skip)."""
        with recording() as rec:
            out = call(MemoryLoop(store, agent), "prepare", [{"role": "system", "content": "sys"}])
        assert ([{"role": "system", "content": "sys"}], []) == (out, rec.events)

    def test_suppress_and_trivial_prompts_skip_without_an_event(self, store: SQLiteStore) -> None:
        """The core policy's skips (suppressed, trivial_prompt) send no event."""
        cfg = AgentConfig(
            agent="a", memory=MemoryInjectConfig(trivial_prompt=TrivialPromptConfig(enabled=True))
        )
        loop = MemoryLoop(store, cfg)
        with recording() as rec:
            suppressed = call(loop, "inject", [user(QUESTIONS[0])], suppress=True)
            trivial = call(loop, "inject", [user("ok")])
        assert [] == rec.events
        assert ("suppressed", "trivial_prompt") == (suppressed.policy.reason, trivial.policy.reason)
        assert ("", "") == (suppressed.block, trivial.block)


class TestPromptCacheStability:
    @pytest.mark.parametrize("placement", ["prefix_user", "message"])
    @pytest.mark.parametrize("api", ["openai", "anthropic"])
    def test_earlier_messages_are_byte_identical_from_turn_to_turn(
        self, store: SQLiteStore, agent: AgentConfig, placement: Any, api: Any
    ) -> None:
        """Each request starts with the exact bytes of the previous one; the system is untouched."""
        loop = MemoryLoop(store, agent, placement=placement, api=api)
        system = {"role": "system", "content": "You are the deploy assistant."}
        history: list[dict[str, Any]] = [system] if api == "openai" else []
        previous: list[Any] | None = None
        for n, question in enumerate(QUESTIONS):
            history = [*history, user(question, api)]
            with loop.turn(sessions=["cli_main"]):
                sent = call(loop, "prepare", history)
                again = call(loop, "prepare", sent)  # a later model call of the same tool loop
            assert json.dumps(sent) == json.dumps(again)
            if previous is not None:
                assert json.dumps(previous) == json.dumps(sent[: len(previous)])
            assert has_block(sent, api=api)
            previous = sent
            history = [*sent, assistant(f"answer {n}", api)]
        if api == "openai":
            assert system == previous[0]  # type: ignore[index]
        blocks = [m for m in previous or [] if "[Memory context]" in json.dumps(m)]
        assert len(QUESTIONS) == len(blocks)


class TestTurns:
    def test_a_nested_turn_is_a_sub_turn_with_no_block_and_no_event(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A turn started inside a turn is SUB_TURN: its messages come back unchanged, silently."""
        loop = MemoryLoop(store, agent)
        child_history = [user(QUESTIONS[2])]
        with recording() as rec, loop.turn(sessions=["cli_main"]) as outer:
            parent = call(loop, "prepare", [user(QUESTIONS[0])])
            with loop.turn(sessions=["cli_main"]) as inner:
                child = call(loop, "prepare", child_history)
        assert (TurnOrigin.INTERACTIVE, TurnOrigin.SUB_TURN) == (outer.origin, inner.origin)
        assert child_history == child
        assert has_block(parent)
        assert [outer.turn_id] == [e.turn_id for e in rec.events]
        assert "sub_turn" == inner.injection.policy.reason  # type: ignore[union-attr]

    def test_another_loops_prepare_inside_a_turn_is_a_sub_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A sub-agent with its own loop, called inside the parent's turn, gets no block."""
        parent, sub_agent = MemoryLoop(store, agent), MemoryLoop(store, agent)
        with recording() as rec, parent.turn():
            result = call(sub_agent, "inject", [user(QUESTIONS[0])])
        assert ("", TurnOrigin.SUB_TURN) == (result.block, result.injection.origin)
        assert [] == rec.events

    def test_wrap_marks_each_call_and_nested_calls_are_sub_turns(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """@loop.wrap runs the function in a turn; a wrapped call inside it is a sub-turn."""
        loop = MemoryLoop(store, agent)
        seen: list[TurnOrigin] = []

        @loop.wrap(sessions=["cli_main"])
        def agent_turn(text: str, nested: bool = False) -> list[Any]:
            seen.append(current_turn().origin)  # type: ignore[union-attr]
            out: list[Any] = call(loop, "prepare", [user(text)])
            if nested:
                agent_turn(QUESTIONS[1])
            return out

        with recording() as rec:
            out = agent_turn(QUESTIONS[0], nested=True)
        assert [TurnOrigin.INTERACTIVE, TurnOrigin.SUB_TURN] == seen
        assert has_block(out) and 1 == len(rec.events)
        assert current_turn() is None

    def test_async_turns_and_tasks_inherit_the_mark(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Under aturn, tasks spawned by the turn are sub-turns; the turn itself injects."""
        loop = MemoryLoop(store, agent)

        @loop.wrap
        async def child() -> list[Any]:
            return await loop.aprepare([user(QUESTIONS[1])])

        async def main() -> tuple[list[Any], list[list[Any]]]:
            async with loop.aturn(sessions=["cli_main"]):
                own = await loop.aprepare([user(QUESTIONS[0])])
                children = await asyncio.gather(child(), child())
            return own, list(children)

        with recording() as rec:
            own, children = asyncio.run(main())
        assert has_block(own)
        assert [[user(QUESTIONS[1])]] * 2 == children
        assert 1 == len(rec.events)

    def test_turn_settings_are_refused_by_prepare_inside_a_turn(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Inside loop.turn() the origin and scopes come from turn(), not prepare()."""
        loop = MemoryLoop(store, agent)
        with loop.turn(), pytest.raises(TypeError, match="pass \\['origin'\\] to turn"):
            call(loop, "prepare", [user("q")], origin=TurnOrigin.CRON)


class TestIdempotence:
    def test_retrying_prepare_does_not_double_the_block(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A model-switch retry with the prepared list adds nothing and recalls nothing."""
        for placement in ("prefix_user", "message"):
            loop = MemoryLoop(store, agent, placement=placement)
            with recording() as rec:
                once = call(loop, "prepare", [user(QUESTIONS[0])])
                twice = call(loop, "prepare", once)
            assert once == twice
            assert 1 == json.dumps(twice).count("[Memory context]")
            assert 1 == len(rec.events)

    def test_inside_a_turn_later_calls_place_the_same_block_without_recalling(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """The first prepare of a turn renders; the next ones reuse its block."""
        loop = MemoryLoop(store, agent)
        history = [user(QUESTIONS[0])]
        with recording() as rec, loop.turn() as turn:
            first = call(loop, "prepare", history)
            second = call(loop, "prepare", history)
        assert first == second
        assert turn.block and 1 == len(rec.events)


class TestFailures:
    def test_a_failing_store_gives_the_messages_back_and_one_failed_event(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A store that raises never fails the turn: no block, one event with success False."""
        store.close()
        loop = MemoryLoop(store, agent, autosave=True)
        history = [user(QUESTIONS[0])]
        with recording() as rec:
            result = call(loop, "inject", history, sessions=["cli_main"])
            aresult = asyncio.run(loop.ainject(history, sessions=["cli_main"]))
        assert (history, history) == (result.messages, aresult.messages)
        assert [False, False] == [e.success for e in rec.events]
        assert "closed" in (rec.events[0].error or "")
        assert "autosave_failed" in (result.injection.error or "")

    @pytest.mark.parametrize("messages", ["where do deploys go?", None, 5])
    def test_messages_that_are_not_a_list_are_refused(
        self, store: SQLiteStore, agent: AgentConfig, messages: Any
    ) -> None:
        """A prompt passed alone came back as a list of its letters (and ``None`` raised
        a bare ``len()`` error): the caller's mistake, named."""
        loop = MemoryLoop(store, agent)
        with pytest.raises(TypeError, match="'messages' must be a list of messages"):
            loop.prepare(messages)
        with pytest.raises(TypeError, match="'messages' must be a list of messages"):
            asyncio.run(loop.aprepare(messages))


class TestAutosave:
    def test_the_users_message_is_saved_under_user_msg_and_never_injected(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Autosave writes user_msg_<turn_id> in the first scope; the skip set keeps it out."""
        loop = MemoryLoop(store, agent, autosave=True)
        with loop.turn(sessions=[None, "cli_main"], turn_id="t1"):
            call(loop, "prepare", [user("Remember that prod-3 deploys need Dana's approval.")])
        record = store.get("user_msg_t1")
        assert record is not None
        assert ("conversation", "cli_main") == (record.category, record.session_id)
        with recording() as rec:
            call(loop, "prepare", [user("prod-3 deploys approval")], sessions=["cli_main"])
        assert "user_msg_t1" not in rec.events[0].rendered_keys
        assert "skip:user_autosave" == rec.events[0].dropped.get("user_msg_t1")

    def test_short_messages_blocks_and_scheduled_origins_are_not_saved(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """Under 20 characters, a block-prefixed text or a cron turn: nothing is stored."""
        loop = MemoryLoop(store, agent, autosave=True)
        before = store.count()
        call(loop, "prepare", [user("short one")], turn_id="a")
        call(
            loop,
            "prepare",
            [user("[Memory context]\nx\n[/Memory context]\n\nlong enough text here")],
            turn_id="b",
        )
        call(
            loop,
            "prepare",
            [user("a cron prompt long enough to be saved")],
            origin="cron",
            turn_id="c",
        )
        assert before == store.count()

    def test_the_profile_is_stamped_when_governance_is_on(
        self, store: SQLiteStore, tmp_path: Path
    ) -> None:
        """With governance enabled the autosaved record carries the cwd's profile."""
        (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo-pkg"\n')
        cfg = AgentConfig(
            agent="a", memory=MemoryInjectConfig(governance=GovernanceConfig(enabled=True))
        )
        loop = MemoryLoop(store, cfg, autosave=True, cwd=tmp_path)
        call(loop, "prepare", [user("Remember the prod-3 deploy window is Friday.")], turn_id="g1")
        record = store.get("user_msg_g1")
        assert resolve_profile(tmp_path).profile_id == record.profile_id  # type: ignore[union-attr]


class TestRenderBugs:
    def test_a_render_that_raises_is_reported_not_raised(
        self, store: SQLiteStore, agent: AgentConfig, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Even a bug inside the render leaves the turn running, with the error on the result."""
        _core = importlib.import_module("memory_inject.adapters._core")

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("stage bug")

        monkeypatch.setattr(_core, "render_turn", broken)
        monkeypatch.setattr(_core, "arender_turn", broken)
        history = [user(QUESTIONS[0])]
        loop = MemoryLoop(store, agent)
        result = call(loop, "inject", history)
        aresult = asyncio.run(loop.ainject(history))
        assert (history, history) == (result.messages, aresult.messages)
        assert aresult.injection is not None
        assert "render_failed: RuntimeError: stage bug" == result.injection.error
        assert "render_failed: RuntimeError: stage bug" == aresult.injection.error


class TestArguments:
    def test_a_bare_string_is_not_taken_for_a_list_of_scopes(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """sessions="cli_main" is a TypeError, not eight one-letter scopes."""
        loop = MemoryLoop(store, agent)
        with pytest.raises(TypeError, match="'sessions' must be a list of session ids"):
            call(loop, "prepare", [user("q")], sessions="cli_main")
        with (
            pytest.raises(TypeError, match="'sessions' must be a list"),
            loop.turn(sessions="cli_main"),
        ):
            pass  # pragma: no cover

    def test_unknown_placement_is_refused_at_construction(
        self, store: SQLiteStore, agent: AgentConfig
    ) -> None:
        """A typo in placement fails when the loop is built, not mid-turn."""
        with pytest.raises(ValueError, match="'placement' must be one of"):
            MemoryLoop(store, agent, placement="system")  # type: ignore[arg-type]
