"""LoCoMo's questions asked as people ask them: block recall behind each frame of ``facts.FRAMES``.

Every dev question is rendered with the default config against its conversation's store
(chat streams, clock one day after the last session, as ``relevance.py``), bare and
behind each frame ("do you remember when did Caroline go to the support group?"). A
frame says how the question is asked, not what it is about, so each row should match the
bare one: **block recall** (the share of a question's evidence among the rendered
entries, averaged) and **with a block** (questions that got one).

Reproduce: ``python benchmarks/frames.py [--backend postgres [--dsn DSN]]`` (about a minute).
The data is CC BY-NC and is read from ``../shared/data/locomo-dev``, never copied here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, backend, build_store, evaluation_now, load, mean
from benchmarks.facts import FRAMES
from benchmarks.relevance import block_recall
from memory_inject import render_memory_context
from memory_inject.storage.fusion import default_fusion


def framed(question: str, frame: str) -> str:
    """``question`` behind ``frame``, its first letter lowered ("do you remember when ...")."""
    return frame + question[:1].lower() + question[1:] if frame else question


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    args = ap.parse_args()
    records, queries = load(args.data)
    print(f"backend: {args.backend}; {len(queries)} questions, default config, chat streams")
    print("| frame | block recall | with a block |\n|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
        stores = {
            conv: (
                build_store(Path(tmp) / f"{i}.db", rows, "core", None, default_fusion(None)),
                evaluation_now(rows),
            )
            for i, (conv, rows) in enumerate(records.items())
        }
        try:
            for frame in FRAMES:
                recall, blocks = [], 0
                for q in queries:
                    store, now = stores[q["conversation"]]
                    res = render_memory_context(store, framed(q["question"], frame), now=now)
                    keys = [e.key for e in res.entries]
                    recall.append(block_recall(keys, q["evidence"]))
                    blocks += bool(keys)
                label = frame.strip() or "(none)"
                print(f"| {label} | {mean(recall):.3f} | {blocks / len(queries):.3f} |")
        finally:
            for store, _ in stores.values():
                store.close()


if __name__ == "__main__":
    main()
