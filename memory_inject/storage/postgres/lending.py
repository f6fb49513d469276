"""The connections each pool lent and has not got back, and what a wait for one is called.

A pool with every connection lent makes a turn wait; past its deadline the turn's event
names that wait (``pool_wait: ...``), not a recall that ran out of time. The count is the
connections this store lent: a pool reconnecting after an outage counts the ones it
retries as in use (``get_stats``), which said "all connections stayed busy" for a server
that was down, and kept a restarted one out of reach until the pool's back-off ended
(11 s).
"""

from __future__ import annotations

import threading

from memory_inject.exceptions import RecallWaitError

__all__ = ["Lending"]


class Lending:
    """Connections lent per pool (by ``id``), for pools of ``max_size`` connections."""

    def __init__(self, max_size: int) -> None:
        """No connection lent yet."""
        self.max_size = max_size
        self._lent: dict[int, int] = {}
        self._lock = threading.Lock()

    def lend(self, pool: object, n: int) -> None:
        """``n`` more connections of ``pool`` lent (negative: given back)."""
        with self._lock:
            self._lent[id(pool)] = self._lent.get(id(pool), 0) + n

    def all_lent(self, pool: object) -> bool:
        """Whether every connection of ``pool`` is lent now."""
        return self._lent.get(id(pool), 0) >= max(1, self.max_size)

    def exhausted(self, pool: object, waited: float, deadline: float | None) -> bool:
        """False when ``pool`` had no connection although not all are lent (an outage);
        else :class:`RecallWaitError` naming the wait (no connection is opened past
        ``max_size``)."""
        if not self.all_lent(pool):
            return False
        raise RecallWaitError(self.note(waited, deadline is not None))

    def note(self, waited: float, deadline: bool = True) -> str:
        """The event's line for a turn that waited ``waited`` s for a pooled connection."""
        return (
            f"pool_wait: all {self.max_size} connections of the pool stayed busy for "
            f"{waited:.3f}s"
            + (" (the turn's deadline)" if deadline else "")
            + "; the recall never started"
        )
