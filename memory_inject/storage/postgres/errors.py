"""Driver and pool errors, as the library's :class:`~memory_inject.exceptions.StorageError` tree.

:func:`translate_errors` wraps every call that talks to the server (the
drivers of :mod:`~memory_inject.storage.postgres.connection`, opening the
store, bulk import and export), so a caller sees why a call failed
(``reason``: ``unavailable``, ``timeout``, a lock, a missing database), never a
psycopg class.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolClosed, PoolTimeout

from memory_inject.exceptions import StorageError, StoreLockedError, StoreMissingError

__all__ = ["dsn_parts", "lock_holders", "translate_errors", "unavailable"]


def dsn_parts(dsn: str) -> dict[str, Any]:
    """``dsn``'s parameters; a ``ValueError`` naming it when it is no connection string
    (psycopg's ``ProgrammingError`` was a traceback in the CLI, and ``unavailable:
    degrade`` did not catch it)."""
    if not isinstance(dsn, str):
        raise TypeError(f"'dsn' must be a str (got {type(dsn).__name__})")
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(
            f"'dsn' is not a PostgreSQL connection string: {_first_line(exc)}"
        ) from None


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


def lock_holders(dsn: str, connect_kwargs: Mapping[str, Any], table: sql.Identifier) -> str:
    """Who holds a lock on the table, for the error message (best effort)."""
    try:
        with psycopg.connect(dsn, autocommit=True, **connect_kwargs) as conn:
            rows = conn.execute(
                "SELECT DISTINCT a.pid, coalesce(a.state, '?') FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.relation = to_regclass(%s) AND l.granted AND a.pid <> pg_backend_pid() "
                "ORDER BY 1 LIMIT 5",
                (table.as_string(),),
            ).fetchall()
    except psycopg.Error:
        return "the sessions holding it could not be listed"
    if not rows:
        return "it was held by other sessions"
    return "held by " + ", ".join(f"pid {pid} ({state})" for pid, state in rows)
