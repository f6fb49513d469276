"""Many conversations at once on one store object (issue 23).

One store serves every turn of a server. A healthy store gives every turn its
memory however many run at once, and every reason on an event is true of that
turn: ``deadline`` only for a recall that ran past it, ``store_busy`` only when
the store's calls are stuck past their deadline, a named wait
(``connection_wait`` / ``pool_wait`` / ``recall_wait``) when the turn never got
to start. What degraded in one turn's recall reaches that turn's event alone.
Each test runs its turns from threads and from asyncio tasks (the twins).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memory_inject import (
    MemoryInjectConfig,
    TurnMeta,
    _deadline,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.config import PlanQueryConfig, RecallPlanConfig
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import HashingEmbedder
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.pipeline import RenderResult
from memory_inject.signals import MemoryRecall, memory_recall
from memory_inject.storage.memory import InMemoryStore
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.engine import SQLiteEngine

TURNS = 32
QUESTION = "which colour do I prefer for the dashboards?"
DEFAULT = MemoryInjectConfig()  # deadline_ms 2000, as users deploy it


def word(i: int) -> str:
    """User ``i``'s own word (one FTS token, in no other memory)."""
    return "zq" + "".join("bcdfghkl"[int(d)] for d in f"{i:03o}")


def fill(store: Any, users: int = TURNS) -> Any:
    for i in range(users):
        store.store(
            f"pref_{i}",
            f"User prefers the colour {word(i)} for the dashboards.",
            "core",
            session_id=f"u{i}",
        )
    store.store("team", "The team reviews dashboards every Monday.", "conversation", session_id="x")
    return store


