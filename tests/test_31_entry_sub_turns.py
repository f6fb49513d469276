"""Every entry adapter checks and sets the turn mark (issue 29, thirty-first round).

docs/adapters.md, "When is a turn a sub-turn?": every adapter marks its turn in one context
variable (``current_turn()``), and a turn that starts while another one is live is a
``sub_turn``. Only the loop, the client wrappers and the framework adapters did: a
``ChannelAdapter.handle``, ``CronAdapter.run``, ``DaemonAdapter.heartbeat`` or
``AgentDirectAdapter.request`` inside a live ``MemoryLoop`` turn (a tool of Alice's DM agent
that relays into #general) rendered a full block of its own, and a ``MemoryLoop`` run by a
receiver of a channel turn's event was not a sub-turn either. They now check and set the
same mark, sync and async, while they render; the mark is the task's or thread's own (a
channel orchestrator's concurrent chats never see each other's), and it ends with the
render on every exit path.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig
from memory_inject.config import CronJob
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.signals import memory_recall, memory_skipped
from memory_inject.storage import InMemoryStore

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import (
        AgentDirectAdapter,
        ChannelAdapter,
        CronAdapter,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        _core,
        current_turn,
    )
    from adapters._core import Injection
else:
    from memory_inject.adapters import (
        AgentDirectAdapter,
        ChannelAdapter,
        CronAdapter,
        DaemonAdapter,
        InboundMessage,
        MemoryLoop,
        _core,
        current_turn,
    )
    from memory_inject.adapters._core import Injection

Q = "where do production deploys go?"
AGENT = AgentConfig(agent="bot")


def _message(n: int = 0, target: str = "group:C024BE91L") -> InboundMessage:
    return InboundMessage(
        channel="slack",
        sender="U024BE7LH",
        text=Q,
        reply_target=target,
        message_id=f"1712345678.{n:06d}",
        history_key=f"slack_{target}",
    )


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    return store


#: Each entry adapter's turn, sync and async: (name, sync call, async call).
Entry = tuple[str, Callable[[Any], Injection], Callable[[Any], Coroutine[Any, Any, Injection]]]
ENTRIES: list[Entry] = [
    (
        "channel",
        lambda s: ChannelAdapter(s, AGENT, channel_name="slack", autosave=True).handle(_message()),
        lambda s: ChannelAdapter(s, AGENT, channel_name="slack", autosave=True).ahandle(_message()),
    ),
    (
        "cron",
        lambda s: CronAdapter(s, AGENT).run(CronJob(id="n", name="digest", prompt=Q)),
        lambda s: CronAdapter(s, AGENT).arun(CronJob(id="n", name="digest", prompt=Q)),
    ),
    (
        "heartbeat",
        lambda s: DaemonAdapter(s, AGENT).heartbeat(Q),
        lambda s: DaemonAdapter(s, AGENT).aheartbeat(Q),
    ),
    (
        "task",
        lambda s: DaemonAdapter(s, AGENT).run_task(Q),
        lambda s: DaemonAdapter(s, AGENT).arun_task(Q),
    ),
    (
        "agent_direct",
        lambda s: AgentDirectAdapter(s, AGENT, autosave=True).request(Q, session_id="ws-1"),
        lambda s: AgentDirectAdapter(s, AGENT, autosave=True).arequest(Q, session_id="ws-1"),
    ),
]
IDS = [e[0] for e in ENTRIES]


@pytest.fixture
def events() -> Iterator[list[tuple[str, str]]]:
    """Every event sent, as (kind, origin)."""
    log: list[tuple[str, str]] = []

    def recall(sender: object, *, event: Any) -> None:
        log.append(("recall", str(event.origin)))

    def skipped(sender: object, *, event: Any) -> None:
        log.append(("skipped", str(event.origin)))

    memory_recall.connect(recall, weak=False)
    memory_skipped.connect(skipped, weak=False)
    yield log
    memory_recall.disconnect(recall)
    memory_skipped.disconnect(skipped)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
class TestInsideALiveTurn:
    def test_an_entry_turn_inside_a_live_loop_turn_is_a_sub_turn(
        self, entry: Entry, events: list[tuple[str, str]]
    ) -> None:
        """Inside ``loop.turn()``: no block, one ``memory_skipped`` (``sub_turn``), nothing
        autosaved; the outer turn's mark is back when it returns."""
        store = _store()
        loop = MemoryLoop(store, AGENT)
        with loop.turn(sessions=["slack_D024BE91L"], origin="channel") as outer:
            loop.prepare([{"role": "user", "content": "ask #general where deploys go"}])
            events.clear()
            turn = entry[1](store)
            assert current_turn() is outer
        assert ("sub_turn", "sub_turn", "") == (turn.origin.value, turn.policy.reason, turn.block)
        assert [("skipped", "sub_turn")] == events
        assert turn.autosaved_key is None
        assert ["deploy_target"] == [r.key for r in store.list()]

    def test_the_async_twin_inside_a_live_loop_turn_is_a_sub_turn(
        self, entry: Entry, events: list[tuple[str, str]]
    ) -> None:
        """The same inside ``loop.aturn()``, awaited."""
        store = _store()
        loop = MemoryLoop(store, AGENT)

        async def main() -> Injection:
            async with loop.aturn(sessions=["slack_D024BE91L"], origin="channel"):
                await loop.aprepare([{"role": "user", "content": "ask #general"}])
                events.clear()
                return await entry[2](store)

        turn = asyncio.run(main())
        assert ("sub_turn", "") == (turn.policy.reason, turn.block)
        assert [("skipped", "sub_turn")] == events

    def test_an_agent_run_by_a_receiver_of_its_event_is_a_sub_turn(
        self, entry: Entry, events: list[tuple[str, str]]
    ) -> None:
        """The other direction: while the entry turn renders, it is the live turn, so a
        ``MemoryLoop`` its event's receiver runs gets no block; the entry turn gets its own."""
        store = _store()
        inner: list[tuple[str, str | None, str]] = []

        def receiver(sender: object, *, event: Any) -> None:
            if event.origin != "sub_turn":
                got = MemoryLoop(store, AGENT).inject([{"role": "user", "content": Q}])
                assert got.injection is not None
                inner.append(
                    (
                        got.injection.origin.value,
                        got.policy.reason if got.policy is not None else None,
                        got.block,
                    )
                )

        memory_recall.connect(receiver, weak=False)
        try:
            turn = entry[1](store)
            aturn = asyncio.run(entry[2](store))
        finally:
            memory_recall.disconnect(receiver)
        assert [("sub_turn", "sub_turn", "")] * 2 == inner  # the sync turn's, the async one's
        assert "prod-3" in turn.block and "prod-3" in aturn.block
        assert current_turn() is None


