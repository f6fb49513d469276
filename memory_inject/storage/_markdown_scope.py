"""``MarkdownStore.forget`` and ``erase`` limited to scopes, as on every other store.

``forget(key, *, sessions=None, shared_sources=None)`` (docs/storage.md, "Who owns
a row"): with ``sessions`` only a row of one of those scopes goes (``None`` among
them: a shared row, and then only one whose ``source`` is in ``shared_sources``
when that is given). The look and the removal are one locked write of the files
(the caller holds the store's locks), so a row another scope wrote under the key
in between is never the one removed. The rules themselves are
:func:`~._store_checks.forget_scope` and :func:`~._store_checks.scope_keeps`,
which ``InMemoryStore`` applies too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from memory_inject.storage._markdown_format import Doc, drop_record, find_record
from memory_inject.storage._store_checks import forget_scope, scope_keeps

__all__ = ["Sessions", "Sources", "drop_within"]

#: ``forget``'s and ``erase``'s ``sessions``: the scopes a removal is limited to (None: any).
Sessions = Iterable[str | None] | None
#: ``shared_sources``: the sources a shared row must have to go (None: any).
Sources = Iterable[str] | None


def drop_within(
    docs: Mapping[Path, Doc],
    namespace: str,
    key: str,
    sessions: Sessions,
    shared_sources: Sources,
    *,
    live: bool,
) -> bool:
    """Remove ``key``'s blocks of ``namespace`` from ``docs`` when its record is in the
    scope; ``live``: True only if that record was not forgotten (``forget``), else True
    if there was one (``erase``). A ``TypeError`` for ``sessions`` given as a string."""
    scope = forget_scope(sessions, shared_sources)
    old = find_record(docs, namespace, key)
    if old is None or not scope_keeps(old, scope):
        return False
    dropped = drop_record(docs, namespace, key)
    return dropped and (old.deleted_at is None or not live)
