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
comes, is kept for the next turn with the prompt. At most :data:`EMBEDDING_AT_ONCE` such
threads run per store: a model that hangs costs threads no more than that.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict

from attrs import Factory, define

from memory_inject.embedders import embedder_name
from memory_inject.exceptions import EmbedderError
from memory_inject.storage._store_checks import VectorEmbedder, embed_checked

__all__ = ["QueryVectors"]

#: Prompts remembered per store: the scopes of the turns running at once.
KEPT = 32
#: The share of a recall's time left that it waits for the prompt's vector.
EMBED_SHARE = 0.5
#: Embedding threads one store runs at once for recalls with a deadline.
EMBEDDING_AT_ONCE = 4
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
    cancelled: bool = False

    def waited(self, until: float) -> int:
        """Milliseconds from the job's start to ``until`` (what a recall waited at most)."""
        return round(max(0.0, until - self.put) * 1000)


class QueryVectors:
    """The vectors of the last :data:`KEPT` prompts a store's embedder was asked for."""

    def __init__(self, embedder: VectorEmbedder) -> None:
        """Remember the vectors ``embedder`` gives (a failure is never remembered)."""
        self.embedder = embedder
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, ...]] = OrderedDict()
        self._running = threading.BoundedSemaphore(EMBEDDING_AT_ONCE)
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._workers = 0  # threads taking jobs (guarded by _lock)
        self._busy = 0  # jobs put and not done (guarded by _lock)
        self._pending: dict[str, _Job] = {}  # the job of each prompt being embedded

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
        words embeds it once); a job waits for one of the :data:`EMBEDDING_AT_ONCE`
        threads no longer than the recall would wait for its vector."""
        name = embedder_name(self.embedder)
        until = time.perf_counter() + max(0.0, (deadline - time.perf_counter()) * EMBED_SHARE)
        with self._lock:
            job = self._pending.get(query)
        if job is None:
            if not self._running.acquire(timeout=max(0.0, until - time.perf_counter())):
                raise EmbedderError(
                    f"embedder {name!r} is still embedding {EMBEDDING_AT_ONCE} earlier prompts"
                )
            job = _Job(query)
            with self._lock:
                self._pending[query] = job
                self._busy += 1
                start = self._busy > self._workers
                self._workers += start
            self._jobs.put(job)
            if start:
                try:
                    worker = threading.Thread(target=self._work, name="memory-inject-embed")
                    worker.daemon = True
                    worker.start()
                except RuntimeError as exc:  # no thread left: the job is called off
                    self._call_off(job)
                    raise EmbedderError(f"embedder {name!r}: no thread to embed on: {exc}") from exc
        if not job.done.wait(max(0.0, until - time.perf_counter())):
            raise EmbedderError(
                f"embedder {name!r} gave no vector in {job.waited(until)} ms (half the time "
                "the recall had left): searched by keywords"
            )
        if job.failed is not None:
            raise job.failed
        assert job.vector is not None  # noqa: S101 - set when done without a failure
        return job.vector

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
                with self._lock:
                    self._busy -= 1
                    if self._pending.get(job.query) is job:
                        del self._pending[job.query]
                self._running.release()
                job.done.set()
            if job.vector is not None and any(job.vector):
                self._keep(job.query, job.vector)  # a late vector serves the next turn

    def _call_off(self, job: _Job) -> None:
        """Undo a job whose thread could not start (it stays on the queue, skipped)."""
        with self._lock:
            job.cancelled = True
            self._workers -= 1
            self._busy -= 1
            if self._pending.get(job.query) is job:
                del self._pending[job.query]
        self._running.release()
        job.failed = EmbedderError("no thread to embed on")
        job.done.set()

    def _keep(self, query: str, vector: tuple[float, ...]) -> None:
        with self._lock:
            self._kept[query] = vector
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
