"""The PostgreSQL engine (extra ``postgres``): :class:`PostgresStore` and its machinery.

``store`` is the store; ``engine`` the engine it holds (reads, writes,
recall), ``connection`` the engine's pools and drivers, ``bulk`` the JSONL
import and export functions, ``schema`` the table, migrations and row
codec, ``context`` the context columns, ``queries`` / ``keyword`` /
``standing`` / ``writes`` the statements and write steps, ``recall`` and
``terms`` the I/O-free recall core, ``pgvector`` the smoke query and
``local`` the local trial server.
``memory_inject.storage`` imports this package only when ``PostgresStore`` is
asked for, so psycopg stays optional.
"""

from __future__ import annotations

from memory_inject.storage.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
