"""An async pool's life on its event loop, for :mod:`.connection`.

psycopg_pool's ``AsyncConnectionPool`` belongs to the loop it was opened on:
its workers are tasks of that loop. This module closes such a pool from
outside that loop (a later ``asyncio.run``, another thread, a closed loop) and
when that loop shuts down (:func:`close_at_shutdown`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from psycopg_pool import AsyncConnectionPool

__all__ = [
    "SHUTDOWN_CLOSE_S",
    "cancel_closer",
    "close_async_pool",
    "close_at_shutdown",
    "keep",
]


def keep(task: asyncio.Task[None]) -> None:
    """Hold a strong reference to ``task`` until it is done (the loop keeps only weak ones)."""
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


def close_async_pool(pool: AsyncConnectionPool[Any], loop: asyncio.AbstractEventLoop) -> None:
    """Close an async pool from outside its loop, as well as that loop's state allows."""
    if loop.is_closed():
        return  # its workers died with the loop; its connections close when collected
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        keep(loop.create_task(pool.close()))
    elif loop.is_running():  # in another thread: ask it, without blocking this one
        asyncio.run_coroutine_threadsafe(pool.close(), loop)
    elif running is None:
        loop.run_until_complete(pool.close())


_PENDING: set[asyncio.Task[None]] = set()

#: How long a loop's shutdown waits for its pool to close (the pool's own default is 5 s).
SHUTDOWN_CLOSE_S = 1.0


def cancel_closer(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (a pool's :func:`close_at_shutdown`) from any thread, if its loop lives."""
    if task is None or task.done():
        return
    loop = task.get_loop()
    if not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)


async def close_at_shutdown(pool: AsyncConnectionPool[Any]) -> None:
    """Wait for ever; when the loop's shutdown cancels this task, close ``pool``.

    ``asyncio.run`` ends by cancelling every task of its loop and waiting for
    them. A psycopg_pool worker cancelled while it runs a connection attempt
    can lose the cancellation and go back to waiting on its queue, and the
    loop's shutdown then waits for ever (seen at the end of an async render
    whose recall was abandoned at its deadline). Closing the pool sends each
    worker a stop message, which ends that wait too.
    """
    try:
        await asyncio.Event().wait()
    finally:
        await pool.close(timeout=SHUTDOWN_CLOSE_S)
