"""A personal memory asked as people ask: what the default block answers, and what it wrongly shows.

LoCoMo (``relevance.py``) is chats between two friends; what ``remember()``, the CLI and
the memory tools write is more often a short fact about the user, one call each. This
probe stores the 25 facts of ``facts_prompts.json`` (our own text) and renders, with the
default config, its 43 questions (each answered by one fact, worded as people ask: "what
is my dog called?" for "The user's dog is named Biscuit"), its 15 near-miss questions
(about the same life, which no fact answers: "what's my cat called?") and the off-topic
prompts of ``offtopic_prompts.txt``.

* **answered**: questions whose block holds their fact;
* **precision**: their facts among all the entries rendered for the questions;
* **near-miss / off-topic**: prompts that got a block at all (the right block is empty).

``--frames`` asks every question and near miss again behind each of :data:`FRAMES` ("do
you remember what is my dog called?", "I'm wondering, ...") and prints one row a frame.

The facts are written five ways (``--layout``, default all): ``now`` (one ``store()``
after another, as a session of ``remember()`` does, ``source="remember"``), ``apart`` (a
day apart: no near context), ``event`` (one timestamp: one event, each row's context from
it, as an import of one batch), ``session`` (one after another in one chat session, as
``memory_store`` writes during a chat, ``source="tool"``) and ``days`` (in one long-lived
session, a day apart: no context, as the session's neighbours count only within 30
minutes). Facts those two sources write take no neighbours as context
(``day_vote.STANDALONE_SOURCES``); before that, ``now`` and ``session`` rows held the two
facts written before them.

Reproduce: ``python benchmarks/facts.py [--backend postgres [--dsn DSN]] [--misses]``
(a few seconds on SQLite); ``--embedder minilm-onnx [--gate 0.625]`` renders with the
hybrid default (and the prompt gate) instead of keywords alone. ``--prompts FILE`` asks
another set: ``facts_heldout.json`` (30 facts written as users and agents write them, 55
questions, 20 near misses) and ``facts_heldout2.json`` (22 facts as the memory tools
write them, 40 casually typed questions, 15 near misses) and ``facts_heldout3.json`` (a
coding assistant's 28 facts about a developer and their projects, 50 questions, 18 near
misses, written by a helper that never read the rules), each written after the rules it
measures were set ("what breed" was then made a rule on misses of the first two).
``--keys derived`` stores each fact under the key ``remember()`` derives (``mem_`` and
a hash) instead of its name, which the key column would index.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters._remember import memory_key
from benchmarks._locomo_data import _open, backend
from benchmarks.relevance import read_offtopic
from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.embedders import make_embedder
from memory_inject.storage.fusion import default_fusion

HERE = Path(__file__).resolve().parent
PROMPTS = HERE / "facts_prompts.json"
LAYOUTS = ("now", "apart", "event", "session", "days")
#: How people open a question to an agent with a memory (``--frames``): none of these
#: words is what the question is about, so each framed question should fare as the bare one.
FRAMES = (
    "",
    "do you remember ",
    "can you remind me ",
    "do you know ",
    "I'm wondering, ",
    "I've forgotten, ",
    "I'm curious: ",
    "I don't remember, ",
)
#: The chat session of the ``session`` layout's writes and renders.
SESSION = "chat-1"
#: The clock of the ``apart`` and ``event`` layouts' writes (the renders run at the real now).
START = datetime(2026, 11, 1, 9, tzinfo=UTC)

#: What a render shows for a prompt: the keys of its block's entries, in order.
Render = Callable[[str], tuple[str, ...]]


def read_prompts(path: Path = PROMPTS) -> dict[str, Any]:
    """The facts (``{key: text}``), questions (``[[prompt, key], ...]``) and near misses."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def write(store: Any, facts: Mapping[str, str], layout: str) -> None:
    """Store ``facts`` one call each, stamped as ``layout`` says."""
    for i, (key, text) in enumerate(facts.items()):
        if layout == "now":
            store.store(key, text, source="remember")
        elif layout == "apart":
            store.store(key, text, timestamp=(START + timedelta(days=i)).isoformat())
        elif layout == "event":
            store.store(key, text, timestamp=START.isoformat())
        elif layout == "session":
            store.store(key, text, session_id=SESSION, source="tool")
        elif layout == "days":
            stamp = (START + timedelta(days=i)).isoformat()
            store.store(key, text, timestamp=stamp, session_id=SESSION)
        else:
            raise ValueError(f"layout must be one of {LAYOUTS} (got {layout!r})")


def evaluate(
    render: Render,
    questions: Sequence[Sequence[str]],
    nearmiss: Sequence[str],
    offtopic: Sequence[str],
) -> dict[str, Any]:
    """Count what ``render`` shows for each prompt set (see the module's doc)."""
    answered: list[str] = []
    missed: list[tuple[str, tuple[str, ...]]] = []
    shown = right = 0
    for prompt, key in questions:
        keys = render(prompt)
        shown += len(keys)
        right += keys.count(key)
        if key in keys:
            answered.append(prompt)
        else:
            missed.append((prompt, keys))
    false_near = [(p, k) for p in nearmiss if (k := render(p))]
    false_off = [(p, k) for p in offtopic if (k := render(p))]
    return {
        "questions": len(questions),
        "answered": len(answered),
        "precision": right / shown if shown else 0.0,
        "nearmiss": len(nearmiss),
        "nearmiss_injected": len(false_near),
        "offtopic": len(offtopic),
        "offtopic_injected": len(false_off),
        "missed": missed,
        "false": false_near + false_off,
    }


