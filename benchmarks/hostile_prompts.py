"""The time bound of a render under hostile prompts (issue 13, class 4): the worst we found.

python benchmarks/hostile_prompts.py [--size 1000000] [--repeat 3]

Each family is a prompt of ``--size`` characters built from a shape that made the
old credential scrubber backtrack (dotted words, ``eyJ-eyJ-...``) or a neighbour
of it, with a real token in front. For each it prints the best of ``--repeat``
runs of ``scrub_credentials`` over the whole prompt, of the event's summary
(``scrubbed_summary``), and of a whole render against an ``InMemoryStore`` and a
``SQLiteStore`` with 200 memories. Not a test: timings live here, never in an
assert.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memory_inject import InMemoryStore, render_memory_context
from memory_inject._text import scrub_credentials, scrubbed_summary
from memory_inject.storage.sqlite import SQLiteStore

FAMILIES = {
    "dotted words": "a.",
    "eyJ-eyJ-": "eyJ-",
    "eyJ.eyJ.": "eyJ.",
    "almost a JWT": "eyJaaaaaaaa.",
    "scheme runs": "x://",
    "colons": "a:",
    "open quote": 'token="',
    "spaces after a key": "token ",
    "prose": "the deploy waits for Dana ",
}
TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"  # noqa: S105 - a fake token to hide


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    memory = InMemoryStore()
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SQLiteStore(Path(tmp) / "memory.db")
        for i in range(200):
            for store in (memory, sqlite):
                store.store(f"m{i}", f"the deploy of service {i} waits for Dana", "core")
        print(f"{'family':<20} {'scrub':>8} {'summary':>8} {'memory':>8} {'sqlite':>8}  (s)")
        worst = 0.0
        for name, unit in FAMILIES.items():
            prompt = f"my key is {TOKEN} " + unit * (args.size // len(unit))
            row = [
                best(lambda p=prompt: scrub_credentials(p), args.repeat),
                best(lambda p=prompt: scrubbed_summary(p, 200), args.repeat),
                best(lambda p=prompt: render_memory_context(memory, p), args.repeat),
                best(lambda p=prompt: render_memory_context(sqlite, p), args.repeat),
            ]
            worst = max(worst, row[2], row[3])
            print(f"{name:<20} " + " ".join(f"{t:8.3f}" for t in row))
        sqlite.close()
    print(f"slowest render: {worst:.3f} s for a {args.size:,}-character prompt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