class _Gate(InMemoryStore):
    """A store whose recall holds every turn until ``parties`` turns are in theirs, so the
    turns render at once, for certain."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.parties = parties
        self.entered: set[str] = set()
        self._cond = threading.Condition()

    def _enter(self, query: RecallQuery) -> None:
        with self._cond:
            self.entered.add(str(query.query))
            self._cond.notify_all()

    def _all_in(self) -> bool:
        with self._cond:
            return len(self.entered) >= self.parties

    def answer(self, query: RecallQuery) -> RecallAnswer:
        self._enter(query)
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.entered) >= self.parties, timeout=20)
        return super().answer(query)

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        self._enter(query)
        deadline = time.monotonic() + 20
        while not self._all_in():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        return super().answer(query)


@pytest.fixture
def marks() -> Iterator[dict[str, str | None]]:
    """Each event's turn id -> the turn id of the mark live where its receivers ran."""
    seen: dict[str, str | None] = {}

    def receiver(sender: object, *, event: Any) -> None:
        mark = current_turn()
        seen[str(event.turn_id)] = mark.turn_id if mark is not None else None

    memory_recall.connect(receiver, weak=False)
    yield seen
    memory_recall.disconnect(receiver)


CHATS = 12


def _chat_store() -> _Gate:
    store = _Gate(CHATS)
    for i in range(CHATS):
        store.store(
            f"fact_{i}", f"Chat {i} deploys go to prod-{i}.", "core", session_id=f"slack_D{i}"
        )
    return store


def _chat(i: int) -> InboundMessage:
    return InboundMessage(
        channel="slack",
        sender=f"U{i:08d}",
        text=f"where do chat {i} deploys go?",
        reply_target=f"D{i}",
        message_id=f"1712345678.{i:06d}",
        history_key=f"slack_D{i}",
    )


