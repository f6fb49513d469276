"""The recall-time threat scan: false positives on ordinary memories, and what it catches.

python benchmarks/threat_scan.py [--data DIR] [--renders] [--show N]

Prints, for the default rule set (``memory_inject/stages/threat.py``):

* **LoCoMo dev**: every record of the five dev conversations (``../shared/data/locomo-dev``,
  CC BY-NC, never copied here), key and content as ``locomo.py`` stores them (the
  ``Speaker:`` prefix, an image caption appended): the false-positive rate, and every
  flagged record with its rule. These are ordinary chat memories, so every flag is a
  false positive.
* three hand-written sets (``threat_scan_cases.jsonl``), each of hostile rows (the catch
  rate) and look-alikes, ordinary memories that share a rule's words ("I told my boss to
  ignore previous instructions from HR", "You are now a mom of three", "Enable developer
  mode on the phone"; each flag is a false positive): the development set the rules were
  written against (zeroclaw's own examples among them), a first held-out set (its misses
  and false positives led to fixes, so it is held out no more) and a second one, written
  after those fixes and never used to tune anything: the honest numbers.
* the scan's cost: microseconds per LoCoMo record, and one render's scan of two 10 MB
  contents at the default budgets (head and tail windows, ``scan_window``).
* ``--renders``: every LoCoMo question rendered against its conversation's SQLite store
  with the scan on (the default) and off: how many blocks differ (0 when no record is
  flagged: a turn that withholds nothing makes no other store call) and the p50 render.

Not a test: the numbers go to docs/pipeline.md; ``tests/test_27_threat_scan.py`` pins the
development set (the held-out sets stay measurements).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._locomo_data import DEFAULT_DATA, build_store, evaluation_now, load
from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.config.schema import ThreatScanConfig
from memory_inject.models import MemoryEntry
from memory_inject.stages.threat import (
    RULES,
    RULESET_VERSION,
    ThreatScan,
    scan_window,
    threat_reason,
)
from memory_inject.storage import Fusion

CASES = Path(__file__).resolve().parent / "threat_scan_cases.jsonl"
MB = 1 << 20


def read_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The hand-written cases: ``{"text", "kind", "rule"?}``; a bare JSON string is a comment."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            if isinstance(case, dict):
                out.append(case)
    return out


def stored_content(r: dict[str, Any]) -> str:
    """A LoCoMo record's content as ``_locomo_data.build_store`` writes it."""
    content = str(r["content"])
    if r.get("image_caption"):
        content += f" [shared an image: {r['image_caption']}]"
    return content


#: The default rule set, its cache off (every text is scanned, as on a first recall).
_SCAN = ThreatScan(RULES, scan_window(MemoryInjectConfig()))


def reason(text: str, key: str = "k") -> str | None:
    """``threat:<rule>`` for a memory with this content and key, else None."""
    _SCAN._seen.clear()
    return _SCAN.reason(MemoryEntry(key, text, "core", None))


def locomo_false_positives(data: Path, show: int) -> tuple[int, list[tuple[str, str, str]]]:
    """Every LoCoMo dev record scanned once: the false-positive rate and the flagged ones."""
    records, _ = load(data)
    entries = [
        MemoryEntry(r["id"], stored_content(r), "core", None) for rs in records.values() for r in rs
    ]
    scan = ThreatScan(RULES, scan_window(MemoryInjectConfig()))  # a fresh cache: a first recall
    t0 = time.perf_counter()
    verdicts = [scan.reason(e) for e in entries]
    per = (time.perf_counter() - t0) / max(1, len(entries)) * 1e6
    t0 = time.perf_counter()
    for e in entries:
        scan.reason(e)
    warm = (time.perf_counter() - t0) / max(1, len(entries)) * 1e6
    flagged = [(e.key, why, e.content) for e, why in zip(entries, verdicts, strict=True) if why]
    n = len(entries)
    print(f"LoCoMo dev: {n} records (every turn of {len(records)} conversations)")
    print(f"  flagged: {len(flagged)}  false-positive rate: {len(flagged) / max(1, n):.4%}")
    print(f"  scan: {per:.1f} us per record, {warm:.2f} us when recalled again (cached)")
    for rid, why, text in flagged[:show]:
        print(f"    {rid} {why}: {text[:160]!r}")
    return n, flagged


