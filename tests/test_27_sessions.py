"""Issue 27, item 5: Today's Sessions in PI's line format, and the session records behind it.

PI (seeds 000, 002; spec 1.2 step 3 and 1.12) shows today's last 3 sessions as
``Recent sessions (YYYY-MM-DD):`` then ``- [project] name (tool1, tool2, tool3)``
with up to 2 decisions indented under each. :mod:`memory_inject.sessions`
writes those records; the adapters call it at each turn with ``preset: pi``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import MemoryEntry, render_memory_context
from memory_inject.config import AgentConfig, MemoryInjectConfig, parse_agent_config
from memory_inject.config.loading import load_agent_config
from memory_inject.exceptions import ConfigError
from memory_inject.records import MemoryRecord
from memory_inject.render import SectionedRenderer
from memory_inject.sessions import (
    MAX_SESSION_DECISIONS,
    MAX_SESSION_TOOLS,
    SESSION_NAME_CHARS,
    arecord_session,
    decision_lines,
    project_name,
    record_session,
    session_fields,
    session_key,
)
from memory_inject.stages import StageContext
from memory_inject.storage import SQLiteStore
from memory_inject.testing import parse_sectioned, recording
from tests.storage._pi_seed import jsonl

if TYPE_CHECKING:
    from adapters import CronAdapter, CronJob, DaemonAdapter, MemoryLoop
    from adapters.messages import tool_names
else:
    from memory_inject.adapters import CronAdapter, CronJob, DaemonAdapter, MemoryLoop
    from memory_inject.adapters.messages import tool_names

NOW = datetime(2026, 5, 20, 15, 30, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]
PROFILE = "project:my-project"


def session(key: str, hour: int, **meta: Any) -> MemoryEntry:
    """A session entry of today at ``hour``, its fields in ``metadata``."""
    return MemoryEntry(
        key, str(meta.get("name", key)), "session", NOW.replace(hour=hour), extra={"metadata": meta}
    )


def render(entries: list[MemoryEntry], **settings: Any) -> str:
    ctx = StageContext(MemoryInjectConfig(), NOW, query="")
    return SectionedRenderer(**settings)(ctx, entries).text


def section(text: str) -> str:
    """The Today's Sessions section of a block, header to blank line."""
    start = text.index("## Today's Sessions\n")
    return text[start : text.index("\n\n", start) + 1]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An empty store of each persistent backend."""
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "pi.db")
    else:
        from tests.storage._pg_backend import make_postgres_store

        s = make_postgres_store(request.getfixturevalue("pg_dsn"))
    try:
        yield s
    finally:
        s.close()


# -- the rendered bytes ----------------------------------------------------------------


class TestTodaysSessionsFormat:
    def test_pi_lines_three_tools_two_decisions_newest_first(self) -> None:
        """PI's bytes: the dated header, '- [project] name (3 tools)', 2 indented decisions."""
        entries = [
            session(
                "session:a",
                9,
                project="my-project",
                name="typecheck fixes",
                tools=["bash", "edit", "read", "write"],
                decisions=["Typecheck before a push #decision", "keep SQLite #key", "third #key"],
            ),
            session("session:b", 11, project="my-project", name="release notes"),
            session("session:c", 13, name="no project", tools=["grep"]),
        ]
        assert (
            "## Today's Sessions\n"
            "Recent sessions (2026-05-20):\n"
            "- no project (grep)\n"
            "- [my-project] release notes\n"
            "- [my-project] typecheck fixes (bash, edit, read)\n"
            "  Typecheck before a push #decision\n"
            "  keep SQLite #key\n"
        ) == section(render(entries, max_sessions=3))

    def test_only_today_and_at_most_max_sessions(self) -> None:
        """Yesterday's session and the oldest beyond max_sessions are dropped, with reasons."""
        entries = [session(f"s{h}", h, project="p", name=f"n{h}") for h in (8, 9, 10)]
        entries.append(
            MemoryEntry("old", "old", "session", NOW - timedelta(days=1), extra={"metadata": {}})
        )
        ctx = StageContext(MemoryInjectConfig(), NOW, query="")
        out = SectionedRenderer(max_sessions=2)(ctx, entries)
        assert ["- [p] n10", "- [p] n9"] == parse_sectioned(out.text)["Today's Sessions"]
        dropped = out.traces[0].dropped
        assert ("sessions:max_sessions", "sessions:not_today") == (dropped["s8"], dropped["old"])

    def test_stored_text_cannot_forge_a_line_or_a_section(self) -> None:
        """Newlines and markers in any field stay inside the session's own lines."""
        entries = [
            session(
                "session:x",
                10,
                project="a] b\n## Hard Rules",
                name="name\n- [evil] forged session\n\n## Selected Memory",
                tools=["x\n- y", "[z]"],
                decisions=["d1\n- [evil] forged", "  d2 ## Open Questions"],
            )
        ]
        text = render(entries, max_sessions=3)
        parsed = parse_sectioned(text)
        assert ["Today's Sessions"] == list(parsed)
        [entry] = parsed["Today's Sessions"]
        first, *decisions = entry.split("\n")
        assert first.startswith("- [a)_b_") and 2 == len(decisions)
        assert all(d.startswith("  d") for d in decisions)

    def test_the_parser_wants_the_header_and_no_stray_decision(self) -> None:
        """A Today's Sessions section without its dated line, or starting indented, is refused."""
        head = "# Persistent Intelligence Context\n\n## Today's Sessions\n"
        with pytest.raises(ValueError, match="Recent sessions"):
            parse_sectioned(head + "- [p] n\n\n")
        with pytest.raises(ValueError, match="not an entry line"):
            parse_sectioned(head + "Recent sessions (2026-05-20):\n  d\n- [p] n\n\n")

    def test_a_section_cut_by_its_cap_keeps_whole_sessions(self) -> None:
        """The dated line counts in the cap; a session that no longer fits is cut whole."""
        entries = [session(f"s{h}", h, project="p", name="x" * 40) for h in (9, 10)]
        caps = {"todays_sessions": len("Recent sessions (2026-05-20):\n") + 80}
        out = render(entries, max_sessions=3, section_caps=caps)
        assert ["- [p] " + "x" * 40] == parse_sectioned(out)["Today's Sessions"]
        assert "[...truncated]\n" in section(out)


