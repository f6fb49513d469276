"""The event lines of the recall threads' rules (``memory_inject._deadline`` states them).

Kept apart from the ledger (``memory_inject._slots``), which re-exports them.
"""

from __future__ import annotations

__all__ = ["EXHAUSTED", "MAX_THREADS", "store_busy", "waited_note", "waited_store_note"]

#: Recall threads in the process, busy or idle.
MAX_THREADS = 64


def store_busy(n: int) -> str:
    """The event's line for a turn skipped because its store is hung."""
    return (
        f"store_busy: {n} earlier recalls of this store are still running past their "
        "deadline; recall skipped"
    )


EXHAUSTED = (
    f"recall_threads_exhausted: all {MAX_THREADS} recall threads are held by calls "
    "past their deadline; recall skipped"
)


def waited_note(waited: float) -> str:
    """The event's line for a turn that waited its whole deadline for any recall thread."""
    return (
        f"recall_wait: all {MAX_THREADS} recall threads stayed busy for {waited:.3f}s "
        "(the turn's deadline); the recall never started"
    )


def waited_store_note(waited: float, slots: int) -> str:
    """The event's line for a turn that waited its whole deadline for one of the store's slots."""
    return (
        f"recall_wait: {slots} recalls of this store stayed running for "
        f"{waited:.3f}s (the turn's deadline); the recall never started"
    )
