"""The writer generation both engines' guards name (``sqlite/writers.py``, ``postgres/writers.py``).

An upgrade that changes what every write must do raises it (not each schema version):
the first open by the newer library then makes the older writers still running fail.
"""

from __future__ import annotations

__all__ = ["WRITER_GENERATION"]

#: 1: a forget refreshes the context of the forgotten row's neighbours (SQLite schema 12,
#: PostgreSQL schema 10); writers of the releases before it did not, and left the
#: forgotten row's words findable in the rows around it.
WRITER_GENERATION = 1