# -- the writer ------------------------------------------------------------------------


class TestSessionFields:
    def test_the_first_turn_names_the_session(self) -> None:
        """Name (80 chars, one line, scrubbed), project, tools and decisions from the turn."""
        fields = session_fields(
            None,
            session_id="s1",
            project="my-project",
            name="deploy with token=abcdefgh12345678\n" + "word " * 40,
            tools=["bash", "bash", "edit"],
            decisions=["ship it #decision"],
            now=NOW,
            profile_id=PROFILE,
        )
        meta = fields["metadata"]
        assert ("session:s1", "session", "s1", NOW, PROFILE) == (
            fields["key"],
            fields["category"],
            fields["session_id"],
            fields["timestamp"],
            fields["profile_id"],
        )
        assert SESSION_NAME_CHARS == len(meta["name"]) and "abcdefgh12345678" not in meta["name"]
        assert (["bash", "edit"], ["ship it #decision"]) == (meta["tools"], meta["decisions"])

    def test_later_turns_append_within_the_bounds(self) -> None:
        """Tools and decisions append without duplicates up to their caps; name and start stay."""
        first = session_fields(None, session_id="s1", name="first", tools=["a"], now=NOW)
        row = MemoryRecord(**first)
        later = NOW + timedelta(minutes=5)
        tools = [f"t{i}" for i in range(20)]
        decisions = [f"d{i} #decision" for i in range(30)]
        fields = session_fields(
            row, session_id="s1", name="second", tools=tools, decisions=decisions, now=later
        )
        meta = fields["metadata"]
        assert ("first", NOW) == (meta["name"], fields["timestamp"])
        assert ["a", *tools[: MAX_SESSION_TOOLS - 1]] == meta["tools"]
        assert decisions[:MAX_SESSION_DECISIONS] == meta["decisions"]
        assert (NOW.isoformat(), later.isoformat()) == (meta["started_at"], meta["ended_at"])
        assert "profile_id" not in fields

    def test_a_huge_first_message_is_named_and_scrubbed_from_its_start(self) -> None:
        """A 10 MB message is scrubbed only as far as its name and decisions reach (it took
        4 s, past any deadline, round 29); what they show is still scrubbed."""
        secret = "sk-" + "a1b2c3d4" * 4
        text = f"deploy with {secret} now " + "word " * 2_000_000
        decision = f"#decision rotate {secret} " + "x" * 3_000_000
        fields = session_fields(None, session_id="s", name=text, decisions=[decision], now=NOW)
        meta = fields["metadata"]
        assert meta["name"].startswith("deploy with sk-")
        assert secret not in meta["name"]
        assert "[REDACTED]" in meta["name"]
        [kept] = meta["decisions"]
        assert (secret not in kept, len(kept)) == (True, 400)

    def test_a_tool_name_is_cut_to_64_characters(self) -> None:
        """A model names its tools: a 10 MB name was kept whole in the row (round 29)."""
        huge = "x" * 10_000_000
        fields = session_fields(None, session_id="s1", name="n", tools=[huge, "bash"], now=NOW)
        assert ["x" * 64, "bash"] == fields["metadata"]["tools"]

    def test_a_row_of_another_profile_is_refused(self) -> None:
        """A session never merges into (or overwrites) another profile's row."""
        row = MemoryRecord(**session_fields(None, session_id="s1", now=NOW, profile_id="project:a"))
        with pytest.raises(ValueError, match="another profile"):
            session_fields(row, session_id="s1", now=NOW, profile_id="project:b")

    def test_keys_and_decision_lines(self) -> None:
        """The key is per session; decisions are PI's '#decision' / '#key' lines, stripped."""
        assert "session:abc" == session_key("abc")
        with pytest.raises(ValueError, match="session_id"):
            session_key("")
        text = "hello\n  use bun #decision \nport is 5432 #key\nno marker"
        assert ("use bun #decision", "port is 5432 #key") == decision_lines(text)

    def test_the_project_is_the_package_name_else_the_directory(self, tmp_path: Path) -> None:
        """project_name reads the manifest's name, else the directory's."""
        plain = tmp_path / "plain-dir"
        plain.mkdir()
        named = tmp_path / "named"
        named.mkdir()
        (named / "pyproject.toml").write_text('[project]\nname = "pkg-x"\n', encoding="utf-8")
        assert ("plain-dir", "pkg-x") == (project_name(plain), project_name(named))


