"""What an async store call tells the render while it runs: :func:`report_wait`.

The render sets :data:`_WAIT_EAR` around a recall's task; a store's code calls
:func:`report_wait`, whose public home is :mod:`memory_inject.contract`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["report_wait"]


#: The render's ear for an async store call (set by the runner around a recall's task).
_WAIT_EAR: ContextVar[Callable[[Callable[[float], str] | None], None] | None] = ContextVar(
    "memory_inject_wait_ear", default=None
)


def report_wait(note: Callable[[float], str] | None) -> None:
    """Tell the render that this async call now waits for something it needs before its
    recall can start (a pooled connection), or, with None, that the wait is over.

    ``note(waited_seconds)`` is the event's degraded line should the turn's deadline pass
    during the wait (``pool_wait: ...``): the turn is then reported as that wait, not as
    a recall that ran out of time. Outside an async render it does nothing.
    """
    ear = _WAIT_EAR.get()
    if ear is not None:
        ear(note)
