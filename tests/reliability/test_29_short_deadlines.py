"""Short deadlines of some turns do not make a healthy store turn the others away
(twenty-ninth round).

Found by a helper running a busy server: a call counted as stuck as soon as its turn's
deadline passed. Four turns of ``deadline_ms: 10`` (a latency-sensitive origin) on a
store answering every call in 200 ms made it "hung", and every other turn, with a 2 s
deadline it would have met, was skipped at once as ``store_busy`` (352 to 1,532 of 1,600
turns on a plain ``InMemoryStore`` under load). A call now counts as stuck only once it
has also run ``_slots.HUNG_AFTER_S``; a hung store is still capped after that.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from memory_inject import (
    InMemoryStore,
    MemoryInjectConfig,
    MemoryRecall,
    _slots,
    render_memory_context,
)
from memory_inject.models import TurnMeta

SHORT = MemoryInjectConfig(deadline_ms=10)


class Answers(InMemoryStore):
    """A healthy store: every recall answers after ``delay`` seconds, or when ``gate`` opens."""

    def __init__(self, delay: float | None, gate: threading.Event | None = None) -> None:
        super().__init__()
        self.delay, self.gate = delay, gate

    def answer(self, query: Any) -> Any:
        if self.gate is not None:
            self.gate.wait(10)
        elif self.delay:
            time.sleep(self.delay)
        return super().answer(query)


def _turn(store: Any, session: str, config: MemoryInjectConfig) -> MemoryRecall:
    result = render_memory_context(
        store,
        f"what is the {session}zeb widget setting?",
        sessions=[session],
        config=config,
        turn=TurnMeta("cli", "x", session),
    )
    assert isinstance(result.event, MemoryRecall)
    return result.event


def _short_turns(store: Any) -> tuple[list[threading.Thread], dict[str, MemoryRecall]]:
    events: dict[str, MemoryRecall] = {}

    def run(session: str) -> None:
        events[session] = _turn(store, session, SHORT)

    threads = [threading.Thread(target=run, args=(s,)) for s in "abcd"]
    for t in threads:
        t.start()
    return threads, events


def _fill(store: Any) -> None:
    for s in ("a", "b", "c", "d", "e", "victim"):
        store.store(f"{s}_fact", f"The {s}zeb widget setting is blue.", session_id=s)


def test_a_slow_but_healthy_store_serves_the_other_turns() -> None:
    store = Answers(0.2)
    _fill(store)
    threads, events = _short_turns(store)
    time.sleep(0.1)  # the four short turns are past their deadline, their calls running
    victim = _turn(store, "victim", MemoryInjectConfig())
    for t in threads:
        t.join()
    assert (True, False, ("victim_fact",), ()) == (
        victim.success,
        victim.partial,
        victim.rendered_keys,
        victim.degraded,
    )
    for event in events.values():  # each short turn names its own deadline, nothing else
        assert [d.split(":")[0] for d in event.degraded] == ["deadline"], event.degraded


def test_a_hung_store_is_still_capped_once_its_calls_have_run_long_enough() -> None:
    gate = threading.Event()
    store = Answers(None, gate)
    _fill(store)
    try:
        threads, _ = _short_turns(store)
        for t in threads:
            t.join()
        # Given up on, but not yet counted as hung: they have not run HUNG_AFTER_S.
        assert 0 == _slots.stuck_calls(store)
        time.sleep(_slots.HUNG_AFTER_S + 0.2)
        later = _turn(store, "e", SHORT)
        assert 4 == _slots.stuck_calls(store)
        assert [d.split(":")[0] for d in later.degraded] == ["store_busy"], later.degraded
    finally:
        gate.set()
    deadline = time.monotonic() + 10
    while _slots.stuck_calls(store) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("victim_fact",) == _turn(store, "victim", MemoryInjectConfig()).rendered_keys


class _Hung:
    """A store of one's own whose backend stopped answering (32 slots, as a default)."""

    name = "hung"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def recall(self, *args: Any, **kwargs: Any) -> list[Any]:
        self.gate.wait(30)
        return []


def test_calls_given_up_early_count_once_they_have_run_long_enough() -> None:
    """A helper's burst on two hung stores held all 64 recall threads with calls given up
    at 200 ms: they were counted only when their own store was asked again, so the
    ledger said 0 stuck and every other store's turn waited out its deadline
    (``recall_wait``). They count everywhere once they have run ``HUNG_AFTER_S``."""
    gate = threading.Event()
    hung = [_Hung(gate), _Hung(gate)]
    cfg = MemoryInjectConfig(deadline_ms=200)
    burst = [
        threading.Thread(target=render_memory_context, args=(h, "deploys"), kwargs={"config": cfg})
        for h in hung
        for _ in range(40)
    ]
    try:
        for t in burst:
            t.start()
        for t in burst:
            t.join()
        time.sleep(_slots.HUNG_AFTER_S + 0.2)
        assert [32, 32] == [_slots.stuck_calls(h) for h in hung]
        ok = Answers(0.0)
        _fill(ok)
        event = _turn(ok, "victim", MemoryInjectConfig())
        assert [d.split(":")[0] for d in event.degraded] == ["recall_threads_exhausted"]
    finally:
        gate.set()
    deadline = time.monotonic() + 10
    while _slots.stuck_total() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 0 == _slots.stuck_total()