def behind(question: str, frame: str) -> str:
    """``question`` behind ``frame``, its first letter lowered ("do you remember when ...")."""
    return frame + question[:1].lower() + question[1:] if frame else question


def framed(prompts: Mapping[str, Any], frame: str) -> dict[str, Any]:
    """``prompts`` with every question and near miss asked behind ``frame``."""
    out = dict(prompts)
    out["questions"] = [[behind(q, frame), key] for q, key in prompts["questions"]]
    out["nearmiss"] = [behind(q, frame) for q in prompts["nearmiss"]]
    return out


def run(
    layout: str,
    prompts: Mapping[str, Any],
    offtopic: Sequence[str],
    tmp: Path,
    embedder: Any = None,
    config: MemoryInjectConfig | None = None,
    *,
    derived: bool = False,
) -> dict[str, Any]:
    """:func:`evaluate` against a fresh store written as ``layout`` (default config);
    ``derived`` stores each fact under the key ``remember()`` derives from its text
    (``mem_`` and a hash: no word of the key is indexed), not under its name."""
    store = _open(tmp / f"facts_{layout}.db", embedder, default_fusion(embedder))
    cfg = config or MemoryInjectConfig()
    facts: Mapping[str, str] = prompts["facts"]
    names = {memory_key(text): name for name, text in facts.items()} if derived else {}
    try:
        write(store, {memory_key(t): t for t in facts.values()} if derived else facts, layout)

        sessions = [SESSION] if layout in ("session", "days") else ()

        def render(prompt: str) -> tuple[str, ...]:
            entries = render_memory_context(store, prompt, config=cfg, sessions=sessions).entries
            return tuple(names.get(e.key, e.key) for e in entries)

        return evaluate(render, prompts["questions"], prompts["nearmiss"], offtopic)
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--layout", choices=LAYOUTS, action="append")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    ap.add_argument("--misses", action="store_true", help="print each miss and false block")
    ap.add_argument(
        "--embedder",
        choices=("none", "hashing", "sentence-transformers", "minilm-onnx"),
        default="none",
        help="the store's embedder (its default fusion); none: keywords only",
    )
    ap.add_argument("--gate", type=float, help="min_prompt_similarity (needs --embedder)")
    ap.add_argument("--frames", action="store_true", help="also each question behind FRAMES")
    ap.add_argument(
        "--prompts",
        type=Path,
        default=PROMPTS,
        help="the facts, questions and near misses (facts_heldout.json: the held-out set)",
    )
    ap.add_argument(
        "--keys",
        choices=("named", "derived"),
        default="named",
        help="each fact under its name (dog, car) or the key remember() derives (mem_<hash>)",
    )
    args = ap.parse_args()
    prompts, offtopic = read_prompts(args.prompts), read_offtopic()
    model = make_embedder(args.embedder)
    cfg = MemoryInjectConfig(min_prompt_similarity=args.gate)
    derived = args.keys == "derived"
    print(
        f"backend: {args.backend}; {len(prompts['facts'])} facts, keys {args.keys}; "
        f"embedder {args.embedder}, "
        f"min_prompt_similarity {args.gate}, otherwise the default config"
    )
    print("| layout | answered | precision | near-miss injected | off-topic injected |")
    print("|---|---:|---:|---:|---:|")
    details = []
    with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
        for layout in args.layout or LAYOUTS:
            r = run(layout, prompts, offtopic, Path(tmp), model, cfg, derived=derived)
            details.append((layout, r))
            print(
                f"| {layout} | {r['answered']}/{r['questions']} | {r['precision']:.2f} | "
                f"{r['nearmiss_injected']}/{r['nearmiss']} | "
                f"{r['offtopic_injected']}/{r['offtopic']} |"
            )
    if args.frames:
        layouts = args.layout or LAYOUTS
        print("\n| frame | " + " | ".join(f"{x}: answered, near-miss" for x in layouts) + " |")
        print("|---|" + "---:|" * len(layouts))
        with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
            for frame in FRAMES:
                cells = []
                for layout in layouts:
                    r = run(
                        layout, framed(prompts, frame), (), Path(tmp), model, cfg, derived=derived
                    )
                    cells.append(
                        f"{r['answered']}/{r['questions']}, "
                        f"{r['nearmiss_injected']}/{r['nearmiss']}"
                    )
                print(f"| {frame.strip() or '(none)'} | " + " | ".join(cells) + " |")
    if args.misses:
        for layout, r in details:
            print(f"\n{layout}:")
            for prompt, keys in r["missed"]:
                print(f"  missed  {prompt!r} -> {list(keys)}")
            for prompt, keys in r["false"]:
                print(f"  false   {prompt!r} -> {list(keys)}")


if __name__ == "__main__":
    main()