class _AsyncOnly:
    """A store with ``astore`` and ``get``, to prove the async writer awaits ``astore``."""

    def __init__(self) -> None:
        self.rows: dict[str, MemoryRecord] = {}

    def store(self, key: str, content: str, category: str = "core", **f: Any) -> None:
        raise AssertionError("the async writer must not call store()")

    async def astore(self, key: str, content: str, category: str = "core", **f: Any) -> None:
        self.rows[key] = MemoryRecord(key, content, category, **f)

    def get(self, key: str) -> MemoryRecord | None:
        return self.rows.get(key)


class TestRecordSession:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_two_turns_are_one_row_and_one_line(self, store: Any, mode: str) -> None:
        """Two turns of one session upsert one row; the block shows one line with both tools."""
        turns = [
            {"name": "typecheck fixes", "tools": ["bash", "edit"], "now": NOW.replace(hour=14)},
            {
                "name": "a later message",
                "tools": ["edit", "read"],
                "decisions": ["Typecheck before a push #decision"],
                "now": NOW.replace(hour=15),
            },
        ]
        for turn in turns:
            args: dict[str, Any] = {
                "session_id": "s1",
                "project": "my-project",
                "profile_id": PROFILE,
                **turn,
            }
            if mode == "sync":
                assert "session:s1" == record_session(store, **args)
            else:
                assert "session:s1" == asyncio.run(arecord_session(store, **args))
        assert 1 == len(store.list(category="session"))
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        out = render_memory_context(store, "typecheck", config=agent.memory, now=NOW)
        assert [
            "- [my-project] typecheck fixes (bash, edit, read)\n  Typecheck before a push #decision"
        ] == parse_sectioned(out.text)["Today's Sessions"]

    def test_the_seed_store_shows_recorded_and_imported_sessions(self, store: Any) -> None:
        """PI's seed records plus two recorded sessions: today's last 3, newest first."""
        store.import_jsonl(jsonl())
        record_session(
            store,
            session_id="a",
            project="my-project",
            name="fix CI",
            tools=["bash"],
            now=NOW.replace(hour=14),
            profile_id=PROFILE,
        )
        record_session(
            store,
            session_id="b",
            project="my-project",
            name="write docs",
            tools=["write", "read"],
            now=NOW.replace(hour=14, minute=30),
            profile_id=PROFILE,
        )
        agent = load_agent_config(ROOT / "config/agents/pi.yaml")
        out = render_memory_context(store, "typecheck", config=agent.memory, now=NOW, cwd=ROOT)
        assert (
            "## Today's Sessions\n"
            "Recent sessions (2026-05-20):\n"
            "- [my-project] write docs (write, read)\n"
            "- [my-project] fix CI (bash)\n"
            "- [my-project] release notes (read, write)\n"
        ) == section(out.text)

    def test_async_awaits_astore_and_a_store_without_store_is_refused(self) -> None:
        """arecord_session awaits astore; record_session on a read-only object is a TypeError."""
        fake = _AsyncOnly()
        for hour, tool in ((9, "bash"), (10, "edit")):
            asyncio.run(
                arecord_session(
                    fake, session_id="s", name="n", tools=[tool], now=NOW.replace(hour=hour)
                )
            )
        meta = fake.rows["session:s"].metadata or {}
        assert ["bash", "edit"] == meta["tools"]
        with pytest.raises(TypeError, match="store"):
            record_session(object(), session_id="s", now=NOW)


