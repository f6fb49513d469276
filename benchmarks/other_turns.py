"""Whether one turn's trouble costs other turns their memory (issue 29, twenty-ninth round).

Two cases a helper found, each counted over the healthy turns only:

* ``short``: 32 threads render 2,000 turns on one ``InMemoryStore`` (8,000 rows); one
  turn in five has a short deadline (``--short-ms``, as ``origins: {daemon:
  {deadline_ms: 20}}`` gives), the others the default 2 s. Before round 29 the short
  turns' calls made the store "hung" and healthy turns got ``store_busy``.
* ``slow``: 200 asyncio tasks render 600 turns on one ``SQLiteStore`` with a hashing
  embedder that takes 1.5 s for one prompt in ten. Before round 29 healthy turns waited
  for a recall slot held by turns waiting for the model, and lost their memory.

Prints, per case, how many healthy turns there were, how many lost their memory, and
the reasons their events gave. ``python benchmarks/other_turns.py [--short-ms 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from memory_inject import (
    InMemoryStore,
    MemoryInjectConfig,
    MemoryRecall,
    SQLiteStore,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.embedders import HashingEmbedder


def _count(stats: collections.Counter[str], event: object, key: str) -> None:
    assert isinstance(event, MemoryRecall)
    stats["healthy turns"] += 1
    if key not in event.rendered_keys:
        stats["without their memory"] += 1
    for line in event.degraded:
        stats["reason " + line.split(":")[0]] += 1


def short_deadlines(short_ms: int) -> collections.Counter[str]:
    """32 threads, one turn in five with ``deadline_ms=short_ms``."""
    store = InMemoryStore()
    for i in range(2000):
        store.store(f"s{i}_fact", f"The zeb{i} widget setting is value{i}.", session_id=f"s{i}")
        for j in range(3):
            store.store(
                f"s{i}_n{j}", f"note {j} about the zeb{i} widget", "daily", session_id=f"s{i}"
            )
    short, normal = MemoryInjectConfig(deadline_ms=short_ms), MemoryInjectConfig()
    stats: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    todo = list(range(2000))

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            cfg = short if i % 5 == 0 else normal
            prompt = f"what is the zeb{i} widget setting?"
            event = render_memory_context(store, prompt, sessions=[f"s{i}"], config=cfg).event
            if cfg is normal:
                with lock:
                    _count(stats, event, f"s{i}_fact")

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats


class _SlowForSome:
    """A hashing embedder that takes 1.5 s for a prompt holding "slowword"."""

    def __init__(self) -> None:
        self._inner = HashingEmbedder(64)
        self.name, self.dim = self._inner.name, self._inner.dim

    def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        if any("slowword" in t for t in texts):
            time.sleep(1.5)
        return [tuple(v) for v in self._inner.embed(list(texts))]


def slow_prompts(folder: Path) -> collections.Counter[str]:
    """200 tasks, one prompt in ten slow for the embedder."""
    store = SQLiteStore(folder / "m.db", embedder=_SlowForSome())
    for i in range(600):
        store.store(f"s{i}_fact", f"The zeb{i} widget setting is blue.", session_id=f"s{i}")
    stats: collections.Counter[str] = collections.Counter()
    todo = list(range(600))

    async def worker() -> None:
        while todo:
            i = todo.pop()
            slow = i % 10 == 0
            prompt = f"what is the zeb{i}{' slowword' if slow else ''} widget setting?"
            event = (await arender_memory_context(store, prompt, sessions=[f"s{i}"])).event
            if not slow:
                _count(stats, event, f"s{i}_fact")

    async def run() -> None:
        await asyncio.gather(*(worker() for _ in range(200)))

    asyncio.run(run())
    store.close()
    return stats


def main() -> None:
    """Run both cases and print their counts."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--short-ms", type=int, default=20, help="the short turns' deadline_ms")
    args = ap.parse_args()
    print(f"short ({args.short_ms} ms on 1 turn in 5):", dict(short_deadlines(args.short_ms)))
    with tempfile.TemporaryDirectory() as folder:
        print("slow (1.5 s embedding on 1 prompt in 10):", dict(slow_prompts(Path(folder))))


if __name__ == "__main__":
    main()
