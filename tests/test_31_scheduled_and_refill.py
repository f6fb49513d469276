"""Rows a turn may not be shown never take the place of rows it may (issue 29, round 31).

Two cases a tester found running a chat bot:

* a fact the model stored in Alice's private DM reached a cron job and a daemon
  heartbeat posting to a public channel: scheduled turns that name no session now see
  only the rows bound to none (the recall step withholds the others and asks again);
* with autosave on, the user's own saved messages (never injected: the skip set) filled
  the recall limit, and from the sixth turn on a topic the fact asked about was gone:
  the recall step now counts what a later stage drops and asks the store for more.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, render_memory_context, resolve_inject_policy
from memory_inject.config import MemoryInjectConfig

if TYPE_CHECKING:
    from adapters import (
        ChannelAdapter,
        CronAdapter,
        CronJob,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        memory_tools,
    )
else:
    from memory_inject.adapters import (
        ChannelAdapter,
        CronAdapter,
        CronJob,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        memory_tools,
    )
from memory_inject.signals import MemoryRecall
from memory_inject.storage import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording
from tests._twins import call, twin  # noqa: F401

BOT = AgentConfig(agent="bot")
JOB = CronJob(id="weekly", name="Team news", prompt="Who is interviewing at Globex next week?")


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SQLiteStore(tmp_path / "m.db")
    yield s
    s.close()


def dm_fact(store: SQLiteStore) -> str:
    """Alice's DM turn, then the model stores a fact through the tools, as adapters.md says."""
    bot = ChannelAdapter(store, BOT, channel_name="slack", autosave=True)
    dm = bot.handle(
        InboundMessage(
            channel="slack",
            sender="U024BE7LH",
            reply_target="D024BE91L",
            message_id="1712345678.123456",
            history_key="slack_D024BE91L",
            text="Between us: I am interviewing at Globex next week, please remember that.",
        )
    )
    tools = memory_tools(store, BOT, sessions=dm.sessions, origin="channel")
    answer = tools.call("memory_store", {"content": "Alice is interviewing at Globex next week"})
    assert answer.startswith("Remembered as ")
    return answer.split("'")[1]


class TestScheduledTurnsSeeSharedRows:
    def test_a_fact_stored_in_a_dm_reaches_no_cron_job_or_heartbeat(
        self, store: SQLiteStore
    ) -> None:
        key = dm_fact(store)
        store.store("globex_roles", "Globex is interviewing two engineers next week.")
        with recording() as rec:
            blocks = [
                call(CronAdapter(store, BOT), "run", JOB).block,
                call(DaemonAdapter(store, BOT), "heartbeat", "Who interviews at Globex?").block,
            ]
        for block in blocks:
            assert "two engineers" in block and "Alice" not in block
        row = store.get(key)
        assert row is not None and "slack_D024BE91L" == row.session_id
        assert 2 * ["foreign_session"] == [e.dropped.get(key) for e in rec.events]

    def test_the_chat_itself_and_an_interactive_sessionless_turn_still_see_it(
        self, store: SQLiteStore
    ) -> None:
        """Only scheduled turns changed: the DM's own turn sees its fact, and a sessionless
        interactive turn (a person at the CLI, zeroclaw's rule) sees every session's
        facts."""
        dm_fact(store)
        asked = "who is interviewing at Globex next week?"
        own = render_memory_context(store, asked, sessions=["slack_D024BE91L"])
        cli = render_memory_context(
            store, asked, policy=resolve_inject_policy("interactive", has_session=False)
        )
        assert "interviewing at Globex" in own.text and "interviewing at Globex" in cli.text

    def test_many_bound_rows_above_the_shared_one_do_not_hide_it(self, store: SQLiteStore) -> None:
        """30 chats' rows outrank the one shared row: the recall step asks again (a store that
        cannot exclude them: 4 times as many each round, 5, 20, 80; SQLite, since round 32:
        once, past every bound row) until the shared row is among them."""
        for i in range(30):
            store.store(f"dm{i}", f"Globex interview news {i}: Globex hiring", session_id=f"dm_{i}")
        store.store("shared", "Globex interviews happen on Tuesdays")
        job = CronJob(id="w", name="news", prompt="Globex interview news")
        with recording() as rec:
            run = call(CronAdapter(store, BOT), "run", job)
        assert "[Memory context]\n- shared: Globex interviews happen on Tuesdays\n" in run.block
        ev = rec.events[0]
        foreign = {k for k, v in ev.dropped.items() if v == "foreign_session"}
        assert 5 == len(foreign) and foreign <= {f"dm{i}" for i in range(30)}  # the first page
        assert () == ev.degraded and ev.success

    def test_a_cron_turn_given_a_session_keeps_its_own_rows(self, store: SQLiteStore) -> None:
        """The rule is for turns that name no session: a job run in a session of its own
        sees that session's rows (and the shared ones), as any turn does."""
        store.store("own", "Globex report drafts live in the shared drive", session_id="job:w")
        store.store("other", "Globex interview notes of Alice", session_id="dm_alice")
        policy = resolve_inject_policy("cron", has_session=True)
        out = render_memory_context(store, "Globex report", policy=policy, sessions=["job:w"])
        assert "shared drive" in out.text and "Alice" not in out.text


