"""Filter first, then rank: how a query restricted by status or profile is answered.

PI filters its records (status, profile) before it ranks them; founder-os
keeps only some statuses before its limit. A ranked search (FTS5, vectors,
the keyword mirror) cannot apply those filters inside itself, so every store
and the seam's fallbacks share these rules: what a restriction keeps, and how
deep a ranked fetch looks to fill its limit with kept rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from memory_inject.models import MemoryEntry

__all__ = [
    "FILTER_WINDOW_CAP",
    "both_statuses",
    "keeps",
    "ranked_of",
    "restricted",
    "status_of",
    "windows",
]

T = TypeVar("T")

#: A ranked query restricted by status or profile looks at most this many rows deep.
FILTER_WINDOW_CAP = 2000


def status_of(entry: MemoryEntry) -> str:
    """An entry's status as the governance stages read it: none or blank is ``active``."""
    status = (entry.extra or {}).get("status")
    return "active" if status is None or status == "" else str(status).strip().lower()


def keeps(
    statuses: Sequence[str] | None, profiles: Sequence[str | None] | None
) -> Callable[[MemoryEntry], bool] | None:
    """Whether a restricted query may return an entry (None: nothing is restricted).

    ``statuses`` as :func:`status_of` reads them (case-insensitive);
    ``profiles`` the ``extra['profile_id']`` values kept, ``None`` standing
    for an entry bound to no profile (none or blank): the governance stages'
    status and profile rules.
    """
    if statuses is None and profiles is None:
        return None
    allowed = None if statuses is None else frozenset(s.strip().lower() for s in statuses)
    owners = None if profiles is None else frozenset(profiles)

    def keep(entry: MemoryEntry) -> bool:
        if allowed is not None and status_of(entry) not in allowed:
            return False
        if owners is None:
            return True
        owner = (entry.extra or {}).get("profile_id")
        return (None if owner is None or owner == "" else owner) in owners

    return keep


def windows(limit: int) -> Iterator[int]:
    """How deep a restricted ranked query looks, one fetch after another.

    Four times the limit, then four times deeper each time, up to
    :data:`FILTER_WINDOW_CAP` (never less than ``limit``).
    """
    window = max(limit, 1, min(FILTER_WINDOW_CAP, limit * 4))
    while True:
        yield window
        if window >= FILTER_WINDOW_CAP:
            return
        window = min(FILTER_WINDOW_CAP, window * 4)


def restricted(
    fetch: Callable[[int], T],
    entries_of: Callable[[T], Sequence[MemoryEntry]],
    limit: int,
    keep: Callable[[MemoryEntry], bool],
) -> tuple[T, list[MemoryEntry], list[MemoryEntry]]:
    """Filter first, then rank: the best ``limit`` entries that ``keep`` accepts.

    A ranked recall cannot filter by status or profile inside its own search,
    so it fetches deeper and deeper windows (:func:`windows`) until ``limit``
    kept entries are found, the store has no more (it returned fewer than
    asked), or :data:`FILTER_WINDOW_CAP` is reached. Returns the last answer,
    the kept entries, and the entries passed over that ranked above the last
    one kept (at most ``4 * limit``): the ones that would have taken a slot,
    which a governed turn's stages drop by name, as PI's trace shows them.
    """
    for window in windows(limit):
        found = fetch(window)
        got = entries_of(found)
        kept: list[MemoryEntry] = []
        over: list[MemoryEntry] = []
        for entry in got:
            if len(kept) >= limit:
                break
            if keep(entry):
                kept.append(entry)
            elif len(over) < 4 * limit:
                over.append(entry)
        if len(kept) >= limit or len(got) < window:
            break
    return found, kept, over


def ranked_of(
    fetch: Callable[[int], Sequence[MemoryEntry]],
    limit: int,
    statuses: Sequence[str] | None,
    profiles: Sequence[str | None] | None = None,
) -> list[MemoryEntry]:
    """``fetch(limit)``; restricted by status or profile, :func:`restricted` over it."""
    keep = keeps(statuses, profiles)
    if keep is None:
        return list(fetch(limit))
    return restricted(fetch, list, limit, keep)[1]


def both_statuses(
    plan: Sequence[str] | None, governance: Sequence[str] | None
) -> tuple[str, ...] | None:
    """The statuses a query keeps when a recall plan and the governance stages both restrict.

    None where neither does; the one that restricts; else the plan's statuses
    that governance keeps too (case-insensitive).
    """
    if plan is None or governance is None:
        chosen = plan if plan is not None else governance
        return None if chosen is None else tuple(chosen)
    kept = {s.strip().lower() for s in governance}
    return tuple(s for s in plan if s.strip().lower() in kept)