def _own_blocks(marks: dict[str, str | None], turns: list[Any]) -> None:
    """Each chat's turn is a channel turn of its own, with its own block, and rendered
    under its own mark (never another chat's)."""
    assert [("channel", None)] * CHATS == [(t.origin.value, t.policy.reason) for t in turns]
    for i, turn in enumerate(turns):
        assert f"prod-{i}." in turn.block
        assert [] == [j for j in range(CHATS) if j != i and f"prod-{j}." in turn.block]
        assert turn.turn.turn_id == marks[turn.turn.turn_id]
    assert current_turn() is None


class TestConcurrentChats:
    def test_twelve_chats_gathered_in_one_loop_each_get_their_block(
        self, marks: dict[str, str | None]
    ) -> None:
        """A channel orchestrator's ``asyncio.gather`` of 12 chats, all rendering at once."""
        store = _chat_store()
        bot = ChannelAdapter(store, AGENT, channel_name="slack")

        async def main() -> list[Any]:
            return list(await asyncio.gather(*(bot.ahandle(_chat(i)) for i in range(CHATS))))

        _own_blocks(marks, asyncio.run(main()))

    def test_twelve_chats_on_a_thread_pool_each_get_their_block(
        self, marks: dict[str, str | None]
    ) -> None:
        """The same with a ``ThreadPoolExecutor`` of 12 workers, all rendering at once."""
        store = _chat_store()
        bot = ChannelAdapter(store, AGENT, channel_name="slack")
        with ThreadPoolExecutor(CHATS) as pool:
            turns = list(pool.map(bot.handle, [_chat(i) for i in range(CHATS)]))
        _own_blocks(marks, turns)

    def test_a_pooled_worker_serves_its_next_chat_as_a_turn_of_its_own(
        self, marks: dict[str, str | None]
    ) -> None:
        """One worker, many chats in a row: the mark of each ends with its render."""
        store = _chat_store()
        store.parties = 1
        bot = ChannelAdapter(store, AGENT, channel_name="slack")
        with ThreadPoolExecutor(1) as pool:
            turns = list(pool.map(bot.handle, [_chat(i) for i in range(CHATS)]))
        _own_blocks(marks, turns)


class _Hanging(InMemoryStore):
    """A store whose async recall notes a copy of the context it ran in, then waits until
    its task is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[contextvars.Context] = []

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        self.copies.append(contextvars.copy_context())
        await asyncio.Event().wait()  # until cancelled
        raise AssertionError("not reached")


class TestTheMarkEnds:
    def test_a_render_that_raises_leaves_no_mark(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A turn whose render raises out of the adapter (an interrupt: the adapter absorbs
        only ``Exception``) ends its mark: here, and in a copy of the context taken inside."""
        copies: list[contextvars.Context] = []

        def interrupted(*args: Any, **kwargs: Any) -> Injection:
            copies.append(contextvars.copy_context())
            raise KeyboardInterrupt

        monkeypatch.setattr(_core, "run", interrupted)
        bot = ChannelAdapter(_store(), AGENT, channel_name="slack")
        with pytest.raises(KeyboardInterrupt):
            bot.handle(_message())
        monkeypatch.undo()
        assert current_turn() is None
        [inside] = copies
        assert inside.run(current_turn) is None
        later = ChannelAdapter(_store(), AGENT, channel_name="slack").handle(_message(1))
        assert (None, True) == (later.policy.reason, "prod-3" in later.block)

    def test_a_cancelled_turn_leaves_no_mark(self) -> None:
        """A channel turn cancelled mid-render ends its mark, for copies of its context too;
        the next turn in the same loop is a turn of its own."""
        store = _Hanging()
        bot = ChannelAdapter(store, AGENT, channel_name="slack")

        async def main() -> Any:
            task = asyncio.create_task(bot.ahandle(_message()))
            while not store.copies:
                await asyncio.sleep(0.001)
            assert store.copies[0].run(current_turn) is not None  # live while it renders
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert store.copies[0].run(current_turn) is None
            return await ChannelAdapter(_store(), AGENT, channel_name="slack").ahandle(_message(1))

        later = asyncio.run(main())
        assert (None, True) == (later.policy.reason, "prod-3" in later.block)
        assert current_turn() is None
