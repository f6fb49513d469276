"""Sending a render's one event to its receivers: nothing a receiver does breaks the turn.

:func:`send_event` calls every receiver of the signal for the store. A receiver that
raises is logged and the rest still hear the event. blinker prunes the receivers whose
weak reference died while it lists them, and another thread connecting a receiver for a
sender meanwhile changes the dict it walks (``RuntimeError: dictionary changed size
during iteration``, seen 4 times in 51,000 renders with a busy connect): the list is
read again, so the event still goes out. An ``async def`` receiver returns a coroutine
no one would await: it is closed and named in a warning, once per receiver, instead of
vanishing with Python's "never awaited".
"""

from __future__ import annotations

import inspect
import logging
import weakref
from typing import Any

from blinker import NamedSignal

from memory_inject.contract import Memory
from memory_inject.signals import MemoryRecall, MemorySkipped

__all__ = ["send_event"]

_log = logging.getLogger("memory_inject")
#: How many times the receivers are read when another thread keeps changing them.
_READS = 8
_warned_async: weakref.WeakSet[Any] = weakref.WeakSet()


def send_event(signal: NamedSignal, sender: Memory, event: MemoryRecall | MemorySkipped) -> None:
    """Call every receiver; one that raises is logged and the rest still hear the event.

    Observers never steer behaviour, so anything a receiver raises is isolated,
    ``BaseException`` subclasses included (``CancelledError``, ``GeneratorExit``,
    a custom one): a sync receiver cannot be cancelled by the event loop, so its
    ``CancelledError`` is its own bug. ``KeyboardInterrupt`` and ``SystemExit``
    still propagate: they stop the process, and a library must not swallow them.
    """
    if not signal.receivers:
        return
    for receiver in _receivers(signal, sender):
        try:
            out = receiver(sender, event=event)
            if inspect.iscoroutine(out):
                out.close()
                _warn_async(signal, receiver)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # noqa: BLE001 - observers never steer behaviour, nor break the turn
            _log.exception("%s receiver %r raised", signal.name, receiver)


def _receivers(signal: NamedSignal, sender: Memory) -> list[Any]:
    """The receivers for ``sender``, read whole before any is called."""
    for _ in range(_READS - 1):
        try:
            return list(signal.receivers_for(sender))
        except RuntimeError:  # the receivers changed while blinker walked them: read again
            continue
    try:
        return list(signal.receivers_for(sender))
    except RuntimeError:
        _log.exception("%s: the receivers kept changing; this event was not sent", signal.name)
        return []


def _warn_async(signal: NamedSignal, receiver: Any) -> None:
    key = getattr(receiver, "__func__", receiver)  # a bound method is made anew each send
    try:
        if key in _warned_async:
            return
        _warned_async.add(key)
    except TypeError:  # cannot be weakly referenced: warned each time
        pass
    _log.warning(
        "%s receiver %r is a coroutine function: it is never awaited (receivers are called "
        "synchronously; schedule async work from a sync receiver)",
        signal.name,
        receiver,
    )
