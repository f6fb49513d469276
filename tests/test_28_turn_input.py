"""Issue 28, item 5: the turn's inputs as one value (``TurnInput``) and ``render_turn``.

``render_memory_context`` stays the keyword form for direct calls; adapters build one
``TurnInput`` per turn and the render receives that very object.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import (
    AgentConfig,
    InMemoryStore,
    MemoryEntry,
    MemorySkipped,
    TurnInput,
    TurnMeta,
    TurnOrigin,
    arender_memory_context,
    arender_turn,
    memory_skipped,
    render_memory_context,
    render_turn,
    resolve_inject_policy,
)
from memory_inject.testing import recording

if TYPE_CHECKING:
    from adapters import DaemonAdapter
else:
    from memory_inject.adapters import DaemonAdapter

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> InMemoryStore:
    s = InMemoryStore()
    s.store("deploy", "Deploys to prod-3 happen on Fridays after the standup.", "core")
    s.store(
        "alice", "Alice prefers deploys on prod-3 in the morning.", "conversation", session_id="s1"
    )
    s.store(
        "bob", "Bob's prod-3 deploy notes are private to his chat.", "conversation", session_id="s2"
    )
    return s


class _Counting(InMemoryStore):
    """An in-memory store that counts its recalls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def recall(self, *args: Any, **kwargs: Any) -> Sequence[MemoryEntry]:
        self.calls += 1
        return super().recall(*args, **kwargs)


class TestTheValue:
    def test_sessions_are_normalised_once_and_scopes_follow(self) -> None:
        """None and [] are no session; the recall scopes are then one unscoped recall."""
        assert ((), (None,)) == (
            TurnInput(query="q", sessions=None).sessions,
            TurnInput(query="q").scopes,
        )
        given = TurnInput(query="q", sessions=iter(["s1", None]))
        assert (("s1", None), ("s1", None)) == (given.sessions, given.scopes)

    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            ({"query": 3}, TypeError, "'query' must be a str (got int)"),
            (
                {"query": "q", "sessions": "alice"},
                TypeError,
                "'sessions' must be a list of session ids",
            ),
            ({"query": "q", "sessions": [1]}, TypeError, "'sessions' items must be str or None"),
            ({"query": "q", "sessions": 5}, TypeError, "'sessions' must be an iterable"),
            ({"query": "q", "origin": "bogus"}, ValueError, "'bogus' is not a valid TurnOrigin"),
        ],
    )
    def test_a_wrong_input_is_refused_when_the_value_is_built(
        self, kwargs: dict[str, Any], error: type[Exception], message: str
    ) -> None:
        """The caller's mistake names the field, before any store is touched."""
        with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
            TurnInput(**kwargs)

    def test_the_origin_is_converted(self) -> None:
        """A string origin becomes the enum; None stays a direct call."""
        assert TurnOrigin.CHANNEL is TurnInput(query="q", origin="channel").origin
        assert TurnInput(query="q").origin is None


class TestRenderTurn:
    @pytest.mark.parametrize("origin", [None, "channel", "cron"])
    def test_render_turn_renders_what_the_keyword_form_renders(
        self, store: InMemoryStore, origin: str | None
    ) -> None:
        """The keyword form is a thin builder: the same block and the same event."""
        meta = TurnMeta("slack", "ops", "t1")
        inp = TurnInput(
            query="when do prod-3 deploys happen?",
            origin=origin,
            sessions=["s1"],
            turn=meta,
            now=NOW,
        )
        with recording() as rec:
            a = render_turn(store, inp)
            b = render_memory_context(
                store, inp.query, origin=origin, sessions=["s1"], turn=meta, now=NOW
            )
            c = asyncio.run(arender_turn(store, inp))
            d = asyncio.run(
                arender_memory_context(
                    store, inp.query, origin=origin, sessions=["s1"], turn=meta, now=NOW
                )
            )
        assert a.text != "" and a.text == b.text == c.text == d.text
        assert "Bob" not in a.text
        first = rec.events[0]
        assert all(
            (e.sessions, e.turn_id, e.origin) == (first.sessions, first.turn_id, first.origin)
            for e in rec.events
        )
        assert 4 == len(rec.events)

    def test_suppress_without_a_policy_skips_and_touches_no_store(self) -> None:
        """The spawn-site opt-out travels on the value: skipped, reason suppressed, no recall."""
        counting = _Counting()
        counting.store("deploy", "Deploys to prod-3 happen on Fridays.", "core")
        skipped: list[MemorySkipped] = []

        def on_skip(sender: object, *, event: MemorySkipped) -> None:
            skipped.append(event)

        memory_skipped.connect(on_skip)
        try:
            texts = [
                render_turn(
                    counting, TurnInput(query="prod-3 deploys?", origin=o, suppress=True)
                ).text
                for o in (None, "interactive")
            ]
        finally:
            memory_skipped.disconnect(on_skip)
        assert (["", ""], 0) == (texts, counting.calls)
        assert ["suppressed", "suppressed"] == [e.reason for e in skipped]

    def test_a_policy_decides_for_the_inputs_origin(self, store: InMemoryStore) -> None:
        """With a policy, the input's origin is what the policy decided for (no TypeError);
        the keyword form still refuses a policy together with an origin."""
        policy = resolve_inject_policy("cron", has_session=False)
        result = render_turn(store, TurnInput(query="prod-3 deploys", origin="cron"), policy=policy)
        assert "Fridays" in result.text and "Alice" not in result.text  # cron: no conversation
        with pytest.raises(TypeError, match="pass either 'policy' or 'config'/'origin'"):
            render_memory_context(store, "prod-3 deploys", policy=policy, origin="cron")
        with pytest.raises(TypeError, match="pass either 'policy' or 'config'/'origin'"):
            render_turn(store, TurnInput(query="q"), policy=policy, config=policy.config)


class TestAdaptersPassItThrough:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_the_render_receives_the_adapters_value(
        self, store: InMemoryStore, monkeypatch: pytest.MonkeyPatch, mode: str
    ) -> None:
        """The adapter's TurnInput reaches render_turn as the very same object."""
        core = importlib.import_module("memory_inject.adapters._core")
        seen: list[TurnInput] = []

        def spy(real: Any) -> Any:
            def wrapper(s: Any, inp: TurnInput, **kw: Any) -> Any:
                seen.append(inp)
                return real(s, inp, **kw)

            return wrapper

        monkeypatch.setattr(core, "render_turn", spy(render_turn))
        monkeypatch.setattr(core, "arender_turn", spy(arender_turn))
        sent: list[TurnInput] = []
        real_run, real_arun = core.run, core.arun

        def run(s: Any, agent: Any, req: TurnInput, **kw: Any) -> Any:
            sent.append(req)
            return real_run(s, agent, req, **kw)

        async def arun(s: Any, agent: Any, req: TurnInput, **kw: Any) -> Any:
            sent.append(req)
            return await real_arun(s, agent, req, **kw)

        monkeypatch.setattr(core, "run", run)
        monkeypatch.setattr(core, "arun", arun)
        daemon = DaemonAdapter(store, AgentConfig(agent="ops"))
        if mode == "sync":
            turn = daemon.heartbeat("check the prod-3 deploys", "high", turn_id="h1")
        else:
            turn = asyncio.run(daemon.aheartbeat("check the prod-3 deploys", "high", turn_id="h1"))
        assert 1 == len(seen) == len(sent) and seen[0] is sent[0]
        assert (TurnOrigin.DAEMON, "h1", ()) == (
            seen[0].origin,
            seen[0].turn.turn_id,
            seen[0].sessions,
        )
        assert "Fridays" in turn.block
