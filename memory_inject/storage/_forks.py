"""After ``fork()``: what a child process needs to use the stores its parent opened.

A child of ``gunicorn --preload``, of ``multiprocessing``'s ``fork`` start method or
of a daemon that forks its workers starts with a copy of its parent's memory and
only the thread that forked. Three things follow, shared by the stores:

- A lock a parent's thread held at the fork stays held in the child for good.
  :func:`guard` is a lock that is new in every child; :class:`PerProcess` holds
  what a store opened (an engine: connections, a pool) with the pid it was
  opened in, and in a child opens it again on first use, once, under that lock.
- What the parent opened is the parent's: closing it in the child would run the
  close on the parent's handles (a SQLite connection's last close may checkpoint
  the parent's write-ahead log; a PostgreSQL connection sends the server its
  goodbye on the shared socket). :func:`keep` holds it, never closed, for the
  life of the child.
- Some work must not be in flight at the fork at all: a SQLite write transaction
  open then stays open in SQLite's lock bookkeeping of the file in the child, and
  a ``MarkdownStore`` write's advisory lock on ``.lock`` belongs to a file
  description the child shares, so it stays held until the child exits. A lock
  given to :func:`track` is taken by the fork before it copies the process, so
  the fork waits for that work to end, and is released on both sides after it.

The store-specific parts stay with each store (``sqlite/forks.py``,
``postgres/store.py``, ``markdown.py``).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Lockable", "PerProcess", "guard", "keep", "track"]

T = TypeVar("T")

_guard = threading.Lock()
#: What parent processes opened, held so that it is never closed here.
_orphans: list[object] = []


def _after_fork_in_child() -> None:
    global _guard  # noqa: PLW0603 - a lock a parent's thread held stays held otherwise
    _guard = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def guard() -> threading.Lock:
    """The lock under which an object of this process replaces what its parent opened."""
    return _guard


def keep(opened: object) -> None:
    """Hold ``opened`` (a parent's engine) for the life of this process: never closed here."""
    _orphans.append(opened)


class PerProcess(Generic[T]):
    """``value`` in the process that opened it; in any other, ``reopen(value)``, once.

    A child of ``fork()`` calls ``reopen`` with what its parent had (the first call
    of the child, under :func:`guard`, wins; the others get its result). ``reopen``
    decides what to keep (:func:`keep`) and what to return: a closed engine may
    stay as it is.
    """

    __slots__ = ("_pid", "_reopen", "_value")

    def __init__(self, value: T, reopen: Callable[[T], T]) -> None:
        """Hold ``value``, opened in this process; ``reopen`` opens it again in a child."""
        self._value = value
        self._reopen = reopen
        self._pid = os.getpid()

    def get(self) -> T:
        """The value of this process: reopened here first when it was opened in another."""
        if self._pid != os.getpid():
            with guard():
                if self._pid != os.getpid():
                    self._value = self._reopen(self._value)
                    self._pid = os.getpid()
        return self._value

    def set(self, value: T) -> None:
        """Use ``value``, opened in this process, from now on."""
        self._value, self._pid = value, os.getpid()


class Lockable(Protocol):
    """What a fork takes and gives back: a lock, or a gate that waits for work in flight."""

    def acquire(self) -> Any:
        """Taken by the fork before it copies the process."""

    def release(self) -> None:
        """Given back on both sides after it."""


#: Every tracked lock in this process (by its owner, which it lives no longer than).
_tracked: weakref.WeakKeyDictionary[Any, Lockable] = weakref.WeakKeyDictionary()
_held: list[Lockable] = []


def track(owner: object, lock: Lockable) -> None:
    """Have every ``fork()`` wait for ``lock`` (``owner``'s, while ``owner`` lives) first.

    Work done under ``lock`` is then never in flight at a fork: the fork takes the
    lock before it copies the process and releases it on both sides after.
    """
    _tracked[owner] = lock


def _before_fork() -> None:
    for _ in range(8):  # another thread may open a store meanwhile: copy again
        try:
            locks = list(_tracked.values())
            break
        except RuntimeError:
            continue
    else:  # pragma: no cover - eight copies in a row raced a new store
        return
    for lock in locks:
        lock.acquire()
        _held.append(lock)  # as it is taken: the after-fork hooks release what was


def _after_fork() -> None:
    while _held:
        _held.pop().release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)
