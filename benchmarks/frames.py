"""LoCoMo's questions asked as people ask them: block recall behind each frame of ``facts.FRAMES``.

Every dev question is rendered with the default config against its conversation's store
(chat streams, clock one day after the last session, as ``relevance.py``), bare and
behind each frame ("do you remember when did Caroline go to the support group?"). A
frame says how the question is asked, not what it is about, so each row should match the
bare one: **block recall** (the share of a question's evidence among the rendered
entries, averaged) and **with a block** (questions that got one).

Three sets of frames (``--set``, default all): ``facts``, :data:`facts.FRAMES`, and
``more``, :data:`MORE`, are the ones the query rules were written against;
``held-out``, :data:`HELD_OUT`, was written after the rules and never changed them, so
it says how far the rules carry to openers nobody listed.

Reproduce: ``python benchmarks/frames.py [--set held-out] [--backend postgres [--dsn DSN]]``
(about 5 s a set on SQLite).
The data is CC BY-NC and is read from ``../shared/data/locomo-dev``, never copied here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, backend, build_store, evaluation_now, load, mean
from benchmarks.facts import FRAMES, behind
from benchmarks.relevance import block_recall
from memory_inject import render_memory_context
from memory_inject.storage.fusion import default_fusion

#: Openers the interjection and opener rules (``_stopwords._INTERJECTIONS``,
#: ``fusion._OPENER``) were written against.
MORE = (
    "hey, ",
    "quick question: ",
    "btw ",
    "I was wondering ",
    "could you tell me ",
    "any idea ",
    "I need to know ",
    "just checking: ",
    "sorry, ",
    "so, ",
    "ok so ",
    "hmm, ",
    "out of curiosity, ",
    "remind me, ",
    "I think you know this: ",
    "let me ask you: ",
    "by the way, ",
    "help me out: ",
)
#: Openers written after the rules, never used to change them.
HELD_OUT = (
    "hey there, ",
    "quick one: ",
    "one more thing: ",
    "real quick, ",
    "question for you: ",
    "I forgot to ask, ",
    "oh and ",
    "wait, ",
    "honestly, ",
    "I have a question: ",
    "can I ask something? ",
    "um, ",
    "lol ",
    "ok, ",
    "so I was thinking, ",
    "tell me again: ",
    "remind me again, ",
    "do you happen to know ",
    "not sure if you remember, ",
)
#: A second held-out set, written after :data:`HELD_OUT` had been measured and its misses
#: added to the rules (so :data:`HELD_OUT` is no longer held out), before measuring this.
HELD_OUT_2 = (
    "real quick question: ",
    "hey, one thing: ",
    "ok random question: ",
    "so here's a question: ",
    "just a quick one: ",
    "I was trying to remember ",
    "quick reminder please: ",
    "can you check ",
    "I'm not sure, ",
    "I've got a question, ",
    "mind telling me ",
    "before I forget, ",
    "hey there! quick one: ",
    "out of interest, ",
    "I keep forgetting, ",
)
#: A LoCoMo question behind a frame, as the facts probe asks its own.
framed = behind
SETS = {
    "facts": FRAMES,
    "more": ("", *MORE),
    "held-out": ("", *HELD_OUT),
    "held-out-2": ("", *HELD_OUT_2),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    ap.add_argument("--set", choices=tuple(SETS), action="append", dest="sets")
    args = ap.parse_args()
    records, queries = load(args.data)
    print(f"backend: {args.backend}; {len(queries)} questions, default config, chat streams")
    with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
        stores = {
            conv: (
                build_store(Path(tmp) / f"{i}.db", rows, "core", None, default_fusion(None)),
                evaluation_now(rows),
            )
            for i, (conv, rows) in enumerate(records.items())
        }
        try:
            for name in args.sets or SETS:
                print(f"\n{name}:\n\n| frame | block recall | with a block |\n|---|---:|---:|")
                for frame in SETS[name]:
                    recall, blocks = [], 0
                    for q in queries:
                        store, now = stores[q["conversation"]]
                        text = framed(q["question"], frame)
                        keys = [e.key for e in render_memory_context(store, text, now=now).entries]
                        recall.append(block_recall(keys, q["evidence"]))
                        blocks += bool(keys)
                    label = frame.strip() or "(none)"
                    print(f"| {label} | {mean(recall):.3f} | {blocks / len(queries):.3f} |")
        finally:
            for store, _ in stores.values():
                store.close()


if __name__ == "__main__":
    main()