class Events:
    """Every recall event, by turn id (receivers run in the rendering thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_turn: dict[str, list[MemoryRecall]] = {}

    def __call__(self, sender: object, *, event: MemoryRecall) -> None:
        with self.lock:
            self.by_turn.setdefault(event.turn_id or "", []).append(event)


@pytest.fixture
def events() -> Iterator[Events]:
    seen = Events()
    memory_recall.connect(seen)
    try:
        yield seen
    finally:
        memory_recall.disconnect(seen)


def turns(
    store: Any, mode: str, n: int = TURNS, config: MemoryInjectConfig = DEFAULT
) -> list[RenderResult]:
    """``n`` turns at once on ``store``, turn ``i`` as user ``i % TURNS`` (turn id ``t{i}``)."""

    def one(i: int) -> RenderResult:
        return render_memory_context(
            store,
            QUESTION,
            sessions=[f"u{i % TURNS}"],
            config=config,
            turn=TurnMeta(turn_id=f"t{i}"),
        )

    async def aone(i: int) -> RenderResult:
        return await arender_memory_context(
            store,
            QUESTION,
            sessions=[f"u{i % TURNS}"],
            config=config,
            turn=TurnMeta(turn_id=f"t{i}"),
        )

    if mode == "threads":
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(one, range(n)))

    async def run() -> list[RenderResult]:
        out = await asyncio.gather(*(aone(i) for i in range(n)))
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()  # an async pool belongs to this loop
        return list(out)

    return asyncio.run(run())


def assert_every_turn_got_its_own_memory(results: list[RenderResult], events: Events) -> None:
    for i, result in enumerate(results):
        others = [w for u in range(TURNS) if u != i % TURNS and (w := word(u)) in result.text]
        assert (True, []) == (word(i % TURNS) in result.text, others), (i, result.text)
        (event,) = events.by_turn[f"t{i}"]
        assert ((), False, None) == (event.degraded, event.partial, event.error), i


class Slow:
    """A custom store (only ``recall``) that answers in 100 ms: slow, but well within 2 s."""

    name = "slow"

    def __init__(self, inner: InMemoryStore) -> None:
        self.inner = inner

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        time.sleep(0.1)
        return list(self.inner.recall(query, limit, **kw))


STORES = ["in_memory", "sqlite", "sqlite_hashing", "slow_custom"]


def make(kind: str, tmp_path: Path) -> Any:
    if kind == "in_memory":
        return fill(InMemoryStore())
    if kind == "sqlite":
        return fill(SQLiteStore(tmp_path / "m.db"))
    if kind == "sqlite_hashing":
        return fill(SQLiteStore(tmp_path / "h.db", embedder=HashingEmbedder()))
    return Slow(fill(InMemoryStore()))


@pytest.mark.parametrize("mode", ["threads", "async"])
@pytest.mark.parametrize("kind", STORES)
def test_every_concurrent_turn_gets_its_memory(
    kind: str, mode: str, tmp_path: Path, events: Events
) -> None:
    """32 turns at once on one store: each its own user's memory, one event, nothing degraded.

    (Before: the per-store cap counted running recalls, so beyond 4 turns came back
    empty with a false ``deadline`` and ``store_busy``.)
    """
    store = make(kind, tmp_path)
    try:
        results = turns(store, mode)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    assert_every_turn_got_its_own_memory(results, events)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["threads", "async"])
def test_every_concurrent_turn_gets_its_memory_on_postgres(
    pg_dsn: str, mode: str, events: Events
) -> None:
    """32 turns on one PostgresStore with a pool of at most 8 connections."""
    from tests.storage._pg_backend import make_postgres_store

    store = fill(make_postgres_store(pg_dsn, max_size=8))
    try:
        results = turns(store, mode)
    finally:
        store.close()
    assert_every_turn_got_its_own_memory(results, events)


class Hung:
    """A store whose recall blocks until the gate opens (a hung server, a stuck lock)."""

    name = "hung"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.entered = threading.Event()  # a recall is running
        self.calls = 0

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        self.calls += 1
        self.entered.set()
        self.gate.wait(30)
        return [MemoryEntry("fact", "deploys go to prod-3", MemoryCategory.CORE, None, score=0.9)]


@pytest.mark.usefixtures("hung_at_deadline")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hung_store_is_capped_after_its_calls_pass_their_deadline(mode: str) -> None:
    """The protection against a hung store stays: the first renders wait out their deadline
    (true 'deadline' reasons), then the store is skipped at once with a true 'store_busy';
    once it answers again, renders get its memory."""
    gate = threading.Event()
    store = Hung(gate)
    cfg = MemoryInjectConfig(deadline_ms=100)
    out: list[tuple[tuple[str, ...], float]] = []

    def render() -> tuple[tuple[str, ...], float]:
        t0 = time.perf_counter()
        if mode == "sync":
            result = render_memory_context(store, "deploy", config=cfg)
        else:
            result = asyncio.run(arender_memory_context(store, "deploy", config=cfg))
        assert isinstance(result.event, MemoryRecall)
        return result.event.degraded, time.perf_counter() - t0

    try:
        for _ in range(_deadline.MAX_STUCK_PER_STORE + 2):
            out.append(render())
    finally:
        gate.set()
    heads = [tuple(d.split(":", 1)[0] for d in degraded) for degraded, _ in out]
    stuck = _deadline.MAX_STUCK_PER_STORE
    assert [("deadline",)] * stuck + [("store_busy",)] * 2 == heads
    assert f"store_busy: {stuck} earlier recalls of this store" in out[-1][0][0]
    # Skipped at once: the store was not asked again, and no turn waited its deadline.
    assert stuck == store.calls
    assert all(took < 0.1 for _, took in out[stuck:])
    deadline_ok = time.perf_counter() + 10
    while _deadline.stuck_calls(store) and time.perf_counter() < deadline_ok:
        time.sleep(0.01)
    assert 0 == _deadline.stuck_calls(store)
    recovered = render_memory_context(store, "deploy", config=cfg)
    assert "prod-3" in recovered.text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_busy_sqlite_read_connections_are_a_named_wait(
    mode: str, tmp_path: Path, events: Events
) -> None:
    """Every read connection taken (long reads of other turns): the turn waits until its
    deadline and says it waited for a connection, not that its recall ran out of time."""
    cfg = MemoryInjectConfig(deadline_ms=150)
    with fill(SQLiteStore(tmp_path / "m.db", readers=2)) as store:
        pool = store._engine.connections._readers
        assert pool is not None
        held = [pool.take(), pool.take()]
        try:
            if mode == "sync":
                result = render_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
            else:
                result = asyncio.run(
                    arender_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
                )
        finally:
            for conn in held:
                pool.give(conn)
        assert isinstance(result.event, MemoryRecall)
        assert ("", True) == (result.text, result.event.partial)
        (note,) = result.event.degraded
        assert note.startswith("connection_wait: all 2 read connections of ")
        assert "the recall never started" in note
        again = render_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
        assert word(1) in again.text


def test_busy_read_connections_a_late_recall_thread_waits_for_are_still_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async turn whose recall runs on a recall thread (the store's recalls were slow)
    and whose thread ends its wait after the render's deadline (a loaded machine; here no
    grace at all): the event said ``deadline`` beside ``connection_wait`` (once in a full
    run of the suite beside other work). The wait is heard, so it is the one line."""
    from memory_inject import _recall

    monkeypatch.setattr(_recall, "GRACE_S", 0.0)
    cfg = MemoryInjectConfig(deadline_ms=150)
    with fill(SQLiteStore(tmp_path / "m.db", readers=2)) as store:
        pool = store._engine.connections._readers
        assert pool is not None
        held = [pool.take(), pool.take()]
        notes = []
        try:
            for _ in range(3):
                _recall._inline_state[id(store)] = [0, time.perf_counter() + 60.0]
                result = asyncio.run(
                    arender_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
                )
                assert isinstance(result.event, MemoryRecall)
                notes.append(result.event.degraded)
                time.sleep(0.1)
        finally:
            _recall._inline_state.pop(id(store), None)
            for conn in held:
                pool.give(conn)
    assert all(1 == len(n) and n[0].startswith("connection_wait: all 2") for n in notes), notes


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_exhausted_postgres_pool_is_a_named_wait(pg_dsn: str, mode: str) -> None:
    """A pool of one connection, held elsewhere: the turn waits within its deadline and
    names the pool; no connection is opened past max_size."""
    from tests.storage._pg_backend import make_postgres_store

    cfg = MemoryInjectConfig(deadline_ms=200)
    store = fill(make_postgres_store(pg_dsn, min_size=1, max_size=1), users=2)
    try:
        # Held by another turn of the store (the pool counts what the store lent).
        if mode == "sync":
            with store._engine.connections.connection():
                result = render_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
        else:

            async def run() -> RenderResult:
                try:
                    async with store._engine.connections.aconnection():
                        return await arender_memory_context(
                            store, QUESTION, sessions=["u1"], config=cfg
                        )
                finally:
                    await store.aclose()

            result = asyncio.run(run())
    finally:
        store.close()
    assert isinstance(result.event, MemoryRecall)
    assert ("", True) == (result.text, result.event.partial)
    (note,) = result.event.degraded
    assert note.startswith("pool_wait: all 1 connections of the pool stayed busy for ")