class TestRowsAStageDropsDoNotCrowdOut:
    def test_autosaved_questions_never_push_the_fact_out(self, store: SQLiteStore) -> None:
        store.store("deploy_target", "Production deploys go to prod-3.", "core", session_id="c")
        loop = MemoryLoop(store, AgentConfig(agent="alice"), autosave=True)
        seen = []
        for i in range(30):
            with loop.turn(sessions=["c"]) as t:
                loop.prepare(
                    [{"role": "user", "content": f"where do production deploys go? (asked {i}x)"}]
                )
            seen.append(("deploy_target",) == rendered(t))
        assert 30 * [True] == seen  # 5, 20, 80 rows deep
        assert 30 == sum(k.startswith("user_msg") for k in store_keys(store))

    def test_the_async_loop_too(self, store: SQLiteStore) -> None:
        store.store("deploy_target", "Production deploys go to prod-3.", "core", session_id="c")
        loop = MemoryLoop(store, AgentConfig(agent="alice"), autosave=True)

        async def turns() -> list[bool]:
            out = []
            for i in range(8):
                async with loop.aturn(sessions=["c"]) as t:
                    await loop.aprepare(
                        [
                            {
                                "role": "user",
                                "content": f"where do production deploys go? (asked {i}x)",
                            }
                        ]
                    )
                out.append("deploy_target" in rendered(t))
            return out

        assert 8 * [True] == asyncio.run(turns())

    def test_chat_rows_a_sessionless_turn_excludes_do_not_hide_a_fact(
        self, store: SQLiteStore
    ) -> None:
        for i in range(12):
            store.store(f"c{i}", f"when is the Acme invoice due? ({i})", "conversation")
        store.store(
            "acme",
            "The Acme invoice is due on the 5th of each month, paid by bank transfer to the "
            "usual account.",
        )
        with recording() as rec:
            out = render_memory_context(
                store,
                "when is the Acme invoice due?",
                policy=resolve_inject_policy("interactive", has_session=False),
            )
        assert "- acme: The Acme invoice is due on the 5th of each month" in out.text
        assert {"conversation_excluded"} == set(rec.events[0].dropped.values())

    def test_a_store_with_nothing_more_is_asked_once(self, store: SQLiteStore) -> None:
        """The refill asks again only when the store filled the limit: a short answer is
        all there is."""
        asked: list[int] = []

        class Counting:
            def __init__(self, inner: SQLiteStore) -> None:
                self.inner = inner
                self.name = inner.name

            def recall(self, query: str, limit: int, **kw: Any) -> Any:
                asked.append(limit)
                return self.inner.recall(query, limit, **kw)

        store.store("user_msg_1", "where is the Acme invoice?", "conversation")
        store.store("acme", "The Acme invoice is due on the 5th.")
        out = render_memory_context(Counting(store), "Acme invoice", config=MemoryInjectConfig())
        assert "acme" in out.text and [5] == asked


def rendered(turn: Any) -> tuple[str, ...]:
    """The keys a loop turn's block showed."""
    assert turn.injection is not None and turn.injection.event is not None
    return tuple(turn.injection.event.rendered_keys)


def store_keys(store: SQLiteStore) -> list[str]:
    return [r.key for r in store.list()]


class TestRefillNotes:
    def test_a_refill_out_of_time_names_what_it_was_for(self) -> None:
        """The note named the threat scan (on by default) and counted its 0 withheld rows,
        though the refill was for the autosaves the skip set drops."""
        inner = InMemoryStore()
        for i in range(300):
            inner.store(f"user_msg_{i}", "where do production deploys go?", "daily")
        inner.store("deploy_target", "deploys land on prod-3 (note)", "core")

        class Slow:
            name = "slow"

            def recall(self, query: str, limit: int, **kw: Any) -> Any:
                time.sleep(0.15)
                return inner.recall(query, limit, **kw)

        out = render_memory_context(
            Slow(),
            "where do production deploys go?",
            config=MemoryInjectConfig(deadline_ms=400),
            origin="interactive",
        )
        assert isinstance(out.event, MemoryRecall)
        notes = [d for d in out.event.degraded if "not replaced" in d]
        assert 1 == len(notes) and notes[0].startswith("refill: ")
        assert notes[0].endswith("; 20 a stage drops not replaced")
