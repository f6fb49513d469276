"""MemoryLoop turns in streaming generators (thirty-second round).

Found by a helper: a streaming endpoint is a generator. ``@loop.wrap(sessions=[...])`` on
one opened and closed the turn around creating the generator object, so its body ran a
one-shot, session-less turn (another session's rows in the block, its own conversation
missing). ``with loop.turn()`` inside one raised ``ValueError`` (a context variable token
reset in another context) when each ``next()`` ran in a copied context, as Starlette's
``iterate_in_threadpool`` runs them, and a stream its consumer left with ``break`` kept its
mark live: the next user's turn in that thread or task was a ``sub_turn``, with no block.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.signals import memory_recall, memory_skipped

if TYPE_CHECKING:
    from adapters import MemoryLoop, current_turn
else:
    from memory_inject.adapters import MemoryLoop, current_turn

USERS = [f"user{i}" for i in range(20)]


def ask(user: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"what is the deploy favourite color of {user}?"}]


@pytest.fixture
def loop() -> MemoryLoop:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    for user in ["alice", "bob", *USERS]:
        store.store(
            f"fav_{user}",
            f"{user} deploy favourite color is {user}-blue.",
            "core",
            session_id=f"s_{user}",
        )
    store.store(
        "alice_chat", "alice: my deploy favourite color", "conversation", session_id="s_alice"
    )
    return MemoryLoop(store, AgentConfig(agent="bot"), api="openai")


@pytest.fixture
def heard() -> Iterator[list[tuple[str, Any]]]:
    log: list[tuple[str, Any]] = []

    def on_recall(sender: object, *, event: Any) -> None:
        log.append(("recall", event.sessions))

    def on_skip(sender: object, *, event: Any) -> None:
        log.append(("skipped", event.reason))

    with memory_recall.connected_to(on_recall), memory_skipped.connected_to(on_skip):
        yield log


def block_of(loop: MemoryLoop, user: str) -> str:
    return loop.inject(ask(user)).block


def lines(block: str) -> Iterator[str]:
    yield from block.split("\n")


# -- @loop.wrap on a generator function ------------------------------------------------


def test_a_wrapped_generator_runs_in_its_sessions_turn(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    @loop.wrap(sessions=["s_alice"])
    def stream() -> Iterator[str]:
        yield from lines(block_of(loop, "alice"))

    shown = "\n".join(stream())
    assert "alice_chat" in shown and "fav_alice" in shown
    assert "fav_bob" not in shown
    assert heard == [("recall", ("s_alice",))]
    assert current_turn() is None


def test_a_wrapped_async_generator_runs_in_its_sessions_turn(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    @loop.wrap(sessions=["s_alice"])
    async def stream() -> AsyncIterator[str]:
        for line in (await loop.ainject(ask("alice"))).block.split("\n"):
            yield line

    async def main() -> str:
        return "\n".join([line async for line in stream()])

    shown = asyncio.run(main())
    assert "alice_chat" in shown and "fav_alice" in shown
    assert "fav_bob" not in shown
    assert heard == [("recall", ("s_alice",))]


def test_a_wrapped_generator_keeps_its_turn_across_copied_contexts(loop: MemoryLoop) -> None:
    """Each step in a copy of the consumer's context (Starlette): the turn holds at every
    step, its value is returned, and its own cleanup runs inside it."""
    seen: list[Any] = []

    @loop.wrap(sessions=["s_alice"])
    def stream() -> Iterator[str]:
        try:
            yield "first"
            yield block_of(loop, "alice")  # after a yield: still this turn's
        finally:
            seen.append(current_turn())

    gen = stream()
    out = [contextvars.copy_context().run(next, gen) for _ in range(2)]
    with pytest.raises(StopIteration):
        contextvars.copy_context().run(next, gen)
    assert "alice_chat" in out[1] and "fav_bob" not in out[1]
    assert seen[0] is not None and seen[0].sessions == ("s_alice",)
    assert seen[0].closed


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_wrapped_stream_left_with_break_blocks_no_one(
    loop: MemoryLoop, heard: list[tuple[str, Any]], kind: str
) -> None:
    @loop.wrap(sessions=["s_alice"])
    def stream() -> Generator[str]:
        yield from lines(block_of(loop, "alice"))

    @loop.wrap(sessions=["s_alice"])
    async def astream() -> AsyncGenerator[str]:
        for line in (await loop.ainject(ask("alice"))).block.split("\n"):
            yield line

    async def amain() -> str:
        left = astream()
        async for _ in left:
            break
        bob = (await loop.ainject(ask("bob"), sessions=["s_bob"])).block
        await left.aclose()
        return bob

    if kind == "sync":
        left = stream()
        for _ in left:
            break
        bob = loop.inject(ask("bob"), sessions=["s_bob"]).block
        left.close()
    else:
        bob = asyncio.run(amain())
    assert "fav_bob" in bob
    assert heard == [("recall", ("s_alice",)), ("recall", ("s_bob",))]


# -- loop.turn() / aturn() inside a generator --------------------------------------------


def answer(loop: MemoryLoop, user: str) -> Generator[str]:
    with loop.turn(sessions=[f"s_{user}"]):
        yield from lines(block_of(loop, user))


async def aanswer(loop: MemoryLoop, user: str) -> AsyncGenerator[str]:
    async with loop.aturn(sessions=[f"s_{user}"]):
        for line in (await loop.ainject(ask(user))).block.split("\n"):
            yield line


def test_a_turn_in_a_generator_stepped_in_copied_contexts_raises_nothing(
    loop: MemoryLoop,
) -> None:
    gen = answer(loop, "alice")
    out: list[str] = []
    while (line := contextvars.copy_context().run(next, gen, None)) is not None:
        out.append(line)  # the end of the stream is its end, not a ValueError
    assert "fav_alice" in "\n".join(out)


def test_starlette_iterate_in_threadpool_raises_nothing(loop: MemoryLoop) -> None:
    concurrency = pytest.importorskip("starlette.concurrency")

    async def main() -> list[str]:
        return [line async for line in concurrency.iterate_in_threadpool(answer(loop, "alice"))]

    assert "fav_alice" in "\n".join(asyncio.run(main()))


def test_a_turn_in_a_generator_left_with_break_blocks_no_one(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    left = answer(loop, "alice")
    for _ in left:
        break
    assert current_turn() is None
    assert "fav_bob" in "\n".join(answer(loop, "bob"))
    assert heard == [("recall", ("s_alice",)), ("recall", ("s_bob",))]
    left.close()


def test_an_async_turn_left_with_break_blocks_no_one_and_closes_anywhere(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    async def main() -> str:
        left = aanswer(loop, "alice")
        async for _ in left:
            break
        bob = "\n".join([line async for line in aanswer(loop, "bob")])
        await asyncio.create_task(left.aclose())  # closed in another context: no ValueError
        return bob

    assert "fav_bob" in asyncio.run(main())
    assert heard == [("recall", ("s_alice",)), ("recall", ("s_bob",))]


def test_a_turn_in_a_contextmanager_still_spans_its_with_body(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    @contextmanager
    def session(user: str) -> Iterator[None]:
        with loop.turn(sessions=[f"s_{user}"]):
            yield

    with session("alice"):
        assert "alice_chat" in block_of(loop, "alice")
    assert heard == [("recall", ("s_alice",))]


def test_an_agent_a_stream_step_starts_is_a_sub_turn(
    loop: MemoryLoop, heard: list[tuple[str, Any]]
) -> None:
    other = MemoryLoop(loop.store, AgentConfig(agent="sub"), api="openai")

    async def stream() -> AsyncIterator[str]:
        async with loop.aturn(sessions=["s_alice"]):
            yield (await loop.ainject(ask("alice"))).block
            yield str(await asyncio.create_task(other.aprepare(ask("bob"))))

    async def main() -> None:
        async for _ in stream():
            pass

    asyncio.run(main())
    assert heard == [("recall", ("s_alice",)), ("skipped", "sub_turn")]


# -- many users at once -------------------------------------------------------------------


def test_twenty_tasks_stream_each_their_own_rows(loop: MemoryLoop) -> None:
    def stream_for(user: str) -> Any:
        @loop.wrap(sessions=[f"s_{user}"])
        async def stream() -> AsyncIterator[str]:
            await asyncio.sleep(0)
            for line in (await loop.ainject(ask(user))).block.split("\n"):
                await asyncio.sleep(0)
                yield line

        return stream

    async def one(user: str) -> str:
        return "\n".join([line async for line in stream_for(user)()])

    async def main() -> list[str]:
        return await asyncio.gather(*(one(u) for u in USERS))

    for user, shown in zip(USERS, asyncio.run(main()), strict=True):
        assert f"{user}-blue" in shown
        assert not any(f"{u}-blue" in shown for u in USERS if u != user)


def test_twenty_threads_stream_each_their_own_rows(loop: MemoryLoop) -> None:
    barrier = threading.Barrier(len(USERS))
    shown: dict[str, str] = {}

    def stream_for(user: str) -> Iterator[str]:
        @loop.wrap(sessions=[f"s_{user}"])
        def stream() -> Iterator[str]:
            barrier.wait()
            yield from lines(block_of(loop, user))

        return stream()

    def one(user: str) -> None:
        shown[user] = "\n".join(stream_for(user))

    threads = [threading.Thread(target=one, args=(u,)) for u in USERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for user in USERS:
        assert f"{user}-blue" in shown[user]
        assert not any(f"{u}-blue" in shown[user] for u in USERS if u != user)
