"""A chat whose own autosaved messages match its questions: is the fact shown, and at what cost?

One SQLite store, one session. It holds one fact ("Production deploys go to prod-3.")
and N autosaved user messages (``user_msg_*``, which the skip set never shows), plus 200
unrelated facts. Two prompts are rendered 300 times each and timed (p50, ms):

* ``plain``: "where do production deploys go?": the fact outranks the autosaves;
* ``crowded``: "where do production deploys go? (asked 7x)": the autosaves share every
  word of the prompt and fill the recall limit of 5 (issue 29, thirty-first round:
  before the refill, the block was empty from N = 5 on).

Usage: ``python benchmarks/crowded_turns.py [N ...]`` (default 0 3 30 1000). Run it with
``PYTHONPATH`` at a worktree of another commit to compare.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from memory_inject import SQLiteStore, render_memory_context

PROMPTS = {
    "plain": "where do production deploys go?",
    "crowded": "where do production deploys go? (asked 7x)",
}


def measure(n: int, reps: int = 300) -> dict[str, tuple[float, int]]:
    """``{prompt: (p50 ms, renders that showed the fact)}`` for a store of ``n`` autosaves."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "m.db")
        store.store("deploy_target", "Production deploys go to prod-3.", "core", session_id="c")
        for i in range(n):
            text = f"where do production deploys go? (asked {i}x)"
            store.store(f"user_msg_{i}", text, "conversation", session_id="c")
        for i in range(200):
            store.store(f"f{i}", f"unrelated fact number {i} about gardening and tomatoes")
        out: dict[str, tuple[float, int]] = {}
        for name, prompt in PROMPTS.items():
            times, shown = [], 0
            for _ in range(reps):
                t0 = time.perf_counter()
                res = render_memory_context(store, prompt, sessions=["c"], origin="interactive")
                times.append(time.perf_counter() - t0)
                shown += "prod-3" in res.text
            out[name] = (statistics.median(times) * 1e3, shown)
        store.close()
    return out


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [0, 3, 30, 1000]
    print("| autosaves | plain p50 ms | plain shown | crowded p50 ms | crowded shown |")
    print("|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = measure(n)
        (pt, ps), (ct, cs) = r["plain"], r["crowded"]
        print(f"| {n} | {pt:.2f} | {ps}/300 | {ct:.2f} | {cs}/300 |")


if __name__ == "__main__":
    main()
