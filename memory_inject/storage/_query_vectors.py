"""The prompt's vector, embedded once per render and not once per session scope.

A render asks a store once per session scope (a channel turn: the user's session and
the shared rows), each with the same prompt, and each call embedded it again, one after
another: with a 1.2 s model, two scopes ran past a 2 s deadline and the second scope's
memory was lost. :class:`QueryVectors` keeps the last prompts' vectors of one store's
embedder; a vector depends on the text alone, so a prompt asked again is not embedded
again.

A recall with a deadline waits for the model half the time it has left
(:data:`EMBED_SHARE`), on a thread of its own: a model slower than that (a 3 s one,
against a 2 s deadline) cost the whole block, the keyword hits it never needed
included. Past the wait the recall goes on by keywords and says why; the vector, when it
comes, is kept for the next turn with the prompt. While it waits, the recall lends its
slot of the store to the next turn (``contract._SLOT_LEND``).

A model may be slow for some prompts only. A prompt is **known slow** once its
embedding ran past a turn's wait, or :data:`SLOW_TIMES` times the model's usual time
(at least :data:`SLOW_AFTER_S`). At most :data:`EMBEDDING_AT_ONCE` prompts not known
slow are embedded at once per store, and besides them at most :data:`SLOW_AT_ONCE`
known slow ones hold a thread: a model that hangs costs no more threads than that, and
four slow prompts no longer keep every other turn's prompt from its vector. A turn
whose prompt is known slow, or finds every thread held by slow prompts, does not wait:
it searches by keywords at once and says so; its prompt is queued (at most
:data:`BACKLOG`) for its next turn.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from attrs import Factory, define

from memory_inject.contract import _SLOT_LEND
from memory_inject.embedders import embedder_name
from memory_inject.exceptions import EmbedderError
from memory_inject.storage._store_checks import VectorEmbedder, embed_checked

__all__ = ["QueryVectors"]

#: Prompts remembered per store: the scopes of the turns running at once.
KEPT = 32
#: The share of a recall's time left that it waits for the prompt's vector.
EMBED_SHARE = 0.5
#: Prompts not known slow that one store embeds at once for recalls with a deadline.
EMBEDDING_AT_ONCE = 4
#: Threads that prompts known slow may hold besides, per store.
SLOW_AT_ONCE = 4
#: A prompt's embedding running this many times the model's median time is known slow ...
SLOW_TIMES = 8
#: ... once it has run at least this long (seconds).
SLOW_AFTER_S = 0.05
#: Prompts waiting for a thread, per store; past it a new prompt is not queued.
BACKLOG = 32
#: A recall keeps its slot of the store this long (seconds) while it waits for the
#: vector: a fast model answers within it, and the slot is not passed on for nothing.
LEND_AFTER_S = 0.005
#: An embedding thread with no prompt to embed for this long ends.
IDLE_S = 30.0


@define
class _Job:
    """One prompt to embed, and what came of it."""

    query: str
    done: threading.Event = Factory(threading.Event)
    vector: tuple[float, ...] | None = None
    failed: EmbedderError | None = None
    put: float = Factory(time.perf_counter)
    #: When it was given a thread (None: waiting for one).
    started: float | None = None
    #: Known slow: it ran past a turn's wait, or far past the model's usual time.
    slow: bool = False
    cancelled: bool = False


class QueryVectors:
    """The vectors of the last :data:`KEPT` prompts a store's embedder was asked for."""

    def __init__(self, embedder: VectorEmbedder) -> None:
        """Remember the vectors ``embedder`` gives (a failure is never remembered)."""
        self.embedder = embedder
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._workers = 0  # threads taking jobs (the rest guarded by _lock too)
        self._busy = 0  # jobs put on _jobs and not done
        self._pending: dict[str, _Job] = {}  # the job of each prompt waiting or embedding
        self._waiting: deque[_Job] = deque()  # jobs waiting for a thread
        self._fresh: list[_Job] = []  # jobs on a thread, not known slow
        self._slow = 0  # jobs on a thread, known slow
        self._took: deque[float] = deque(maxlen=16)  # the last embeddings' seconds

    def vector(self, query: str, deadline: float | None = None) -> tuple[float, ...]:
        """``query``'s checked vector (``EmbedderError`` as :func:`embed_checked` raises,
        and for a vector of zeros: the recall is then by keywords, and says why)."""
        with self._lock:
            found = self._kept.get(query)
            if found is not None:
                self._kept.move_to_end(query)
                return found
        made = self._embed(query) if deadline is None else self._embed_by(query, deadline)
        if not any(made):
            # A static model knows none of the prompt's words: its vector is 0, near
            # nothing, and a vector-only recall found nothing without a word of why.
            name = embedder_name(self.embedder)
            raise EmbedderError(f"embedder {name!r} gave the prompt a vector of zeros")
        self._keep(query, made)
        return made

    def _embed(self, query: str) -> tuple[float, ...]:
        return embed_checked(self.embedder, [query])[0]

    def _embed_by(self, query: str, deadline: float) -> tuple[float, ...]:
        """The vector, waited for :data:`EMBED_SHARE` of the time left before ``deadline``
        (a :func:`time.perf_counter` value); ``EmbedderError`` when it does not come.

        Recalls asking for one prompt at once share one job (a burst of turns with the same
        words embeds it once). A prompt known slow, or one that finds every thread held by
        prompts known slow, is not waited for at all."""
        name = embedder_name(self.embedder)
        now = time.perf_counter()
        until = now + max(0.0, (deadline - now) * EMBED_SHARE)
        with self._lock:
            job = self._pending.get(query)
            if job is not None and job.slow:
                ms = round((now - job.put) * 1000)
                raise EmbedderError(
                    f"embedder {name!r} is still embedding this prompt for an earlier turn "
                    f"({ms} ms so far): searched by keywords"
                )
            if job is None:
                if len(self._waiting) >= BACKLOG:
                    self._dispatch(now)  # none starts: the threads are no fewer than before
                    raise EmbedderError(self._full(name))
                job = _Job(query, put=now)
                self._pending[query] = job
                self._waiting.append(job)
            start = 0 if job.started is not None else self._dispatch(now)
            note = self._blocked(job, name)
        self._spawn(start, job, name)
        if note:
            raise EmbedderError(note)
        return self._wait(job, now, until, name)

    def _wait(self, job: _Job, asked: float, until: float, name: str) -> tuple[float, ...]:
        """Wait for ``job`` until ``until``, the store's slot lent after :data:`LEND_AFTER_S`."""
        lend = _SLOT_LEND.get()
        back: Callable[[], None] | None = None
        try:
            left = min(LEND_AFTER_S, until - asked)
            while not job.done.wait(max(0.0, left)):
                now = time.perf_counter()
                if now >= until:
                    raise EmbedderError(self._give_up(job, now, asked, name))
                if back is None and lend is not None:
                    back = lend()
                left = until - now
                if job.started is None:
                    left = min(left, self._again(job, now, name))
        finally:
            if back is not None:
                back()
        if job.failed is not None:
            raise job.failed
        assert job.vector is not None  # noqa: S101 - set when done without a failure
        return job.vector

    def _again(self, job: _Job, now: float, name: str) -> float:
        """Look again for a thread for ``job``, which waits for one: how long until the
        next look; ``EmbedderError`` when prompts known slow hold every thread now."""
        with self._lock:
            start = self._dispatch(now) if job.started is None else 0
            note = self._blocked(job, name)
            first = min((j.started or now for j in self._fresh), default=now)
            after = first + self._slow_after() - now
        self._spawn(start, job, name)
        if note:
            raise EmbedderError(note)
        return max(LEND_AFTER_S, after)

    def _give_up(self, job: _Job, now: float, asked: float, name: str) -> str:
        """The turn waited its share: a prompt still embedding is known slow from now (a
        thread is started for the next prompt in its place). Answers the turn's reason."""
        ms = round((now - asked) * 1000)
        with self._lock:
            started = job.started is not None
            if started and not job.done.is_set():
                self._mark_slow(job)
            start = self._dispatch(now)
        self._spawn(start, None, name)
        if not started:
            return (
                f"embedder {name!r} is busy with other prompts: this one waited {ms} ms for "
                "a thread (half the time the recall had left): searched by keywords"
            )
        return (
            f"embedder {name!r} gave no vector in {ms} ms (half the time the recall had "
            "left): searched by keywords"
        )

    def _blocked(self, job: _Job, name: str) -> str:
        """Why ``job`` is not waited for: it waits for a thread and prompts known slow hold
        every one ("": it has a thread, or one comes with the prompts being embedded; the
        lock is held)."""
        if job.started is not None or self._fresh:
            return ""
        return self._full(name, queued=True)

    def _full(self, name: str, *, queued: bool = False) -> str:
        """Why a prompt gets no thread: prompts known slow hold every one, or :data:`BACKLOG`
        prompts wait for one (the lock is held)."""
        if self._fresh:
            return (
                f"embedder {name!r} has {BACKLOG} prompts of other turns waiting for a "
                "thread: searched by keywords"
            )
        then = " (this prompt is queued for its next turn)" if queued else ""
        return (
            f"embedder {name!r} is busy with {self._slow} slow prompts of other turns: "
            f"searched by keywords{then}"
        )

    def _slow_after(self) -> float:
        """Seconds after which a prompt's embedding is known slow (the lock is held)."""
        if not self._took:
            return SLOW_AFTER_S
        median = sorted(self._took)[len(self._took) // 2]
        return max(SLOW_AFTER_S, SLOW_TIMES * median)

    def _mark_slow(self, job: _Job) -> None:
        """``job``, on a thread, is known slow now (the lock is held)."""
        if not job.slow and job in self._fresh:
            self._fresh.remove(job)
            job.slow = True
            self._slow += 1

    def _room(self) -> int:
        """How many jobs not known slow may be on a thread now (the lock is held)."""
        return EMBEDDING_AT_ONCE + min(self._slow, SLOW_AT_ONCE) - self._slow

    def _dispatch(self, now: float) -> int:
        """Give the waiting jobs the threads there is room for (the lock is held); how many
        threads to start for them."""
        if not self._waiting:
            return 0
        if len(self._fresh) >= self._room():
            after = self._slow_after()
            for late in [j for j in self._fresh if now - (j.started or now) >= after]:
                self._mark_slow(late)
        start = 0
        room = self._room()
        while self._waiting and len(self._fresh) < room:
            job = self._waiting.popleft()
            job.started = now
            self._fresh.append(job)
            self._busy += 1
            if self._busy > self._workers:
                self._workers += 1
                start += 1
            self._jobs.put(job)
        return start

    def _spawn(self, n: int, job: _Job | None, name: str) -> None:
        """Start ``n`` embedding threads; when none can start, ``job`` (the turn's) is
        called off and the turn hears why."""
        for i in range(n):
            try:
                worker = threading.Thread(target=self._work, name="memory-inject-embed")
                worker.daemon = True
                worker.start()
            except RuntimeError as exc:  # no thread left
                with self._lock:
                    self._workers -= n - i
                if job is not None and job.started is not None and not job.done.is_set():
                    self._call_off(job)
                    raise EmbedderError(f"embedder {name!r}: no thread to embed on: {exc}") from exc
                return

    def _work(self) -> None:
        """A worker: embeds the prompts put on the queue; ends after :data:`IDLE_S` idle."""
        while True:
            try:
                job = self._jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:
                    # A job counted in _busy may not be on the queue yet: go only while
                    # the other workers outnumber the jobs not done.
                    if self._busy < self._workers:
                        self._workers -= 1
                        return
                continue
            if job.cancelled:
                continue
            try:
                job.vector = self._embed(job.query)
            except EmbedderError as exc:
                job.failed = exc
            except Exception as exc:  # noqa: BLE001 - told to the recall that waits
                job.failed = EmbedderError(f"embedder {embedder_name(self.embedder)!r}: {exc}")
            finally:
                now = time.perf_counter()
                with self._lock:
                    if not job.cancelled:  # called off while it ran: counted out already
                        self._done(job, now)
                    start = self._dispatch(now)
                job.done.set()
            if job.vector is not None and any(job.vector):
                self._keep(job.query, job.vector)  # a late vector serves the next turn
            self._spawn(start, None, "")

    def _done(self, job: _Job, now: float) -> None:
        """``job`` left its thread (the lock is held)."""
        self._busy -= 1
        if job.slow:
            self._slow -= 1
        elif job in self._fresh:
            self._fresh.remove(job)
        if self._pending.get(job.query) is job:
            del self._pending[job.query]
        if job.started is not None and not job.cancelled:
            self._took.append(now - job.started)

    def _call_off(self, job: _Job) -> None:
        """Undo a job whose thread could not start (it stays on the queue, skipped)."""
        with self._lock:
            if job.cancelled or job.done.is_set():
                return
            job.cancelled = True
            self._done(job, time.perf_counter())
        job.failed = EmbedderError("no thread to embed on")
        job.done.set()

    def _keep(self, query: str, vector: tuple[float, ...]) -> None:
        with self._lock:
            self._kept[query] = vector
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
