"""The connections each pool lent and has not got back, and what a wait for one is called.

A turn that waits for a pooled connection past its deadline never started its recall: its
event names that wait (``pool_wait: ...``), not a recall that ran out of time. It waits
when every connection is lent, and also while the pool is still opening connections (a
new pool, or one growing under a burst of turns): before, only the first was heard, and
the turns of a burst on a fresh store that never got a connection said ``deadline``.

The count is the connections this store lent: a pool reconnecting after an outage counts
the ones it retries as in use (``get_stats``), which said "all connections stayed busy" for
a server that was down, and kept a restarted one out of reach until the pool's back-off
ended (11 s). So a pool that gave nothing while not all were lent is an outage (one
direct connection tells), unless it lent a connection to another turn during the wait: it
is then alive, opening connections slower than turns arrive. At most ``max_size`` such
direct connections are open at once (:meth:`Lending.direct`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memory_inject.exceptions import RecallWaitError

__all__ = ["OUTAGE_WAIT_S", "Lending"]

#: After a wait found an outage, how long a turn waits for the pool before one direct
#: connection tells whether the server is back. The pool reconnects with growing back-off
#: and lags a restarted server by seconds: every turn waited its whole deadline meanwhile
#: (2.0 s a turn for 7-9 s after a restart, round 35's attack), and every turn of the
#: outage did too. A pool that lends a connection again is waited for as before.
OUTAGE_WAIT_S = 0.05


class Lending:
    """Connections lent per pool, for pools of ``max_size`` connections."""

    def __init__(self, max_size: int) -> None:
        """No connection lent yet."""
        self.max_size = max_size
        # Per pool: [lent now, ever lent]; a pool's entry goes with the pool.
        self._lent: weakref.WeakKeyDictionary[object, list[int]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._direct = 0  # direct connections open now (the pools' outage fallback)
        self._down: weakref.WeakSet[object] = weakref.WeakSet()  # pools an outage left

    def first_wait(self, pool: object, wait: float) -> float:
        """How long to wait for ``pool`` first: ``wait``, or :data:`OUTAGE_WAIT_S` while
        the pool has not lent a connection since a wait found an outage."""
        with self._lock:
            return min(wait, OUTAGE_WAIT_S) if pool in self._down else wait

    def direct_full(self) -> bool:
        """Whether ``max_size`` direct connections are open (:meth:`direct` would refuse)."""
        with self._lock:
            return self._direct >= max(1, self.max_size)

    def wait_on(self, pool: object, lent_before: int) -> bool:
        """After a brief wait (:meth:`first_wait`) timed out: whether to wait for ``pool``
        the rest of the time rather than go direct: it is alive (:meth:`busy`), or every
        direct connection is taken (a burst after a restart failed in 50 ms, round 35)."""
        return self.busy(pool, lent_before) or self.direct_full()

    def busy(self, pool: object, lent_before: int = -1) -> bool:
        """Whether ``pool`` is alive: every connection lent, or one lent to another turn
        since :meth:`ever_lent` was ``lent_before`` (-1: unknown, the lent count decides)."""
        return self.all_lent(pool) or 0 <= lent_before < self.ever_lent(pool)

    def lend(self, pool: object, n: int) -> None:
        """``n`` more connections of ``pool`` lent (negative: given back)."""
        with self._lock:
            counts = self._lent.setdefault(pool, [0, 0])
            counts[0] += n
            counts[1] += max(0, n)
            if n > 0:
                self._down.discard(pool)

    def lent(self, pool: object) -> int:
        """How many connections of ``pool`` are lent now."""
        with self._lock:
            counts = self._lent.get(pool)
            return 0 if counts is None else counts[0]

    def ever_lent(self, pool: object) -> int:
        """How many times ``pool`` lent a connection (a wait's start and end compare it)."""
        with self._lock:
            counts = self._lent.get(pool)
            return 0 if counts is None else counts[1]

    def all_lent(self, pool: object) -> bool:
        """Whether every connection of ``pool`` is lent now."""
        return self.lent(pool) >= max(1, self.max_size)

    def exhausted(
        self, pool: object, waited: float, deadline: float | None, lent_before: int = -1
    ) -> bool:
        """False when ``pool`` gave no connection to anyone during the wait although not
        all are lent (an outage); else :class:`RecallWaitError` naming the wait (no
        connection is opened past ``max_size``). ``lent_before``: :meth:`ever_lent` when
        the wait began (-1: unknown, only the lent count decides)."""
        if not self.busy(pool, lent_before):
            with self._lock:
                self._down.add(pool)  # the next turns wait OUTAGE_WAIT_S, then go direct
            return False
        raise RecallWaitError(self.wait_note(pool)(waited, deadline is not None))

    @contextmanager
    def direct(self, pool: object, waited: float, deadline: float | None) -> Iterator[None]:
        """Room for one direct connection past ``pool`` (:meth:`exhausted` said outage): at
        most ``max_size`` at once, else :class:`RecallWaitError`. A pool whose first
        connections come slower than the turns' deadline lends nothing, and a burst of
        turns on it opened a connection each (60 for 60 turns)."""
        with self._lock:
            full = self._direct >= max(1, self.max_size)
            self._direct += 0 if full else 1
        if full:
            raise RecallWaitError(self.wait_note(pool)(waited, deadline is not None))
        try:
            yield
        finally:
            with self._lock:
                self._direct -= 1

    def wait_note(self, pool: object) -> Callable[..., str]:
        """The event's line for a turn that waited for a connection of ``pool``, for
        ``report_wait``: true of the pool when the line is made."""

        def note(waited: float, deadline: bool = True) -> str:
            lent = self.lent(pool)
            if lent >= max(1, self.max_size):
                return self.note(waited, deadline)
            return (
                f"pool_wait: no connection of the pool came free for {waited:.3f}s"
                + (" (the turn's deadline)" if deadline else "")
                + f" while it opened more ({lent} of {self.max_size} lent)"
                + "; the recall never started"
            )

        return note

    def note(self, waited: float, deadline: bool = True) -> str:
        """The event's line for a turn that waited ``waited`` s while every pooled
        connection was lent."""
        return (
            f"pool_wait: all {self.max_size} connections of the pool stayed busy for "
            f"{waited:.3f}s"
            + (" (the turn's deadline)" if deadline else "")
            + "; the recall never started"
        )
