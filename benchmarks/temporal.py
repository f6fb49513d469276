"""Temporal grounding on LoCoMo dev: "what did we talk about yesterday?" (issue 29, eighth round).

For every session of the five dev conversations (after the first), the turn's clock is
set to noon of a day after that session and the prompts below are rendered against a
store holding the conversation up to that day (as it would have been then: no later
session), with the default config and with a recall plan that adds the ``time`` query
(``default`` 8, ``time`` 8, cap 4). The target rows of a prompt are the turns written on
the day (or in the week) the phrase names, of the speaker it names for "what did
<speaker> say".

* **hit rate**: prompts whose block holds at least one target row;
* **precision**: target rows among all the rows rendered for these prompts;
* **wrong-day rows**: rows rendered from another day, per prompt.

Then the same two configs on what must not change: the dev questions' block recall and the
off-topic, near-miss and contentless false-injection rates (``relevance.py``'s prompt
sets, stores of whole conversations, clock one day after the last session).

Reproduce: ``python benchmarks/temporal.py [--backend postgres [--dsn DSN]]`` (20 s on
SQLite); ``--cost`` prints what grounding a prompt costs, by its length, and a render's p50
under each config; ``--about`` the memory-side prototype (rows that name a day).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _locomo_data import DEFAULT_DATA, backend, build_store, evaluation_now, load, mean

from memory_inject import render_memory_context
from memory_inject.config import MemoryInjectConfig, RecallPlanConfig
from memory_inject.config._recall_plan import PlanQueryConfig
from memory_inject.storage import Fusion
from memory_inject.temporal import time_window

HERE = Path(__file__).resolve().parent

CONFIGS = {
    "default config": MemoryInjectConfig(),
    "plan: default": MemoryInjectConfig(
        recall_plan=RecallPlanConfig(enabled=True, queries=[PlanQueryConfig("default", 8)], cap=4)
    ),
    "plan: default + time": MemoryInjectConfig(
        recall_plan=RecallPlanConfig(
            enabled=True,
            queries=[PlanQueryConfig("default", 8), PlanQueryConfig("time", 8)],
            cap=4,
        )
    ),
}


def _day(ts: str) -> str:
    return ts[:10]


def _prompts(
    day: datetime, speakers: Iterable[str]
) -> list[tuple[str, datetime, str | None, set[str]]]:
    """``(prompt, now, speaker or None, the days it names)`` for ``day`` (a session's date)."""
    noon = day.replace(hour=12, minute=0, second=0, microsecond=0)
    after = noon + timedelta(days=1)
    that_day = {day.date().isoformat()}
    monday = noon - timedelta(days=day.weekday())
    week = {(monday + timedelta(days=i)).date().isoformat() for i in range(7)}
    out: list[tuple[str, datetime, str | None, set[str]]] = [
        ("What did we talk about yesterday?", after, None, that_day),
        ("Remind me what happened yesterday.", after, None, that_day),
        ("What did we talk about 3 days ago?", noon + timedelta(days=3), None, that_day),
        (
            f"What did we discuss on {day.day} {day:%B %Y}?",
            noon + timedelta(days=40),
            None,
            that_day,
        ),
        (f"What did we decide on {day:%A}?", noon + timedelta(days=2), None, that_day),
        ("What did we talk about last week?", monday + timedelta(days=9), None, week),
    ]
    out += [(f"What did {s} say yesterday?", after, s, that_day) for s in speakers]
    return out


def grounding(records: dict[str, list[dict[str, Any]]], tmp: Path) -> dict[str, Any]:
    """Per config: hit rate, precision, wrong-day rows per prompt."""
    stats: dict[str, dict[str, list[float]]] = {c: defaultdict(list) for c in CONFIGS}
    for conv, rows in records.items():
        speakers = sorted({r["speaker"] for r in rows})
        days = sorted({_day(r["timestamp"]) for r in rows})
        for i, day in enumerate(days[1:], start=1):
            when = datetime.fromisoformat(day).replace(tzinfo=UTC)
            known = [r for r in rows if _day(r["timestamp"]) <= day]
            store = build_store(tmp / f"t-{conv}-{i}.db", known, "core", None, Fusion())
            try:
                for prompt, now, speaker, named in _prompts(when, speakers):
                    target = {
                        r["id"]
                        for r in known
                        if _day(r["timestamp"]) in named and speaker in (None, r["speaker"])
                    }
                    day_of = {r["id"]: _day(r["timestamp"]) for r in known}
                    for name, cfg in CONFIGS.items():
                        keys = [
                            e.key
                            for e in render_memory_context(
                                store, prompt, config=cfg, now=now
                            ).entries
                        ]
                        s = stats[name]
                        s["hit"].append(float(bool(target & set(keys))))
                        s["right"].append(float(len(target & set(keys))))
                        s["shown"].append(float(len(keys)))
                        s["wrong_day"].append(float(sum(day_of.get(k) not in named for k in keys)))
            finally:
                store.close()
    return {
        name: {
            "prompts": len(s["hit"]),
            "hit_rate": mean(s["hit"]),
            "precision": sum(s["right"]) / max(1.0, sum(s["shown"])),
            "wrong_day_per_prompt": mean(s["wrong_day"]),
        }
        for name, s in stats.items()
    }


def _lines(path: Path) -> list[str]:
    return [
        t.strip()
        for t in path.read_text(encoding="utf-8").splitlines()
        if t.strip() and not t.startswith("#")
    ]


def unchanged(
    records: dict[str, list[dict[str, Any]]], queries: list[dict[str, Any]], tmp: Path
) -> dict[str, Any]:
    """Per config: dev block recall and the false-injection rates."""
    offtopic = _lines(HERE / "offtopic_prompts.txt")
    nearmiss = _lines(HERE / "nearmiss_prompts.txt")
    with (HERE / "contentless_prompts.jsonl").open(encoding="utf-8") as f:
        contentless = [json.loads(line) for line in f if line.strip() and not line.startswith("#")]
    out: dict[str, dict[str, list[float]]] = {c: defaultdict(list) for c in CONFIGS}
    for conv, rows in records.items():
        store = build_store(tmp / f"u-{conv}.db", rows, "core", None, Fusion())
        now = evaluation_now(rows)
        try:
            for name, cfg in CONFIGS.items():

                def keys(
                    prompt: str, cfg: MemoryInjectConfig = cfg, store: Any = store, now: Any = now
                ) -> list[str]:
                    out = render_memory_context(store, prompt, config=cfg, now=now)
                    return [e.key for e in out.entries]

                for q in (q for q in queries if q["conversation"] == conv):
                    ev = set(q["evidence"])
                    got = set(keys(q["question"]))
                    out[name]["block_recall"].append(len(ev & got) / len(ev) if ev else 0.0)
                for kind, prompts in (
                    ("offtopic", offtopic),
                    ("nearmiss", nearmiss),
                    ("contentless", contentless),
                ):
                    out[name][kind].extend(float(bool(keys(p))) for p in prompts)
        finally:
            store.close()
    return {name: {k: mean(v) for k, v in s.items()} for name, s in out.items()}


def cost() -> None:
    """``time_window``'s cost per prompt (median of repeated calls), by prompt length."""
    now = datetime(2026, 12, 4, 18, tzinfo=UTC)
    filler = "Please review this paragraph about deployment pipelines and caching. " * 300
    prompts = {
        "48 characters, no time": "how do I rebase a git branch onto main safely?",
        "33 characters, yesterday": "what did we talk about yesterday?",
        "2,000 characters, no time": filler[:2000],
        "20,000 characters, no time": filler[:20000],
    }
    print("| prompt | time_window p50 (us) |")
    print("|---|---:|")
    for name, prompt in prompts.items():
        times = []
        for _ in range(2000 if len(prompt) < 5000 else 200):
            t = time.perf_counter()
            time_window(prompt, now)
            times.append(time.perf_counter() - t)
        print(f"| {name} | {statistics.median(times) * 1e6:.1f} |")


def render_cost(records: dict[str, list[dict[str, Any]]], tmp: Path) -> None:
    """Render p50 per config on one conversation's store, a prompt with and one without a time."""
    conv, rows = next(iter(records.items()))
    store = build_store(tmp / f"r-{conv}.db", rows, "core", None, Fusion())
    now = evaluation_now(rows)
    prompts = {
        "what did we talk about yesterday?": "what did we talk about yesterday?",
        "what did we talk about this year? (the whole chat)": "what did we talk about this year?",
        "a dev question (no time)": "What did Caroline research?",
    }
    print("| prompt | " + " | ".join(f"{n} p50 (ms)" for n in CONFIGS) + " |")
    print("|---|" + "---:|" * len(CONFIGS))
    try:
        for label, prompt in prompts.items():
            cells = []
            for cfg in CONFIGS.values():
                for _ in range(20):
                    render_memory_context(store, prompt, config=cfg, now=now)
                times = []
                for _ in range(300):
                    t = time.perf_counter()
                    render_memory_context(store, prompt, config=cfg, now=now)
                    times.append(time.perf_counter() - t)
                cells.append(f"{statistics.median(times) * 1e3:.3f}")
            print(f"| {label} | " + " | ".join(cells) + " |")
    finally:
        store.close()


def about_probe(
    records: dict[str, list[dict[str, Any]]], queries: list[dict[str, Any]], tmp: Path
) -> None:
    """Memory-side grounding: does "What happened on D?" find the turn that *said* D?

    Each temporal dev question whose answer is one day D ("When did Caroline go to the
    support group?" -> 7 May 2023) becomes "What happened on 7 May 2023?", rendered with
    the plan (the ``time`` query shows first the rows whose own time phrase, read at their
    timestamp, names D: "I went to the support group yesterday", written on 8 May; then the
    rows written on D). Hit: the question's evidence in the block.
    """
    cfg = CONFIGS["plan: default + time"]
    asked = hits = written_that_day = evidence = 0
    for conv, rows in records.items():
        store = build_store(tmp / f"a-{conv}.db", rows, "core", None, Fusion())
        now = evaluation_now(rows)
        stamp = {r["id"]: datetime.fromisoformat(r["timestamp"]).date() for r in rows}
        try:
            for q in (q for q in queries if q["conversation"] == conv):
                if q["category_name"] != "temporal":
                    continue
                named = time_window(str(q["answer"]), now)
                if named is None or named.until - named.since > timedelta(days=1):
                    continue
                day = named.since
                prompt = f"What happened on {day.day} {day:%B %Y}?"
                shown = {
                    e.key for e in render_memory_context(store, prompt, config=cfg, now=now).entries
                }
                ev = set(q["evidence"])
                asked += 1
                hits += bool(ev & shown)
                evidence += len(ev)
                written_that_day += sum(stamp.get(e) == day.date() for e in ev)
        finally:
            store.close()
    print(
        f"{asked} temporal questions answered by one day; evidence written that day "
        f"{written_that_day} of {evidence}; evidence in the block {hits / max(1, asked):.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", help="postgres: an existing server (default: a private one)")
    ap.add_argument("--cost", action="store_true", help="only what grounding and a render cost")
    ap.add_argument("--about", action="store_true", help="only the rows that name a day")
    args = ap.parse_args()
    if args.about:
        with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
            about_probe(*load(args.data), Path(tmp))
        print(f"backend: {args.backend}")
        return
    if args.cost:
        cost()
        with tempfile.TemporaryDirectory() as tmp:
            render_cost(load(args.data)[0], Path(tmp))
        return
    records, queries = load(args.data)
    with tempfile.TemporaryDirectory() as tmp, backend(args.backend, args.dsn):
        g = grounding(records, Path(tmp))
        u = unchanged(records, queries, Path(tmp))
    print(f"backend: {args.backend}")
    print("| config | prompts | hit rate | precision | wrong-day rows a prompt |")
    print("|---|---:|---:|---:|---:|")
    for name, s in g.items():
        print(
            f"| {name} | {s['prompts']} | {s['hit_rate']:.3f} | {s['precision']:.3f} | "
            f"{s['wrong_day_per_prompt']:.2f} |"
        )
    print()
    print("| config | dev block recall | off-topic | near-miss | contentless |")
    print("|---|---:|---:|---:|---:|")
    for name, s in u.items():
        print(
            f"| {name} | {s['block_recall']:.3f} | {s['offtopic']:.1%} | {s['nearmiss']:.1%} | "
            f"{s['contentless']:.1%} |"
        )


if __name__ == "__main__":
    main()
