"""Is a pooled connection still alive? Asked without a round trip when the answer is plain.

The pools check each connection they hand out, so that a recall after a
killed backend or a restarted server reconnects instead of failing. psycopg's
check (:meth:`psycopg_pool.ConnectionPool.check_connection`) sends an empty
query: a round trip on every borrow, about 0.13 ms of a 2 ms recall on a Unix
socket and a network round trip across hosts.

A connection between statements has nothing to read: the server speaks only
when asked. A backend that is terminated (``pg_terminate_backend``, an
``idle_session_timeout``, a shutdown) sends its FATAL message and closes the
socket; a server process that dies leaves the socket at end of file. Either
way the socket becomes readable. So :func:`check` polls the socket without
waiting and sends the empty query only when something is there (or the
connection is not plainly idle); a quiet socket is handed out unchecked.

A backend terminated a moment before the poll, its FATAL message not sent
yet, is handed out as alive: the operation's first statement then fails and
leaves the connection dead, nothing having been done, and the driver runs it
again on another connection (``PostgresConnections.run``,
``FIRST_STATEMENT_TRIES``). What neither check can see without waiting for TCP
to give up, a host gone without closing its sockets, fails the statement,
which the store reports as it reports any statement failing.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["acheck", "check", "quiet"]


def quiet(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when ``conn`` is open, idle outside a transaction and its socket has nothing to read.

    False when in doubt (closed, broken, in a transaction, no socket, a
    readable socket): then the caller asks the server.
    """
    if conn.closed or conn.broken:
        return False
    pgconn = conn.pgconn
    if pgconn.status != ConnStatus.OK or pgconn.transaction_status != TransactionStatus.IDLE:
        return False
    try:
        fd = pgconn.socket
    except psycopg.OperationalError:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            return not poller.poll(0)
        readable, _, errored = select.select([fd], [], [fd], 0)  # Windows: no poll()
    except (OSError, ValueError):
        return False
    return not readable and not errored


def check(conn: psycopg.Connection[Any]) -> None:
    """The sync pool's ``check``: nothing when :func:`quiet`, else psycopg's empty query."""
    if not quiet(conn):
        ConnectionPool.check_connection(conn)


async def acheck(conn: psycopg.AsyncConnection[Any]) -> None:
    """The async pool's ``check``: nothing when :func:`quiet`, else psycopg's empty query."""
    if not quiet(conn):
        await AsyncConnectionPool.check_connection(conn)
