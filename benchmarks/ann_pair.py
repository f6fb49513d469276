"""Hybrid recall on a kept store, the graph searched for q and -q at once or one after the other.

    python benchmarks/ann_pair.py /tmp/hybrid-sizes/lib-1000000.db [--passes 4]

``"minmax"`` fusion reads the scope's least cosine, the nearest row to ``-q``. The
store searches the HNSW graph for ``q`` and ``-q`` in one call on two threads
(:meth:`~memory_inject.storage.sqlite.vector_ann.AnnScope.top` with ``span``); this
runs the store's default hybrid recall (``MODEL_FUSION``, vectors from
``HashingEmbedder(256)`` computed before the timing, as in ``hybrid_sizes.py``) over up
to 300 dev questions with the pair and without it (the two searches one after the
other, as before issue 29's seventh round), alternating ``--passes`` times in one
process on one open store, and prints p50 / mean per pass and overall, and how many of
the 300 top-10 lists are equal. The store is one ``hybrid_sizes.py --keep`` wrote
(past 50,000 rows: the graph is loaded from its saved file or built first).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks._locomo_data import DEFAULT_DATA, load
from benchmarks.hybrid_sizes import DIM, Given, _wait_ready
from memory_inject.embedders import HashingEmbedder
from memory_inject.storage import SQLiteStore
from memory_inject.storage.sqlite.vector_ann import AnnScope


def main() -> None:
    """Time the two ways alternately (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path, help="a lib-N.db file hybrid_sizes.py kept")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.store.exists():
        parser.error(f"{args.store}: no such store (write one with hybrid_sizes.py --keep)")
    _, queries = load(args.data)
    questions = list(dict.fromkeys(q["question"] for q in queries))[:300]
    qvecs = np.asarray(HashingEmbedder(DIM).embed(questions), dtype=np.float32)
    given = Given({q: v.tolist() for q, v in zip(questions, qvecs, strict=True)})
    pair = AnnScope._pair
    apart = lambda self, k: None  # noqa: E731 - the nearest and farthest searched apart
    times: dict[str, list[list[float]]] = {"apart": [], "pair": []}
    with SQLiteStore(args.store, embedder=given) as store:
        print(f"graph ready in {_wait_ready(store, questions[0]):.1f} s", flush=True)
        for q in questions[:20]:
            store.recall(q, 10)
        try:
            for n in range(args.passes):
                for name in ("apart", "pair") if n % 2 == 0 else ("pair", "apart"):
                    AnnScope._pair = pair if name == "pair" else apart  # type: ignore[method-assign]
                    run = []
                    for q in questions:
                        t0 = time.perf_counter()
                        store.recall(q, 10)
                        run.append((time.perf_counter() - t0) * 1000.0)
                    times[name].append(run)
            got = {}
            for name in ("pair", "apart"):
                AnnScope._pair = pair if name == "pair" else apart  # type: ignore[method-assign]
                got[name] = [[e.key for e in store.recall(q, 10)] for q in questions]
        finally:
            AnnScope._pair = pair  # type: ignore[method-assign]
    for name, runs in times.items():
        every = [t for run in runs for t in run]
        per = " ".join(f"{statistics.median(r):.2f}/{statistics.mean(r):.2f}" for r in runs)
        print(
            f"{name:5s} p50/mean per pass {per} | all p50 {statistics.median(every):.2f} "
            f"mean {statistics.mean(every):.2f} ms"
        )
    same = sum(a == b for a, b in zip(got["pair"], got["apart"], strict=True))
    print(f"top 10 equal: {same} of {len(questions)}")


if __name__ == "__main__":
    main()
