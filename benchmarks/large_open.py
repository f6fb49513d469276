"""A large embedded store as an agent meets it: just opened, then written to.

    python benchmarks/large_open.py /tmp/hybrid-sizes/lib-1000000.db --copy /tmp/large-open

``hybrid_sizes.py --keep`` writes the store (1M rows take about 15 minutes) and
its graph; this copies both to ``--copy`` (the writes here never touch the kept
store) and opens the copy with the embedder it was written with
(``HashingEmbedder(256)``). It renders one question with the default
configuration (``deadline_ms`` 2000) every 0.5 s and prints, for each state,
the time since the store opened, the render's time, the block's size, the
event's notes (the first word of each), until five renders in a row have no
note and take under 100 ms each. Then it stores one memory and times the next
render (the first write after the matrix was read), and ``--writes`` more
write-and-render pairs (p50).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_inject import render_memory_context
from memory_inject.embedders import HashingEmbedder
from memory_inject.signals import memory_recall
from memory_inject.storage import SQLiteStore

QUESTION = "What did Caroline research?"


def main() -> None:
    """Copy, open, render until steady, then write (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path, help="a lib-N.db file hybrid_sizes.py kept")
    parser.add_argument("--copy", type=Path, required=True, help="directory for the copy")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    args = parser.parse_args()
    if not args.store.exists():
        parser.error(f"{args.store}: no such store (write one with hybrid_sizes.py --keep)")
    args.copy.mkdir(parents=True, exist_ok=True)
    for f in args.store.parent.glob(args.store.name + "*"):
        shutil.copyfile(f, args.copy / f.name)
    events: list[Any] = []
    memory_recall.connect(lambda sender, **kw: events.append(kw["event"]), weak=False)

    def render() -> tuple[float, int, Any]:
        events.clear()
        t = time.perf_counter()
        block = render_memory_context(store, QUESTION).text or ""
        return (time.perf_counter() - t) * 1000.0, len(block), events[-1] if events else None

    store = SQLiteStore(args.copy / args.store.name, embedder=HashingEmbedder(args.dim))
    opened, last, fast = time.perf_counter(), None, 0
    while time.perf_counter() - opened < args.max_seconds:
        ms, size, event = render()
        notes = tuple(n.split(":")[0] for n in getattr(event, "degraded", ()))
        state = (size > 0, notes)
        if state != last or ms > 100.0:
            print(
                f"{time.perf_counter() - opened:6.1f} s after open: render {ms:8.1f} ms, "
                f"block {size} chars, notes {list(notes)}",
                flush=True,
            )
        last = state
        fast = fast + 1 if not notes and ms < 100.0 else 0
        if fast == 5:  # the vectors are in and the graph is searched
            break
        time.sleep(0.5)
    store.store("large-open-0", f"we talked about {QUESTION}", session_id="large-open")
    ms, size, _ = render()
    print(f"first render after the first write: {ms:.1f} ms, block {size} chars")
    times = []
    for i in range(1, args.writes + 1):
        store.store(f"large-open-{i}", f"note {i} about the day", session_id="large-open")
        times.append(render()[0])
    if times:
        print(f"render after a write, p50 of {len(times)}: {statistics.median(times):.1f} ms")
    store.close()


if __name__ == "__main__":
    main()