#: (hostile kind, ordinary kind, label) of each hand-written set, in the order written.
SETS = (
    ("hostile", "lookalike", "development (the rules were written against these)"),
    ("heldout", "heldout_lookalike", "held out 1 (after its fixes: no longer held out)"),
    ("heldout2", "heldout2_lookalike", "held out 2 (never used to tune anything)"),
)


def hand_written(show: int) -> dict[str, tuple[int, int]]:
    """Catch rate and look-alike false positives of each hand-written set."""
    cases = read_cases()
    out: dict[str, tuple[int, int]] = {}
    for hostile, ordinary, label in SETS:
        bad = [c for c in cases if c["kind"] == hostile]
        good = [c for c in cases if c["kind"] == ordinary]
        caught = [(c, r) for c in bad if (r := reason(c["text"])) is not None]
        flagged = [(c, r) for c in good if (r := reason(c["text"])) is not None]
        print(f"{label}:")
        print(f"  hostile: {len(bad)}, caught {len(caught)} ({len(caught) / max(1, len(bad)):.1%})")
        print(
            f"  look-alikes: {len(good)}, flagged {len(flagged)} "
            f"({len(flagged) / max(1, len(good)):.1%})"
        )
        for c, r in flagged[:show]:
            print(f"    false positive {r}: {c['text'][:110]!r}")
        missed = [c for c in bad if all(c is not k for k, _ in caught)]
        for c in missed[:show]:
            print(f"    missed: {c['text'][:110]!r}")
        by_rule = Counter(r.removeprefix("threat:") for _, r in caught)
        print("    caught by: " + ", ".join(f"{k} {v}" for k, v in sorted(by_rule.items())))
        out[hostile] = (len(bad), len(caught))
        out[ordinary] = (len(good), len(flagged))
    return out


def worst_case_cost() -> None:
    cfg = MemoryInjectConfig()
    window = scan_window(cfg)
    ascii_text = "deploys go to prod " * (10 * MB // 19)
    mixed = "Zoë deploys to prod\u200b " * (10 * MB // 22)
    for label, text in (("10 MB ASCII", ascii_text), ("10 MB non-ASCII", mixed)):
        t0 = time.perf_counter()
        for i in range(2):
            threat_reason(MemoryEntry(f"k{i}", text, "core", None), window=window)
        took = time.perf_counter() - t0
        print(f"two {label} contents, window {window}: {took * 1000:.1f} ms")


def renders(data: Path) -> None:
    """Every question rendered with the scan on and off: blocks that differ, p50 times."""
    records, queries = load(data)
    on, off = MemoryInjectConfig(), MemoryInjectConfig(threat_scan=ThreatScanConfig(enabled=False))
    differ = 0
    times: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for conv, rows in records.items():
            store = build_store(Path(tmp) / f"{conv}.db", rows, "core", None, Fusion())
            now = evaluation_now(rows)
            try:
                for i, q in enumerate(q for q in queries if q["conversation"] == conv):
                    texts = {}
                    # Alternate which goes first: the second render of a prompt finds the
                    # store's pages warm.
                    order = (("on", on), ("off", off)) if i % 2 else (("off", off), ("on", on))
                    for name, cfg in order:
                        t0 = time.perf_counter()
                        res = render_memory_context(store, q["question"], config=cfg, now=now)
                        times[name].append(time.perf_counter() - t0)
                        texts[name] = res.text
                    differ += texts["on"] != texts["off"]
            finally:
                store.close()
    n = len(times["on"])
    print(f"renders: {n} questions; blocks that differ with the scan on/off: {differ}")
    for name in ("on", "off"):
        print(f"  p50 render, scan {name}: {statistics.median(times[name]) * 1000:.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--show", type=int, default=20, help="examples printed per list")
    parser.add_argument("--renders", action="store_true", help="also render every question")
    args = parser.parse_args()
    print(f"rule set v{RULESET_VERSION}, {datetime.now(UTC):%Y-%m-%d}")
    locomo_false_positives(args.data, args.show)
    hand_written(args.show)
    worst_case_cost()
    if args.renders:
        renders(args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
