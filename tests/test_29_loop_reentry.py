"""A turn started from inside a turn's render is a sub-turn, and a turn renders once
(twenty-eighth round).

Found by a helper: an observer that runs a sub-agent through a ``MemoryLoop`` when
something was recalled. Inside ``with loop.turn()`` that sub-agent's ``prepare`` was
skipped as ``sub_turn``; from a one-shot ``prepare`` it got a full render of its own
(the parent's memory). And the same loop's ``prepare`` from the receiver rendered the
turn again: two recall events for one turn.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject import AgentConfig, InMemoryStore
from memory_inject.signals import memory_recall, memory_skipped

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import MemoryLoop
else:
    from memory_inject.adapters import MemoryLoop

Q = [{"role": "user", "content": "where do production deploys go?"}]


@pytest.fixture
def loops() -> tuple[MemoryLoop, MemoryLoop]:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    agent = AgentConfig(agent="alice")
    return MemoryLoop(store, agent), MemoryLoop(store, agent)


def heard(outer_call: Callable[[], Any], loop_in_receiver: MemoryLoop) -> list[tuple[str, Any]]:
    log: list[tuple[str, Any]] = []
    busy = threading.local()

    def on_recall(sender: object, *, event: Any) -> None:
        log.append(("recall", str(event.origin)))
        if getattr(busy, "on", False):
            return
        busy.on = True
        try:
            log.append(("nested", loop_in_receiver.prepare(Q)))
        finally:
            busy.on = False

    def on_skip(sender: object, *, event: Any) -> None:
        log.append(("skipped", event.reason))

    with memory_recall.connected_to(on_recall), memory_skipped.connected_to(on_skip):
        outer_call()
    return log


def test_a_one_shot_turns_receiver_runs_a_sub_turn(loops: tuple[MemoryLoop, MemoryLoop]) -> None:
    outer, inner = loops
    log = heard(lambda: outer.prepare(Q), inner)
    assert [("recall", "interactive"), ("skipped", "sub_turn")] == log[:2]
    assert Q == log[2][1]  # the sub-agent's list has no block


def test_the_same_turn_from_its_receiver_renders_nothing(
    loops: tuple[MemoryLoop, MemoryLoop],
) -> None:
    outer, _ = loops

    def in_turn() -> None:
        with outer.turn(sessions=["s1"]) as turn:
            placed = outer.prepare(Q)
            assert "prod-3" in turn.block
            assert "prod-3" in str(placed)

    log = heard(in_turn, outer)
    assert [("recall", "interactive"), ("nested", Q)] == log


def test_an_async_one_shot_turns_receiver_runs_a_sub_turn(
    loops: tuple[MemoryLoop, MemoryLoop],
) -> None:
    outer, inner = loops
    log = heard(lambda: asyncio.run(outer.aprepare(Q)), inner)
    assert [("recall", "interactive"), ("skipped", "sub_turn")] == log[:2]
