"""The capabilities no render asks for (record writes, JSONL, erase, namespaces, vectors, close,
path), and the one only a refill asks for (:class:`SupportsExcludingRecall`).

Integrators, the CLI and the demo use them; their public home is
:mod:`memory_inject.contract`, whose docstring tables every capability.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, Protocol, runtime_checkable

from memory_inject.records import MemoryRecord

__all__ = [
    "SupportsClose",
    "SupportsErase",
    "SupportsExcludingRecall",
    "SupportsJsonl",
    "SupportsNamespaces",
    "SupportsPath",
    "SupportsRecords",
    "SupportsVectors",
]


@runtime_checkable
class SupportsRecords(Protocol):
    """``upsert`` and ``supersede``: record-level writes for integrators and migrations.

    Nothing in the render path calls them; a store without them is written with ``store`` only.
    """

    def upsert(self, record: MemoryRecord, *, move: bool = ...) -> MemoryRecord: ...

    def supersede(self, old_key: str, new: MemoryRecord) -> MemoryRecord: ...


@runtime_checkable
class SupportsJsonl(Protocol):
    """``import_jsonl`` / ``export_jsonl``: the CLI's ``import`` and ``export`` commands.

    Without them those commands stop with an error naming the store.
    """

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = ...,
    ) -> int: ...

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int: ...


@runtime_checkable
class SupportsErase(Protocol):
    """``erase`` and ``erase_forgotten``: a delete that removes the data (the CLI's ``erase``,
    retention jobs, a user's request to have their data gone).

    ``forget(key)`` is a soft delete: the persistent stores keep the row for export.
    ``erase(key)`` removes ``key``'s row, live or already forgotten, with ``forget``'s
    scope rules (True if one went): nothing of it is read, recalled, exported or found in
    another row or an index afterwards, and a ``store`` of the key makes a new row.
    ``erase_forgotten()`` erases every forgotten row of the store's namespace and returns
    how many. ``docs/storage.md`` says what each store removes. The model's memory tools
    never erase. Without it a caller can only ``forget``.
    """

    def erase(self, key: str) -> bool: ...

    def erase_forgotten(self) -> int: ...


@runtime_checkable
class SupportsNamespaces(Protocol):
    """``namespace``: several agents share one database, each sees only its own rows.

    No library code reads it; a store without it holds one agent's memories.
    """

    @property
    def namespace(self) -> str: ...


@runtime_checkable
class SupportsVectors(Protocol):
    """``embedder``: the store writes a vector with each record and recall fuses cosine hits.

    ``None`` means lexical only. A store without the property is lexical only.
    """

    @property
    def embedder(self) -> object | None: ...


@runtime_checkable
class SupportsClose(Protocol):
    """``close``: releases connections; the CLI and the demo call it when they are done.

    A store without it holds nothing that needs releasing.
    """

    def close(self) -> None: ...


@runtime_checkable
class SupportsPath(Protocol):
    """``path``: the file behind the store, which the CLI's ``stats`` prints.

    Without it ``stats`` prints the store's ``name``.
    """

    @property
    def path(self) -> str: ...


@runtime_checkable
class SupportsExcludingRecall(Protocol):
    """``recall_excludes``: True when ``answer`` honours ``RecallQuery.exclude``.

    A :class:`~memory_inject.contract.RecallExclusion` names, as data, the rows a
    turn never shows: keys of the skip set's key rules (the autosaves
    ``user_msg*`` / ``assistant_resp*``, ``*_history``), categories the policy
    excludes (``conversation``), and for a scheduled turn every row bound to a
    session. Such a store leaves them out inside its query, on every kind of
    query (ranked, one modality, tagged, time-only), so none takes a slot, and
    scores the rows it keeps as it would without the exclusion. The refill of
    a page holding nothing a turn shows then asks once more with it, where
    it would otherwise ask 4, 16 times as many rows (``memory_inject._refill``);
    the first query of a turn never carries it. Without it (or with False) the
    refill widens as before.
    """

    @property
    def recall_excludes(self) -> bool: ...


def store_identity(store: object) -> object:
    """What names the data ``store`` holds, for locks that must cover every object on it:
    two ``SQLiteStore`` (or ``MarkdownStore``) objects on one file and namespace are one
    (concurrent session rows through two of them lost each other's turns, round 36);
    any other store is its own object."""
    try:
        path, namespace = getattr(store, "path", None), getattr(store, "namespace", None)
    except Exception:  # noqa: BLE001 - a closed or odd store: its own object
        return id(store)
    if not isinstance(path, str) or path in ("", ":memory:") or not isinstance(namespace, str):
        return id(store)
    return ("data", type(store).__name__, os.path.realpath(path), namespace)
