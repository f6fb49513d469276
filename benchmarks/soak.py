"""Soak test: mixed render and write traffic on one SQLite file for a few minutes.

    python benchmarks/soak.py                  # 3 minutes, the figures in docs/reliability.md
    python benchmarks/soak.py --minutes 10 --renderers 8 --writers 4
    python benchmarks/soak.py --long-prompts 1024   # 1,024 distinct 1.5 MB prompts: RSS growth

Everything runs in this process against a file in a temporary directory
(nothing leaves the machine, no network, no server). Renderer threads call
``render_memory_context`` with random prompts, sessions, origins and renderers
(bracket, sectioned, relevant_memories) on one shared store, the way an agent
process serves its turns; writer threads upsert, forget and revive memories
over a fixed key space and bulk-import a batch now and then through their own
stores, so the data set stays the same size and any growth is the library's.
A ``memory_recall`` receiver counts every event, as a metrics hook would.

Every ``--window`` seconds (default 10) one row is printed: resident memory,
renders, p50/p95/p99 render latency, writes, failures and the size of the
database and its WAL. After the run the verdict compares the windows after the
warm-up (default 30 s): it fails (exit status 1) when resident memory grew by
more than 20 %, when the median p50 of the last three windows is more than
50 % above that of the first three, or when any render failed or raised.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_inject import (
    MemoryInjectConfig,
    TurnMeta,
    TurnOrigin,
    render_memory_context,
    resolve_inject_policy,
)
from memory_inject.config import BudgetConfig
from memory_inject.signals import memory_recall
from memory_inject.storage.sqlite import SQLiteStore

SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ar", "en")]
RENDERERS = ("bracket", "sectioned", "relevant_memories")
CONFIGS = {
    r: MemoryInjectConfig(
        renderer=r, recall_limit=8, budget=BudgetConfig(max_entries=6, max_total_chars=3000)
    )
    for r in RENDERERS
}
RSS_GROWTH_LIMIT = 0.20
P50_DRIFT_LIMIT = 0.50


def rss_mb() -> float:
    """Resident set size now (Linux), else the peak so far (ru_maxrss)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Stats:
    """Counters shared by the worker threads; ``take`` empties them for the next window."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.writes = 0
        self.failures: list[str] = []
        self.events = 0

    def take(self) -> tuple[list[float], int, list[str], int]:
        with self.lock:
            out = (self.latencies, self.writes, self.failures, self.events)
            self.latencies, self.writes, self.failures, self.events = [], 0, [], 0
        return out


class Traffic:
    def __init__(self, path: Path, keys: int, sessions: int, seed: int) -> None:
        self.path = path
        self.keys = keys
        self.sessions = [f"telegram_dm_{i}" for i in range(sessions)]
        rng = random.Random(seed)
        self.words = sorted(
            {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(3000)}
        )
        self.stats = Stats()
        self.stop = threading.Event()

    def row(self, rng: random.Random, i: int) -> dict[str, Any]:
        return {
            "key": f"mem-{i}",
            "content": " ".join(rng.choices(self.words, k=rng.randint(6, 25))),
            "category": rng.choice(["core", "daily", "conversation", "project"]),
            # A key keeps one owner: a row belongs to its scope, and a write of another
            # scope's key is refused (KeyOwnedError), which the soak counted as failures.
            "session_id": None if i % 4 == 0 else self.sessions[i % len(self.sessions)],
            "timestamp": (datetime.now(UTC) - timedelta(hours=rng.randint(0, 2000))).isoformat(),
            "importance": round(rng.random(), 2),
        }

    def seed(self) -> None:
        rng = random.Random(1)
        lines = "".join(json.dumps(self.row(rng, i)) + "\n" for i in range(self.keys))
        with SQLiteStore(self.path) as store:
            store.import_jsonl(io.StringIO(lines), batch_size=2000)

    def on_event(self, sender: Any, *, event: Any) -> None:
        with self.stats.lock:
            self.stats.events += 1
            if not event.success:
                self.stats.failures.append(f"render: {event.error}")

    def render_loop(self, store: SQLiteStore, seed: int) -> None:
        rng = random.Random(seed)
        origins = [o for o in TurnOrigin if o is not TurnOrigin.SUB_TURN]
        n = 0
        while not self.stop.is_set():
            n += 1
            origin = rng.choice(origins)
            session = rng.choice(self.sessions) if rng.random() < 0.8 else None
            policy = resolve_inject_policy(
                origin,
                has_session=session is not None,
                config=CONFIGS[rng.choice(RENDERERS)],
            )
            query = " ".join(rng.choices(self.words, k=rng.randint(1, 6)))
            t0 = time.perf_counter()
            try:
                render_memory_context(
                    store,
                    query,
                    sessions=[session],
                    policy=policy,
                    turn=TurnMeta("soak", "soak", f"{seed}-{n}"),
                )
            except Exception as exc:  # noqa: BLE001 - a render must never raise; count it
                with self.stats.lock:
                    self.stats.failures.append(f"render raised {exc!r}")
                continue
            took = time.perf_counter() - t0
            with self.stats.lock:
                self.stats.latencies.append(took)

    def write_loop(self, seed: int) -> None:
        rng = random.Random(seed)
        with SQLiteStore(self.path) as store:
            while not self.stop.is_set():
                roll = rng.random()
                try:
                    if roll < 0.01:
                        lines = "".join(
                            json.dumps(self.row(rng, rng.randrange(self.keys))) + "\n"
                            for _ in range(200)
                        )
                        done = store.import_jsonl(io.StringIO(lines), batch_size=200)
                    elif roll < 0.15:
                        store.forget(f"mem-{rng.randrange(self.keys)}")
                        done = 1
                    else:
                        r = self.row(rng, rng.randrange(self.keys))
                        store.store(
                            r["key"],
                            r["content"],
                            r["category"],
                            session_id=r["session_id"],
                            importance=r["importance"],
                        )
                        done = 1
                except Exception as exc:  # noqa: BLE001 - counted, reported, fails the run
                    with self.stats.lock:
                        self.stats.failures.append(f"write raised {exc!r}")
                    continue
                with self.stats.lock:
                    self.stats.writes += done
                time.sleep(rng.random() * 0.01)

    def db_mb(self) -> float:
        total = 0
        for suffix in ("", "-wal"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                total += p.stat().st_size
        return total / (1 << 20)


def run(args: argparse.Namespace, emit: Callable[[str], None]) -> int:
    with tempfile.TemporaryDirectory(prefix="memory-inject-soak-") as tmp:
        path = Path(args.db) if args.db else Path(tmp) / "soak.db"
        traffic = Traffic(path, args.keys, args.sessions, args.seed)
        traffic.seed()
        memory_recall.connect(traffic.on_event)
        store = SQLiteStore(path)
        workers = [
            threading.Thread(target=traffic.render_loop, args=(store, i), daemon=True)
            for i in range(args.renderers)
        ]
        workers += [
            threading.Thread(target=traffic.write_loop, args=(1000 + i,), daemon=True)
            for i in range(args.writers)
        ]
        emit(
            f"soak: {args.minutes:g} min, {args.renderers} renderer and {args.writers} writer "
            f"threads, {args.keys} keys, {args.sessions} sessions, window {args.window:g} s, "
            f"warm-up {args.warmup:g} s, python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
        )
        emit("")
        emit(
            "| t (s) | RSS (MB) | renders | p50 (ms) | p95 (ms) | p99 (ms) | writes | failures "
            "| db+wal (MB) |"
        )
        emit("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        windows: list[dict[str, float]] = []
        failures: list[str] = []
        start = time.monotonic()
        for w in workers:
            w.start()
        end = start + args.minutes * 60
        next_at = start + args.window
        try:
            while next_at <= end + 1e-9:
                time.sleep(max(0.0, next_at - time.monotonic()))
                lat, writes, fails, _events = traffic.stats.take()
                failures += fails
                row = {
                    "t": next_at - start,
                    "rss": rss_mb(),
                    "renders": len(lat),
                    "p50": percentile(lat, 0.50) * 1000,
                    "p95": percentile(lat, 0.95) * 1000,
                    "p99": percentile(lat, 0.99) * 1000,
                    "writes": writes,
                    "failures": len(fails),
                    "db": traffic.db_mb(),
                }
                windows.append(row)
                emit(
                    f"| {row['t']:.0f} | {row['rss']:.1f} | {row['renders']} | "
                    f"{row['p50']:.2f} | {row['p95']:.2f} | {row['p99']:.2f} | "
                    f"{row['writes']} | {row['failures']} | {row['db']:.1f} |"
                )
                next_at += args.window
        finally:
            traffic.stop.set()
            for w in workers:
                w.join(timeout=60)
            memory_recall.disconnect(traffic.on_event)
            store.close()
        return verdict(windows, failures, args, emit)


def verdict(
    windows: list[dict[str, float]],
    failures: list[str],
    args: argparse.Namespace,
    emit: Callable[[str], None],
) -> int:
    steady = [w for w in windows if w["t"] > args.warmup]
    emit("")
    if len(steady) < 4:
        emit(f"FAIL: only {len(steady)} windows after the warm-up; run longer")
        return 1
    rss_base, rss_end = steady[0]["rss"], max(w["rss"] for w in steady[-3:])
    p50_base = statistics.median(w["p50"] for w in steady[:3])
    p50_end = statistics.median(w["p50"] for w in steady[-3:])
    rss_growth = rss_end / rss_base - 1
    drift = p50_end / p50_base - 1
    renders = sum(int(w["renders"]) for w in windows)
    writes = sum(int(w["writes"]) for w in windows)
    emit(f"renders {renders}, writes {writes}, failures {len(failures)}")
    emit(
        f"RSS after warm-up {rss_base:.1f} MB -> end {rss_end:.1f} MB "
        f"({rss_growth:+.1%}, limit +{RSS_GROWTH_LIMIT:.0%})"
    )
    emit(
        f"p50 first 3 windows {p50_base:.2f} ms -> last 3 {p50_end:.2f} ms "
        f"({drift:+.1%}, limit +{P50_DRIFT_LIMIT:.0%})"
    )
    problems = []
    if rss_growth > RSS_GROWTH_LIMIT:
        problems.append("resident memory grew")
    if drift > P50_DRIFT_LIMIT:
        problems.append("p50 latency drifted")
    if failures:
        problems.append(f"{len(failures)} failures, first: {failures[0]}")
    emit("FAIL: " + "; ".join(problems) if problems else "PASS")
    return 1 if problems else 0


#: The long-prompt soak's verdict: resident memory may grow by at most this much (issue 25).
LONG_PROMPT_RSS_LIMIT_MB = 64.0


def long_prompts(count: int, size_mb: float, emit: Callable[[str], None]) -> int:
    """Render ``count`` distinct prompts of ``size_mb`` each on one store; judge RSS growth.

    Each prompt is new text (its own words, a new long run of letters), as a
    server meets pasted logs and documents: nothing the library keeps per
    prompt may stay. The growth is measured from after the first 16 prompts
    (the interpreter's and SQLite's own working set) to the end.
    """
    rng = random.Random(25)
    config = MemoryInjectConfig(deadline_ms=None)
    size = int(size_mb * (1 << 20))
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "m.db") as store:
        for i in range(200):
            words = " ".join(rng.choice(SYLLABLES) + rng.choice(SYLLABLES) for _ in range(12))
            store.store(f"k{i}", f"note {i}: {words}", "core")
        base = 0.0
        t0 = time.perf_counter()
        for n in range(count):
            words = [rng.choice(SYLLABLES) + rng.choice(SYLLABLES) + str(n) for _ in range(2000)]
            head = " ".join(words)
            run_of_letters = "".join(rng.choice("abcdefghij") for _ in range(4096))
            body = (head + " " + run_of_letters + " ") * (size // (len(head) + 4098) + 1)
            render_memory_context(store, body[:size], config=config)
            if n == 15:
                base = rss_mb()
            if n % 128 == 127 or n == count - 1:
                emit(
                    f"prompts {n + 1:5d}  rss {rss_mb():7.1f} MB  growth "
                    f"{rss_mb() - base:+6.1f} MB  {time.perf_counter() - t0:6.1f} s"
                )
        growth = rss_mb() - base
    ok = growth <= LONG_PROMPT_RSS_LIMIT_MB
    emit(
        f"{'PASS' if ok else 'FAIL'}: {count} distinct {size_mb} MB prompts, resident memory "
        f"{growth:+.1f} MB after the first 16 (limit {LONG_PROMPT_RSS_LIMIT_MB:.0f} MB)"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--long-prompts",
        type=int,
        metavar="N",
        help="instead: render N distinct long prompts and judge memory growth (issue 25)",
    )
    parser.add_argument("--prompt-mb", type=float, default=1.5, help="size of each long prompt")
    parser.add_argument("--minutes", type=float, default=3.0, help="run time (default 3)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per sample row")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds not judged")
    parser.add_argument("--renderers", type=int, default=4, help="renderer threads")
    parser.add_argument("--writers", type=int, default=2, help="writer threads")
    parser.add_argument("--keys", type=int, default=5000, help="size of the key space")
    parser.add_argument("--sessions", type=int, default=200, help="number of sessions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", help="database file (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.long_prompts:
        return long_prompts(args.long_prompts, args.prompt_mb, lambda line: print(line, flush=True))
    return run(args, lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
