"""Earlier blocks kept in place (``earlier_blocks="keep"``): which are still true.

A wrapper re-places every earlier user message's block at each new turn (:mod:`._client`),
so each request starts with the previous one's bytes. A block is kept only while every
row it shows is still there as shown and visible to the turn's sessions: this module
says which blocks show a row that was forgotten, changed or moved out of the sessions,
so the wrapper strips them for good and a fact the user had forgotten is never sent again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Shown", "digest", "stale"]

#: The (key, content digest) of each row a block shows.
Shown = tuple[tuple[str, str], ...]


def digest(text: str) -> str:
    """The digest a shown row's content is compared by."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def stale(
    store: Any,
    sessions: tuple[str | None, ...],
    shown: Mapping[str, Shown],
    fingerprints: Iterable[str],
) -> list[str]:
    """The ``fingerprints`` whose block shows a row no longer there as shown (checked with
    the store's ``get``, each row once); a store that cannot be asked keeps none."""
    get = getattr(store, "get", None)
    seen: dict[str, str | None] = {}

    def live(key: str) -> str | None:
        if key not in seen:
            try:
                rec = get(key) if callable(get) else None
            except Exception:  # noqa: BLE001 - unknown: treated as gone
                rec = None
            visible = rec is not None and (rec.session_id is None or rec.session_id in sessions)
            seen[key] = digest(str(rec.content)) if rec is not None and visible else None
        return seen[key]

    return [
        fp
        for fp in fingerprints
        if not callable(get) or any(live(k) != d for k, d in shown.get(fp, ()))
    ]
