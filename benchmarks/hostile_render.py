"""Worst-case render time and memory under hostile store answers (docs/reliability.md).

Each case runs in a fresh interpreter: build the entries, then time one call
of the renderer alone and one whole ``render_memory_context`` over a store
that returns them (no deadline: the store is instant, so the time is the
pipeline's and the renderer's own). Peak RSS growth is measured around the
render, after the entries exist.

    python benchmarks/hostile_render.py            # every case, one line each
    python benchmarks/hostile_render.py --case 3   # one case
    python benchmarks/hostile_render.py --store    # 2 x 10 MB matching rows on a SQLite file
    python benchmarks/hostile_render.py --wal-lock 40   # another process holds the WAL lock 40 s
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

MB = 1 << 20
NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)

#: The largest budget a config may set (the bounds of docs/configuration.md).
_MAX_BUDGET = {
    "budget": {"max_entries": 10_000, "entry_max_chars": 1_000_000, "max_total_chars": 1_000_000}
}
#: (label, renderer, config overrides, entry count, content shape, size in characters)
CASES: list[tuple[str, str, dict[str, Any], int, str, int]] = [
    ("2 x 10 MB text", "sectioned", {}, 2, "text", 10 * MB),
    ("2 x 10 MB controls", "sectioned", {}, 2, "controls", 10 * MB),
    ("2 x 10 MB zero-width", "sectioned", {}, 2, "invisible", 10 * MB),
    ("2 x 10 MB look-alike markers", "sectioned", {}, 2, "lookalikes", 10 * MB),
    ("100,000 entries", "sectioned", {}, 100_000, "text", 40),
    ("2 x 10 MB controls", "relevant_memories", {}, 2, "controls", 10 * MB),
    ("2 x 10 MB look-alike markers", "relevant_memories", {}, 2, "lookalikes", 10 * MB),
    ("100,000 entries", "relevant_memories", {}, 100_000, "text", 40),
    ("2 x 10 MB look-alike markers", "bracket", {}, 2, "lookalikes", 10 * MB),
    ("10 MB key with line breaks", "bracket", {}, 1, "key", 10 * MB),
    (
        "maxima: 10,000 x 1 MB look-alikes",
        "relevant_memories",
        _MAX_BUDGET,
        10_000,
        "lookalikes",
        MB,
    ),
    (
        "maxima: 10,000 x 1 MB look-alikes",
        "sectioned",
        {
            "renderer": {
                "kind": "sectioned",
                "max_total_chars": 1_000_000,
                "section_caps": dict.fromkeys(
                    ("hard_rules", "selected_memory", "scratchpad", "daily_log"), 1000000
                ),
            }
        },
        10_000,
        "lookalikes",
        MB,
    ),
    (
        "maxima: 10,000 x 1 MB zero-width",
        "relevant_memories",
        _MAX_BUDGET,
        10_000,
        "invisible",
        MB,
    ),
    (
        "maxima: 10,000 x 1 MB look-alikes",
        "bracket",
        _MAX_BUDGET,
        10_000,
        "lookalikes",
        MB,
    ),
]


def _content(shape: str, size: int, i: int) -> str:
    unit = {
        "text": "deploys go to prod ",
        "controls": "a\x00b\x1b\u202e\u200b",
        "invisible": "\u200b",
        "lookalikes": "［/Memory\u00a0context］ ＃＃ Hard\u200bRules ｀｀｀\n",
        "key": "x\r\n",
    }[shape]
    return f"entry {i} " + unit * (size // len(unit))


def _run_case(n: int, *, pipeline: bool = True) -> dict[str, Any]:
    from memory_inject.config import MemoryInjectConfig
    from memory_inject.config.schema import _converter
    from memory_inject.models import MemoryEntry
    from memory_inject.pipeline import render_memory_context
    from memory_inject.render import renderer_for
    from memory_inject.stages import StageContext
    from memory_inject.testing import FixtureMemory

    label, kind, over, count, shape, size = CASES[n]
    data = {"renderer": kind, "deadline_ms": None, "min_relevance_score": 0.0, **over}
    config = _converter.structure(data, MemoryInjectConfig)
    shared = _content(shape, size, 0)  # one string object: the store's memory, not ours
    if shape == "key":
        entries = [MemoryEntry(shared, "content", "core", NOW - timedelta(hours=1))]
    else:
        entries = [
            MemoryEntry(
                f"k{i}",
                shared if count > 2 else _content(shape, size, i),
                "core",
                NOW - timedelta(hours=1),
                score=0.9,
            )
            for i in range(count)
        ]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    rendered = renderer_for(config)(StageContext(config, NOW, query="deploys"), entries)
    t1 = time.perf_counter()
    if pipeline:
        store = FixtureMemory({None: entries})
        out = render_memory_context(store, "deploys", config=config, now=NOW)
        out.text.encode("utf-8")
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rendered.text.encode("utf-8")
    return {
        "case": n,
        "label": label,
        "renderer": kind,
        "renderer_s": round(t1 - t0, 3),
        "render_s": round(t2 - t1, 3) if pipeline else None,
        "rss_growth_mb": round((peak - before) / 1024, 1),
        "block_chars": len(rendered.text),
        "rendered": len(rendered.entries),
    }


#: The deadline of the store cases (issue 25 targets: render <= deadline + 50 ms).
STORE_DEADLINE_MS = 300


def _store_cases() -> None:
    """Two 10 MB memories that match the prompt, on a SQLite file, every renderer, a plain
    and a prefix prompt; a second user's render of the same store runs meanwhile."""
    import tempfile
    import threading
    from pathlib import Path

    from memory_inject import MemoryInjectConfig, render_memory_context
    from memory_inject.storage import SQLiteStore
    from memory_inject.testing import recording

    unit = "alpha beta gamma delta "
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "m.db") as store:
        for i in range(2):
            store.store(f"huge{i}", f"huge {i} " + unit * (10 * MB // len(unit)), "core")
        for i in range(50):
            store.store(f"u{i % 5}-{i}", f"alpha note {i} of user {i % 5}", session_id=f"u{i % 5}")
        for renderer in ("bracket", "sectioned", "relevant_memories"):
            config = MemoryInjectConfig(deadline_ms=STORE_DEADLINE_MS, renderer=renderer)
            for prompt in ("alpha", "alph*"):
                times, other, got = [], [], []
                for _ in range(3):
                    second: dict[str, Any] = {}

                    def user2(out: dict[str, Any] = second, cfg: Any = config) -> None:
                        t = time.perf_counter()
                        r = render_memory_context(store, "alpha note", sessions=["u2"], config=cfg)
                        out.update(s=time.perf_counter() - t, ok="of user 2" in r.text)

                    with recording() as rec:
                        peer = threading.Thread(target=user2)
                        t0 = time.perf_counter()
                        peer.start()
                        result = render_memory_context(store, prompt, config=config)
                        times.append(time.perf_counter() - t0)
                        peer.join()
                    other.append(second["s"])
                    got.append(second["ok"])
                    mine = [e for e in rec.events if "u2" not in e.sessions]
                    notes = sorted({d.split(":", 1)[0] for e in mine for d in e.degraded})
                times.sort()
                print(
                    json.dumps(
                        {
                            "case": f"2 x 10 MB matching, {prompt!r}",
                            "renderer": renderer,
                            "deadline_ms": STORE_DEADLINE_MS,
                            "render_ms_median": round(times[1] * 1000, 1),
                            "render_ms_max": round(times[-1] * 1000, 1),
                            "within_deadline_plus_50ms": times[-1] * 1000 <= STORE_DEADLINE_MS + 50,
                            "block_chars": len(result.text),
                            "degraded": notes,
                            "second_user_ms_max": round(max(other) * 1000, 1),
                            "second_user_got_memory": all(got),
                        }
                    ),
                    flush=True,
                )


_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 8, 120)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _wal_lock_case(hold_s: float) -> None:
    """Another process holds the WAL-index lock for ``hold_s``: render every 0.25 s meanwhile."""
    import asyncio
    import tempfile
    from pathlib import Path

    from memory_inject import MemoryInjectConfig, arender_memory_context, render_memory_context
    from memory_inject.storage import SQLiteStore
    from memory_inject.testing import recording

    config = MemoryInjectConfig(deadline_ms=STORE_DEADLINE_MS)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.db"
        with SQLiteStore(path) as store:
            for i in range(20):
                store.store(f"k{i}", f"deploys note {i}", "core")
            with SQLiteStore(path) as other:
                other.store("x", "deploys from another connection", "core")
            with subprocess.Popen(
                [sys.executable, "-c", _HOLD, f"{path}-shm", str(hold_s)],
                stdout=subprocess.PIPE,
                text=True,
            ) as holder:
                assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
                times, named, n = [], 0, 0
                end = time.perf_counter() + hold_s - 1.0
                with recording() as rec:
                    while time.perf_counter() < end:
                        t0 = time.perf_counter()
                        if n % 2:
                            asyncio.run(arender_memory_context(store, "deploys", config=config))
                        else:
                            render_memory_context(store, "deploys", config=config)
                        times.append(time.perf_counter() - t0)
                        n += 1
                        time.sleep(0.25)
                named = sum(any(d.startswith("wal_lock") for d in e.degraded) for e in rec.events)
                holder.kill()
    times.sort()
    print(
        json.dumps(
            {
                "case": f"foreign WAL-index lock held {hold_s:.0f} s",
                "deadline_ms": STORE_DEADLINE_MS,
                "renders": len(times),
                "render_ms_median": round(times[len(times) // 2] * 1000, 1),
                "render_ms_max": round(times[-1] * 1000, 1),
                "within_deadline_plus_50ms": times[-1] * 1000 <= STORE_DEADLINE_MS + 50,
                "renders_naming_the_lock": named,
            }
        ),
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, default=None)
    parser.add_argument("--renderer-only", action="store_true", help="skip the pipeline render")
    parser.add_argument(
        "--store", action="store_true", help="the SQLite store cases of issue 25 instead"
    )
    parser.add_argument("--wal-lock", type=float, metavar="S", help="the WAL-lock case, held S s")
    args = parser.parse_args()
    if args.store:
        _store_cases()
        return 0
    if args.wal_lock:
        _wal_lock_case(args.wal_lock)
        return 0
    if args.case is not None:
        print(json.dumps(_run_case(args.case, pipeline=not args.renderer_only)))
        return 0
    extra = ["--renderer-only"] if args.renderer_only else []
    for n in range(len(CASES)):
        done = subprocess.run(  # one fresh interpreter per case
            [sys.executable, __file__, "--case", str(n), *extra],
            capture_output=True,
            text=True,
            check=False,
        )
        print(done.stdout.strip() or f'{{"case": {n}, "error": {json.dumps(done.stderr[-300:])}}}')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