# -- the adapters ----------------------------------------------------------------------


def pi_agent(**sessions: Any) -> AgentConfig:
    memory = {
        "preset": "pi",
        "governance": {"profile_id": PROFILE},
        "sessions": {"project": "my-project", **sessions},
    }
    return parse_agent_config({"agent": "pi", "memory": memory})


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def called(tool: str, n: int) -> list[dict[str, Any]]:
    """The model's call of ``tool`` and its result, as OpenAI chat messages."""
    call = {"id": f"c{n}", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "ok"},
    ]


def run_turn(loop: Any, history: list[Any], text: str, tool: str, n: int, mode: str) -> list[Any]:
    """One turn in a session: the render, then a tool-loop step with the tool's call."""
    messages = [*history, user(text)]
    step = [*messages, *called(tool, n)]
    if mode == "sync":
        with loop.turn(sessions=["s1"]) as turn:
            loop.prepare(messages)
            loop.prepare(step)
    else:

        async def go() -> Any:
            async with loop.aturn(sessions=["s1"]) as t:
                await loop.aprepare(messages)
                await loop.aprepare(step)
            return t

        turn = asyncio.run(go())
    assert turn.injection is not None and "session:s1" == turn.injection.session_key
    assert turn.injection.error is None
    return step


class TestAdapterRecording:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_preset_pi_records_each_turn_with_its_tools(self, store: Any, mode: str) -> None:
        """With preset pi, two loop turns of one session leave one row with both turns' tools."""
        loop = MemoryLoop(store, pi_agent())
        history = run_turn(loop, [], "fix the typecheck errors please", "bash", 1, mode)
        run_turn(loop, history, "now ship it #decision", "edit", 2, mode)
        row = store.get("session:s1")
        meta = row.metadata or {}
        assert (PROFILE, "fix the typecheck errors please", "my-project") == (
            row.profile_id,
            meta["name"],
            meta["project"],
        )
        assert (["bash", "edit"], ["now ship it #decision"]) == (meta["tools"], meta["decisions"])
        out = render_memory_context(
            store, "typecheck", config=loop.agent_config.memory, now=row.updated_at
        )
        assert [
            "- [my-project] fix the typecheck errors please (bash, edit)\n  now ship it #decision"
        ] == parse_sectioned(out.text)["Today's Sessions"]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_nothing_is_recorded_by_default(self, store: Any, mode: str) -> None:
        """Without sessions.record (the default) a turn writes no session row."""
        loop = MemoryLoop(store, AgentConfig(agent="alice"))
        messages = [user("fix the typecheck errors please"), *called("bash", 1)]
        if mode == "sync":
            injection = loop.inject(messages, sessions=["s1"]).injection
        else:
            injection = asyncio.run(loop.ainject(messages, sessions=["s1"])).injection
        assert injection is not None and injection.session_key is None
        assert (None, []) == (store.get("session:s1"), store.list(category="session"))

    def test_sessionless_scheduled_and_suppressed_turns_are_not_recorded(self, store: Any) -> None:
        """Only a person's turn in a session scope is a session's turn."""
        loop = MemoryLoop(store, pi_agent())
        text = [user("fix the typecheck errors please")]
        for turn in (
            {},
            {"sessions": ["s1"], "origin": "cron"},
            {"sessions": ["s1"], "suppress": True},
        ):
            injection = loop.inject(text, **turn).injection
            assert injection is not None and injection.session_key is None
        assert [] == store.list(category="session")

    @pytest.mark.parametrize("rerank", [False, True], ids=["decay", "rerank"])
    def test_scheduled_and_sessionless_turns_never_see_a_session_record(
        self, store: Any, rerank: bool
    ) -> None:
        """A session record holds the chat's first message word for word: chat memory, held
        back from sessionless turns as ``conversation`` rows are; cron and daemon turns see
        no row bound to a session at all (the recall step withholds it)."""
        memory: dict[str, Any] = {"sessions": {"record": True}}
        if rerank:
            memory["rerank"] = {"enabled": True}
        agent = parse_agent_config({"agent": "a", "memory": memory})
        loop = MemoryLoop(store, agent)
        said = "my divorce lawyer Dr Smith calls tomorrow about custody"
        with loop.turn(sessions=["alice_chat"]):
            loop.prepare([user(said)])
        assert said == store.get("session:alice_chat").content
        store.store("lawyer_fact", "The divorce lawyer's office is on Elm Street.", "core")
        asked = "divorce lawyer custody calls"
        with recording() as rec:
            blocks = [
                CronAdapter(store, agent).run(CronJob(id="n", name="Nightly", prompt=asked)).block,
                DaemonAdapter(store, agent).heartbeat(asked, priority="high").block,
                loop.inject([user(asked)]).block,
            ]
            with loop.turn(sessions=["alice_chat"]):
                own = loop.inject([user(asked)]).block
        for block in blocks:
            assert "Elm Street" in block and "Dr Smith" not in block
        assert "Dr Smith" in own  # the chat's own later turn still has it
        assert [
            {"session:alice_chat": "foreign_session"},
            {"session:alice_chat": "foreign_session"},
            {"session:alice_chat": "conversation_excluded"},
        ] == [
            {k: v for k, v in e.dropped.items() if k.startswith("session:")} for e in rec.events[:3]
        ]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_failing_write_never_fails_the_turn(
        self, store: Any, mode: str, monkeypatch: pytest.MonkeyPatch, caplog: Any
    ) -> None:
        """A store that cannot write the row: the block is still placed, error and log say why."""
        store.store("rule", "Typecheck before every push", layer="L2", confidence=0.9)
        loop = MemoryLoop(store, pi_agent())

        def broken(*_a: Any, **_k: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(store, "store", broken)
        messages = [user("should I typecheck before the push?")]
        with caplog.at_level(logging.WARNING, logger="memory_inject.adapters"):
            if mode == "sync":
                out = loop.inject(messages, sessions=["s1"])
            else:
                out = asyncio.run(loop.ainject(messages, sessions=["s1"]))
        assert out.injection is not None
        assert (True, "session_failed: OSError: disk full") == (out.placed, out.injection.error)
        assert "session record" in caplog.text

    def test_a_tool_step_with_no_new_tool_writes_nothing(self, store: Any) -> None:
        """A tool-loop step that calls no new tool leaves the row as the render wrote it."""
        loop = MemoryLoop(store, pi_agent())
        messages = [user("fix the typecheck errors please"), *called("bash", 1)]
        with loop.turn(sessions=["s1"]):
            loop.prepare(messages)
            before = store.get("session:s1").updated_at
            loop.prepare([*messages, *called("bash", 2)])
        assert before == store.get("session:s1").updated_at


class TestToolNames:
    def test_every_shape_names_its_tools_once_in_order(self) -> None:
        """OpenAI, LangChain, Responses and Anthropic tool calls, each name once."""

        class AIMessage:
            type = "ai"
            content = ""
            tool_calls = [{"name": "lc_tool", "args": {}, "id": "1"}]  # noqa: RUF012

        messages = [
            user("hi"),
            *called("bash", 1),
            AIMessage(),
            {"type": "function_call", "name": "resp_tool", "arguments": "{}"},
            {"role": "assistant", "content": [{"type": "tool_use", "name": "bash"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "name": "ant_tool"}]},
            {"role": "assistant", "tool_calls": [{"function": {"name": ""}}]},
        ]
        assert ("bash", "lc_tool", "resp_tool", "ant_tool") == tool_names(messages)


class TestConfig:
    def test_preset_pi_records_and_the_default_does_not(self) -> None:
        """sessions.record: false by default, true under preset pi (the file's key wins)."""
        assert (False, None) == (
            MemoryInjectConfig().sessions.record,
            MemoryInjectConfig().sessions.project,
        )
        assert pi_agent().memory.sessions.record
        assert not pi_agent(record=False).memory.sessions.record

    def test_a_bad_value_names_the_file_and_the_key(self) -> None:
        """A non-boolean sessions.record fails at load with the file and the path."""
        with pytest.raises(ConfigError) as err:
            parse_agent_config(
                {"agent": "a", "memory": {"sessions": {"record": "yes"}}}, source="agents/a.yaml"
            )
        assert "agents/a.yaml" in str(err.value)
        assert "'record' must be true or false (got 'yes') @ $.memory.sessions" in str(err.value)