@pytest.mark.postgres
def test_a_pool_wait_that_a_busy_loop_ends_late_is_still_the_wait(pg_dsn: str) -> None:
    """On a loop busy with other requests the pool's own timeout runs late, after the
    render's: the turn that never got a connection was reported as ``deadline`` (a recall
    that ran out of time; 289 of 291 turns of five loaded processes). The pool tells the
    render it waits, so the event names the wait."""
    from tests.storage._pg_backend import make_postgres_store

    cfg = MemoryInjectConfig(deadline_ms=200)
    store = fill(make_postgres_store(pg_dsn, min_size=1, max_size=1), users=2)

    async def other_request() -> None:
        await asyncio.sleep(0.1)
        time.sleep(0.3)  # CPU work of another request, across the turn's deadline

    async def run() -> RenderResult:
        try:
            async with store._engine.connections.aconnection():
                busy = asyncio.create_task(other_request())
                result = await arender_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
                await busy
                return result
        finally:
            await store.aclose()

    try:
        result = asyncio.run(run())
    finally:
        store.close()
    assert isinstance(result.event, MemoryRecall)
    assert ("", True) == (result.text, result.event.partial)
    (note,) = result.event.degraded
    assert note.startswith("pool_wait: all 1 connections of the pool stayed busy for ")


