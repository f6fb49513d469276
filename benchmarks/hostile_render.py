"""Worst-case render time and memory under hostile store answers (docs/reliability.md).

Each case runs in a fresh interpreter: build the entries, then time one call
of the renderer alone and one whole ``render_memory_context`` over a store
that returns them (no deadline: the store is instant, so the time is the
pipeline's and the renderer's own). Peak RSS growth is measured around the
render, after the entries exist.

    python benchmarks/hostile_render.py            # every case, one line each
    python benchmarks/hostile_render.py --case 3   # one case
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, default=None)
    parser.add_argument("--renderer-only", action="store_true", help="skip the pipeline render")
    args = parser.parse_args()
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
