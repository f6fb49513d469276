"""The SQLite engine: ``SQLiteStore``, the embedded default store (one file, FTS5, vectors).

Only :class:`SQLiteStore` and :data:`LOCK_RETRY_DELAY_S` are public; every
other module of this package is the engine's machinery, each owning one job:

* ``store``: the store (its constructor and public extras), which holds an
  ``engine`` (reads, writes, recall) over ``connection`` (the write
  connection, locks, the one retry, the closed state) and ``pool`` (the read
  connections); ``bulk`` (JSONL import/export, embedding back-fill: functions
  of the store), ``queries`` (the statements) and ``context`` (entities,
  standing records);
* the file: ``ddl`` (tables, index, triggers), ``migrations`` (opening, the
  schema check, forward migrations), ``codec`` (rows and vectors), ``errors``
  (driver errors, damaged rows), ``changes`` (the change log), ``locks`` (who
  holds the WAL-index lock);
* recall: ``recall`` (the keyword, vector and LIKE stages), the keyword index
  (``keyword_terms``, ``keyword_phrases``, ``keyword_rank``, ``keyword_marks``, and the
  in-process mirror ``keyword_mirror`` / ``keyword_index`` / ``keyword_postings``) and the vector
  cache (``vectors``, ``vector_matrix``).
"""

from __future__ import annotations

from memory_inject.storage.sqlite.connection import LOCK_RETRY_DELAY_S
from memory_inject.storage.sqlite.store import SQLiteStore

__all__ = ["LOCK_RETRY_DELAY_S", "SQLiteStore"]