@pytest.mark.postgres
def test_a_pool_wait_a_loaded_machine_ends_late_is_still_the_wait(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync twin: a recall thread scheduled late (a loaded machine; here no grace at
    all) ended its pool wait after the render's deadline, and the turn said ``deadline``
    (seen once in a full run of the suite beside other work)."""
    from memory_inject import _recall
    from tests.storage._pg_backend import make_postgres_store

    monkeypatch.setattr(_recall, "GRACE_S", 0.0)
    cfg = MemoryInjectConfig(deadline_ms=200)
    store = fill(make_postgres_store(pg_dsn, min_size=1, max_size=1), users=2)
    try:
        with store._engine.connections.connection():
            results = []
            for _ in range(5):
                results.append(render_memory_context(store, QUESTION, sessions=["u1"], config=cfg))
                time.sleep(0.1)  # the call the render left ends its own wait
    finally:
        store.close()
    notes = [r.event.degraded for r in results if isinstance(r.event, MemoryRecall)]
    assert 5 == len(notes)
    assert all(1 == len(n) and n[0].startswith("pool_wait: all 1 connections") for n in notes), (
        notes
    )


@pytest.mark.postgres
def test_a_pool_that_gives_nothing_while_nothing_is_lent_is_not_busy(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool reconnecting after an outage counts the connections it retries as in use:
    the store said "all connections stayed busy" for a server that was down (a write got
    that recall error too), and kept a restarted server out of reach for 11 s. With
    nothing lent, a timed-out pool is no wait: one direct connection answers."""
    from psycopg_pool import PoolTimeout

    from tests.storage._pg_backend import make_postgres_store

    store = fill(make_postgres_store(pg_dsn, min_size=1, max_size=1), users=2)
    try:
        pool = store._engine.connections.pool

        def reconnecting(timeout: float | None = None) -> None:
            raise PoolTimeout("the pool is still reconnecting")

        monkeypatch.setattr(pool, "getconn", reconnecting)
        # What the pool reports while it retries: every connection in use.
        monkeypatch.setattr(pool, "get_stats", lambda: {"pool_size": 1, "pool_available": 0})
        result = render_memory_context(store, QUESTION, sessions=["u1"])
        store.store("during", "written while the pool reconnects", session_id="u1")
    finally:
        store.close()
    assert isinstance(result.event, MemoryRecall)
    assert (True, ()) == (result.event.success, result.event.degraded)
    assert result.text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_turn_waiting_for_the_stores_share_of_threads_says_so(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's running calls at their cap (here 1): a second turn waits for a slot,
    and its event names that wait; the first turn's event names its deadline."""
    monkeypatch.setattr(_deadline, "MAX_RUNNING_PER_STORE", 1)
    gate = threading.Event()
    store = Hung(gate)
    cfg = MemoryInjectConfig(deadline_ms=150)

    def one(_: int) -> tuple[str, ...]:
        result = render_memory_context(store, "deploy", config=cfg)
        assert isinstance(result.event, MemoryRecall)
        return result.event.degraded

    async def aone() -> tuple[str, ...]:
        result = await arender_memory_context(store, "deploy", config=cfg)
        assert isinstance(result.event, MemoryRecall)
        return result.event.degraded

    async def both() -> list[tuple[str, ...]]:
        first = asyncio.ensure_future(aone())
        while not store.entered.is_set():  # the first holds the store's one slot
            await asyncio.sleep(0.005)
        second = asyncio.ensure_future(aone())
        return [await first, await second]

    try:
        if mode == "sync":
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(one, 0)
                assert store.entered.wait(5)  # the first holds the store's one slot
                second = pool.submit(one, 1)
                notes = [first.result(), second.result()]
        else:
            notes = asyncio.run(both())
    finally:
        gate.set()
    assert notes[0][0].startswith("deadline: recall abandoned after 0.150s")
    assert notes[1][0].startswith("recall_wait: 1 recalls of this store stayed running for ")


class FailsForSomeQueries:
    """A SQLite store whose embedder fails for the prompts of one user only."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=32)
        self.name = "hash-sometimes"
        self.dim = 32

    def embed(self, texts: list[str]) -> list[list[float]]:
        if any("broken" in t for t in texts):
            raise RuntimeError("model not loaded")
        return [list(v) for v in self.inner.embed(texts)]


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.usefixtures("tiny_switch_interval")
@pytest.mark.parametrize("plan", [False, True], ids=["default", "semantic_plan"])
def test_one_turns_failure_is_never_reported_on_another_turn(
    plan: bool, tmp_path: Path, events: Events
) -> None:
    """Two threads on one store, one turn in two with a failing embedder, threads switching
    every microsecond: the clean turns report nothing degraded (and with a semantic
    plan, render), the failing ones report their own failure."""
    cfg = DEFAULT
    if plan:
        cfg = MemoryInjectConfig(
            recall_plan=RecallPlanConfig(
                enabled=True,
                queries=(PlanQueryConfig("semantic", 3), PlanQueryConfig("lexical", 3)),
            )
        )
    with fill(SQLiteStore(tmp_path / "m.db", embedder=FailsForSomeQueries()), users=2) as store:  # type: ignore[arg-type]
        per_thread = 300

        def worker(broken: bool) -> list[tuple[bool, str]]:
            out = []
            for n in range(per_thread):
                query = QUESTION + (" broken" if broken else "")
                turn = f"{'b' if broken else 'c'}{n}"
                result = render_memory_context(
                    store, query, sessions=["u1"], config=cfg, turn=TurnMeta(turn_id=turn)
                )
                out.append((broken, result.text))
            return out

        with ThreadPoolExecutor(2) as pool:
            clean, _ = pool.map(worker, [False, True])
    clean_events = [e for t, evs in events.by_turn.items() if t.startswith("c") for e in evs]
    broken_events = [e for t, evs in events.by_turn.items() if t.startswith("b") for e in evs]
    assert (per_thread, per_thread) == (len(clean_events), len(broken_events))
    leaked = [e.degraded for e in clean_events if e.degraded or e.error]
    assert [] == leaked
    assert all(word(1) in text for _, text in clean)
    assert all("embedder_failed" in " ".join((*e.degraded, e.error or "")) for e in broken_events)


def test_recall_query_and_answer_are_the_seam(tmp_path: Path) -> None:
    """The 20-line custom store of docs/storage.md: answer() with a value in and a value
    out; what degraded reaches its own turn's event."""

    class Notes:
        name = "notes"

        def __init__(self) -> None:
            self.rows = {"u1": ["User prefers teal dashboards."], "u2": []}

        def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
            return self.answer(RecallQuery(query, limit, session_id=kw.get("session_id"))).entries  # type: ignore[return-value]

        def answer(self, q: RecallQuery) -> RecallAnswer:
            rows = self.rows.get(q.session_id or "", [])
            entries = [
                MemoryEntry(f"n{i}", text, MemoryCategory.CORE, None, q.session_id, 1.0)
                for i, text in enumerate(rows[: q.limit])
            ]
            return RecallAnswer(entries, () if rows else ("index_cold: no notes yet",))

    store = Notes()
    one = render_memory_context(store, "teal dashboards", sessions=["u1"])
    two = render_memory_context(store, "teal dashboards", sessions=["u2"])
    assert isinstance(one.event, MemoryRecall) and isinstance(two.event, MemoryRecall)
    assert ("teal" in one.text, one.event.degraded) == (True, ())
    assert ("", ("index_cold: no notes yet",)) == (two.text, two.event.degraded)


CHILD = r"""
import json, sys
from concurrent.futures import ThreadPoolExecutor
from memory_inject import MemoryInjectConfig, TurnMeta, render_memory_context
from memory_inject.signals import memory_recall

kind, where, name = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "postgres":
    from memory_inject.storage.postgres import PostgresStore
    store = PostgresStore(where, max_size=4)
else:
    from memory_inject.storage.sqlite import SQLiteStore
    store = SQLiteStore(where)
events = []
memory_recall.connect(lambda sender, *, event: events.append(event), weak=False)

def one(i):
    result = render_memory_context(
        store, QUESTION, sessions=[f"u{i % 32}"], config=MemoryInjectConfig(),
        turn=TurnMeta(turn_id=f"{name}-{i}"),
    )
    return i % 32, result.text

with ThreadPoolExecutor(8) as pool:
    out = list(pool.map(one, range(48)))
store.close()
print(json.dumps({
    "texts": out,
    "events": [[e.turn_id, list(e.degraded), e.partial] for e in events],
}))
"""


def _processes(kind: str, where: str) -> list[dict[str, Any]]:
    import json
    import subprocess

    script = f"QUESTION = {QUESTION!r}\n" + CHILD
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, kind, where, f"p{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert 0 == proc.returncode, err
        results.append(json.loads(out))
    return results


def _assert_all_got_memory(results: list[dict[str, Any]]) -> None:
    for result in results:
        assert 48 == len(result["texts"]) == len(result["events"])
        for user, text in result["texts"]:
            assert word(user) in text
            assert [] == [u for u in range(TURNS) if u != user and word(u) in text]
        assert [] == [e for e in result["events"] if e[1] or e[2]]


def test_two_processes_of_eight_threads_share_one_sqlite_file(tmp_path: Path) -> None:
    """Two processes, 8 threads each, on one SQLite file: every turn gets its memory."""
    path = tmp_path / "shared.db"
    fill(SQLiteStore(path)).close()
    _assert_all_got_memory(_processes("sqlite", str(path)))


@pytest.mark.postgres
def test_two_processes_of_eight_threads_share_one_postgres_database(pg_dsn: str) -> None:
    """Two agent processes, 8 threads each, on one PostgreSQL database (pools of 4):
    every turn gets its memory, nothing degraded."""
    from tests.storage._pg_backend import make_postgres_store

    store = fill(make_postgres_store(pg_dsn))
    try:
        _assert_all_got_memory(_processes("postgres", store.database.dsn))
    finally:
        store.close()


class _StallingEngine(SQLiteEngine):
    """The engine of a :class:`_Stalling` store, whose ``stall`` it obeys."""

    owner: _Stalling

    def _recall(self, *args: Any, **kwargs: Any) -> Any:
        self.owner.threads.append(threading.current_thread().name)
        if self.owner.stall:
            self.connections.read(
                lambda c: c.execute(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                    "WHERE x < 1e12) SELECT count(*) FROM c"
                ).fetchall(),
                "recall",
            )
        return super()._recall(*args, **kwargs)


class _Stalling(SQLiteStore):
    """A keyword-only SQLite store whose recall stalls (an endless statement) when told to."""

    stall = False
    threads: list[str]
    _engine: _StallingEngine

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._engine.__class__ = _StallingEngine
        self._engine.owner = self


def test_a_fast_keyword_store_recalls_on_the_loop_until_it_stalls_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No thread hop while the store answers fast; two stalled recalls in a row (each
    stopped at the deadline) move that store's async recalls to recall threads.

    A private ``:memory:`` store: a file's recalls always run on recall threads, since
    its WAL-index lock wait cannot be stopped in place (issue 25)."""
    from memory_inject import _recall

    # "Slow" just under the stall (a stopped recall lasts the 100 ms deadline), so a busy
    # machine's ordinary recall is never taken for one.
    monkeypatch.setattr(_recall, "INLINE_MAX_S", 0.09)
    cfg = MemoryInjectConfig(deadline_ms=100)
    with fill(_Stalling(":memory:"), users=2) as store:
        store.threads = []

        async def turns() -> list[tuple[str, ...]]:
            out = []
            for stall in (False, True, True, False):
                store.stall = stall
                result = await arender_memory_context(store, QUESTION, sessions=["u1"], config=cfg)
                assert isinstance(result.event, MemoryRecall)
                out.append(result.event.degraded)
            return out

        try:
            notes = asyncio.run(turns())
        finally:
            _recall._inline_state.pop(id(store), None)
    loop_thread = threading.current_thread().name
    assert [loop_thread] * 3 == store.threads[:3]
    assert loop_thread != store.threads[3]  # backed off: a recall thread
    assert [(), ("deadline",), ("deadline",), ()] == [
        tuple(d.split(":", 1)[0] for d in n) for n in notes
    ]


def test_the_pool_and_readers_come_from_the_agent_file(tmp_path: Path) -> None:
    """backend.readers and backend.pool reach the stores; bad values name file and key."""
    from memory_inject import load_agent_config, open_store
    from memory_inject.exceptions import ConfigError

    good = tmp_path / "a.yaml"
    good.write_text(
        "agent: a\nmemory:\n  backend: {readers: 3, pool: {min_size: 2, max_size: 5}}\n"
    )
    agent = load_agent_config(good)
    assert (3, 2, 5) == (
        agent.memory.backend.readers,
        agent.memory.backend.pool.min_size,
        agent.memory.backend.pool.max_size,
    )
    store = open_store(agent)
    assert isinstance(store, SQLiteStore)
    try:
        readers = store._engine.connections._readers
        assert readers is not None and 3 == readers.size
    finally:
        store.close()
    bad = tmp_path / "b.yaml"
    bad.write_text("agent: b\nmemory:\n  backend: {readers: 0, pool: {min_size: 9, max_size: 8}}\n")
    with pytest.raises(ConfigError) as info:
        load_agent_config(bad)
    problems = [p.removeprefix(f"{bad}: ") for p in info.value.problems]
    assert [
        "'readers' must be >= 1 (got 0) @ $.memory.backend",
        "'min_size' must be at most 'max_size' (8) (got 9) @ $.memory.backend.pool.min_size",
    ] == problems


@pytest.mark.parametrize("embedder", [False, True], ids=["keyword_mirror", "vector_matrix"])
def test_readers_share_the_caches_while_a_writer_changes_the_store(
    embedder: bool, tmp_path: Path
) -> None:
    """Eight threads render while another writes, updates and forgets rows: every turn
    keeps its memory and nothing raises; afterwards the shared keyword mirror and vector
    matrix answer exactly what a freshly opened store answers."""
    path = tmp_path / "m.db"
    emb = HashingEmbedder(dim=64) if embedder else None
    store = fill(SQLiteStore(path, embedder=emb, readers=3))
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            try:
                store.store(f"churn_{n % 40}", f"churn note {n} about dashboards", "core")
                if n % 3 == 0:
                    store.forget(f"churn_{(n - 7) % 40}")
            except BaseException as exc:
                errors.append(exc)
            n += 1

    def read(k: int) -> list[bool]:
        got = []
        for n in range(60):
            user = (k * 7 + n) % TURNS
            result = render_memory_context(store, QUESTION, sessions=[f"u{user}"], config=DEFAULT)
            assert isinstance(result.event, MemoryRecall)
            got.append(word(user) in result.text and not result.event.degraded)
        return got

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            seen = [ok for batch in pool.map(read, range(8)) for ok in batch]
    finally:
        stop.set()
        writer.join()
    assert ([], [True] * len(seen)) == (errors, seen)
    for q in ("churn note dashboards", "dashboards colour", "weekly churn", QUESTION):
        for sid in (None, "u3"):
            shared = [(e.key, e.score) for e in store.recall(q, 12, session_id=sid)]
            with SQLiteStore(path, embedder=emb) as fresh:
                alone = [(e.key, e.score) for e in fresh.recall(q, 12, session_id=sid)]
            assert alone == shared, (q, sid)
    store.close()
