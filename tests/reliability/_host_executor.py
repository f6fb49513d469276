"""A loop whose default executor is as small as a host's (and fills as one does).

Shared by the tests of the thirty-first round (``test_31_*``): a host's default
executor is six threads on a two-core machine; these loops have one or two, daemon
threads a deadlock cannot keep the test process in, and run under a bound, so a
regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

BOUND_S = 30.0  # generous: a deadlock never ends, a healthy run takes well under a second


class _DaemonExecutor(concurrent.futures.ThreadPoolExecutor):
    """A small default executor whose threads a deadlock cannot keep the process in
    (asyncio wants a ``ThreadPoolExecutor``; its own threads are never started)."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(workers):
            threading.Thread(target=self._work, daemon=True).start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass

    def _work(self) -> None:
        while True:
            future, fn, args, kwargs = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)


def run(main: Callable[[], Awaitable[Any]], workers: int = 2) -> Any:
    """``main()`` on a new loop with a default executor of ``workers`` threads, within
    :data:`BOUND_S` (a ``TimeoutError`` otherwise)."""
    loop = asyncio.new_event_loop()
    try:
        loop.set_default_executor(_DaemonExecutor(workers))
        return loop.run_until_complete(asyncio.wait_for(main(), BOUND_S))
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=2))
        loop.close()
