"""Connection plumbing for :class:`~memory_inject.storage.postgres.PostgresStore`.

Translating driver and pool errors into the library's
:class:`~memory_inject.exceptions.StorageError` tree, and closing an async pool
from outside the event loop it belongs to.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from memory_inject.exceptions import StorageError, StoreLockedError, StoreMissingError

__all__ = ["close_async_pool", "translate_errors", "unavailable"]


def unavailable(message: str) -> StorageError:
    """A :class:`StorageError` with ``reason`` ``"unavailable"``: no connection could be had."""
    err = StorageError(message)
    err.reason = "unavailable"
    return err


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Translate driver and pool errors into the library's StorageError tree."""
    try:
        yield
    except PoolTimeout as exc:
        raise unavailable(f"postgres {action}: no connection available ({exc})") from exc
    except PoolClosed as exc:
        raise StorageError(f"postgres {action}: the store is closed") from exc
    except psycopg.errors.UniqueViolation as exc:
        detail = exc.diag.message_detail or exc.diag.message_primary or str(exc)
        raise ValueError(f"postgres {action}: duplicate id or key ({detail})") from exc
    except (
        psycopg.errors.LockNotAvailable,
        psycopg.errors.DeadlockDetected,
        psycopg.errors.SerializationFailure,
    ) as exc:
        raise StoreLockedError(f"postgres {action}: {_first_line(exc)}") from exc
    except psycopg.errors.QueryCanceled as exc:
        err = StorageError(f"postgres {action}: {_first_line(exc)}")
        err.reason = "timeout"
        raise err from exc
    except psycopg.errors.InvalidCatalogName as exc:
        raise StoreMissingError(f"postgres {action}: {_first_line(exc)}") from exc
    except psycopg.OperationalError as exc:
        # A refused login carries no SQLSTATE; libpq's message is all there is.
        if exc.sqlstate == "3D000" or _NO_DATABASE.search(str(exc)):
            raise StoreMissingError(f"postgres {action}: {_first_line(exc)}") from exc
        raise unavailable(f"postgres {action}: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise StorageError(f"postgres {action}: {_first_line(exc)}") from exc


_NO_DATABASE = re.compile(r'database ".*" does not exist')


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def close_async_pool(pool: AsyncConnectionPool[Any], loop: asyncio.AbstractEventLoop) -> None:
    """Close an async pool from outside its loop, as well as that loop's state allows."""
    if loop.is_closed():
        return  # its workers died with the loop; its connections close when collected
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(pool.close())
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
    elif loop.is_running():  # in another thread: ask it, without blocking this one
        asyncio.run_coroutine_threadsafe(pool.close(), loop)
    elif running is None:
        loop.run_until_complete(pool.close())


_PENDING: set[asyncio.Task[None]] = set()
