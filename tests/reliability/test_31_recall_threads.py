"""Issue 29, thirty-first round: the stores' async recalls run on the library's recall threads.

Found by a tester running the library inside an asyncio server: MarkdownStore's async
recalls ran on asyncio's default executor, the host's. With the host's own
``to_thread`` work filling it, every turn got no memory and an event saying
``deadline`` (a recall that ran out of time), though no recall had started. Now they
run on the recall threads, under their rules, and a recall that never started says
``recall_wait``; so do the other built-in async twins that made a blocking call there.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, arender_memory_context
from memory_inject.contract import RecallQuery
from memory_inject.storage import SQLiteStore
from memory_inject.storage.hot_cache import HotCacheStore
from memory_inject.storage.markdown import MarkdownStore
from tests.reliability._host_executor import BOUND_S, run


class TestMarkdownRecallThreads:
    def test_a_recall_runs_while_the_hosts_executor_is_full(self, tmp_path: Path) -> None:
        """The host's own ``to_thread`` work fills its executor: Markdown's async turns
        still get their memory (was: none, and a false ``deadline``)."""
        store = MarkdownStore(tmp_path)
        store.store("fact", "The deploy target is prod-3.", "core")
        gate = threading.Event()
        config = MemoryInjectConfig(deadline_ms=2000)

        async def main() -> list[Any]:
            host = asyncio.ensure_future(asyncio.to_thread(gate.wait, BOUND_S))
            try:
                turns = (
                    arender_memory_context(store, "where is the deploy target?", config=config)
                    for _ in range(5)
                )
                return await asyncio.gather(*turns)
            finally:
                gate.set()
                await host

        for result in run(main, workers=1):
            assert "prod-3" in result.text
            assert () == result.event.degraded

    def test_a_recall_that_never_started_says_recall_wait(self, tmp_path: Path) -> None:
        """The store's one slot is held by a running recall: a turn whose deadline passes
        in line says ``recall_wait`` (its recall never started), not ``deadline``."""
        store = MarkdownStore(tmp_path)
        store.store("fact", "The deploy target is prod-3.", "core")
        store.recall_slots = 1  # type: ignore[attr-defined]
        gate = threading.Event()
        calls: list[float] = []
        answer = store.answer

        def held(q: RecallQuery) -> Any:
            calls.append(time.perf_counter())
            if len(calls) == 1:
                gate.wait(BOUND_S)
            return answer(q)

        store.answer = held  # type: ignore[method-assign,assignment]

        async def main() -> Any:
            first = asyncio.ensure_future(
                arender_memory_context(
                    store, "deploy target?", config=MemoryInjectConfig(deadline_ms=20000)
                )
            )
            while not calls:
                await asyncio.sleep(0.01)
            try:
                return await arender_memory_context(
                    store, "deploy target?", config=MemoryInjectConfig(deadline_ms=200)
                )
            finally:
                gate.set()
                await first

        late = run(main)
        assert 1 == len(calls) or calls[1] > calls[0]  # the late turn's recall never ran
        assert "" == late.text
        assert [n[:12] for n in late.event.degraded] == ["recall_wait:"]


class TestOtherAsyncTwins:
    """Every other async twin of a built-in store that made a blocking call on the
    host's executor: each finishes while the host's work holds all of it."""

    @pytest.mark.parametrize(
        "call",
        [
            "sqlite aanswer",
            "sqlite filtered aanswer",
            "hot cache aanswer",
            "markdown astore",
            "markdown arecall",
        ],
    )
    def test_it_finishes_while_the_hosts_executor_is_full(self, call: str, tmp_path: Path) -> None:
        sqlite = SQLiteStore(tmp_path / "m.db")
        markdown = MarkdownStore(tmp_path / "md")
        for s in (sqlite, markdown):
            s.store("fact", "The deploy target is prod-3.", "core", source="ops")
        gate = threading.Event()

        async def one() -> Any:
            q = RecallQuery("deploy target", 5)
            if call == "sqlite aanswer":
                return (await sqlite.aanswer(q)).entries
            if call == "sqlite filtered aanswer":
                return (await sqlite.aanswer(RecallQuery("", 5, source="ops"))).entries
            if call == "hot cache aanswer":
                return (await HotCacheStore(sqlite).aanswer(q)).entries
            if call == "markdown astore":
                await markdown.astore("more", "The deploy target is prod-3 still.", "core")
                return markdown.list()
            return await markdown.arecall("deploy target", 5)

        async def main() -> Any:
            host = asyncio.ensure_future(asyncio.to_thread(gate.wait, BOUND_S))
            try:
                return await asyncio.wait_for(one(), 10)
            finally:
                gate.set()
                await host

        try:
            found = run(main, workers=1)
        finally:
            sqlite.close()
        assert any("prod-3" in e.content for e in found)
