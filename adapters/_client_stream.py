"""Streamed replies, read as the caller reads them: a tool call keeps the turn open.

A non-streamed reply is read once it has arrived (:func:`._client_call._finished`):
a reply that asks for a tool keeps its turn open, so the tools' own agents are
``sub_turn`` and the next step gets this conversation's block (found by the calls'
ids); any other reply ends the turn. A streamed reply has not arrived when the call
returns, so the stream is handed back wrapped: every event the caller takes is shown
to the endpoint's ``see`` (tool-call ids, the stop reason, the last event), and the
turn is settled the moment the reply's last event goes past, exactly as a
non-streamed reply of the same content would settle it. Nothing is buffered or
delayed: each event is the SDK's own object, passed on as it comes.

Where the caller takes events another way (a stream helper's ``get_final_*`` /
``until_done``, or its ``text_stream``), the helper's own final message settles the
turn after that call, or, at the latest, when its ``with`` block exits.

**A stream left before its end** (the caller breaks out and closes it, exits its
``with`` block, or the read fails) ends the turn: the tool calls seen so far are
remembered for the block of the next step, but the turn is not kept open, since
an open turn nobody continues would make the next conversation in that code a
``sub_turn``, without memory. The cost of the other choice is smaller: if the
caller did go on with those calls, an agent its tools run is a turn of its own
(its own block, never this one's), which is what every stream did before.

The wrapper forwards every other attribute to the SDK's stream and reports the
SDK's class (``isinstance(stream, openai.Stream)`` holds). Memory never fails the
call: an event of a shape it does not know says nothing, and a failure to settle is
logged, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from attrs import define, field

from ._call_ids import call_ids, reply_items
from ._turns import CURRENT
from .messages import get_field

if TYPE_CHECKING:
    from ._client import ClientMemory
    from ._client_call import Endpoint

__all__ = ["Seen", "Watch", "watch_manager", "watch_stream"]

_log = logging.getLogger("memory_inject.adapters")
#: A stream helper's final reply, read after the helper consumed the stream itself.
_FINAL_GETTERS = ("get_final_completion", "get_final_message", "get_final_response")
#: A stream helper's reply so far (no read: safe at any time).
_SNAPSHOTS = ("current_completion_snapshot", "current_message_snapshot")


@define
class Seen:
    """What a stream's events said so far (an endpoint's ``see`` fills it)."""

    ids: list[str] = field(factory=list)  # the tool calls' ids, in order
    asks: bool = False  # the reply asks the caller to run a tool
    done: bool = False  # the reply's last event went past
    pending: set[int] = field(factory=set)  # Chat Completions choices not finished yet

    def add(self, call_id: object) -> None:
        """Note a tool call's id (an empty or repeated one is ignored)."""
        if isinstance(call_id, str) and call_id and call_id not in self.ids:
            self.ids.append(call_id)


class Watch:
    """One streamed call's turn, settled once: kept open for its tool calls, or ended."""

    def __init__(self, memory: ClientMemory, endpoint: Endpoint, fingerprint: str | None) -> None:
        """Watch the stream of the turn of ``fingerprint``; the open mark is read now,
        so the turn can be ended from wherever the stream is read."""
        self._memory, self._endpoint, self._fingerprint = memory, endpoint, fingerprint
        self._mark = CURRENT.get()
        self.seen = Seen()
        self.settled = False

    def see(self, event: Any) -> None:
        """One event the caller took; the reply's last one settles the turn."""
        if self.settled:
            return
        try:
            self._endpoint.see(self.seen, event)
        except Exception:  # noqa: BLE001 - an event of another shape says nothing
            return
        if self.seen.done:
            self.settle()

    async def anext_of(self, events: Any) -> Any:
        """The next event of the async iterator ``events``, seen; its end settles the turn,
        and a read that fails (or is cancelled) ends it."""
        try:
            event = await events.__anext__()
        except StopAsyncIteration:
            self.settle()
            raise
        except BaseException:
            self.abandon()
            raise
        self.see(event)
        return event

    def settle(self) -> None:
        """The reply ended: a tool call keeps the turn open (its ids noted), else it ends."""
        self._end(keep=self.seen.asks)

    def settle_with(self, reply: Any) -> None:
        """Settle from a whole reply (a helper's final message), as a non-streamed one."""
        if self.settled:
            return
        try:
            self.seen.asks = bool(self._endpoint.wants_tools(reply))
            for cid in sorted(call_ids(reply_items(reply))):
                self.seen.add(cid)
        except Exception:  # noqa: BLE001 - an unexpected reply shape ends the turn
            self.seen.asks = False
        self.settle()

    def abandon(self) -> None:
        """Left before its end: note the calls seen, and end the turn (module docstring)."""
        self._end(keep=False)

    def at_exit(self, helper: Any) -> None:
        """A helper's ``with`` block ended: settle from its reply if that is whole."""
        if self.settled:
            return
        for name in _SNAPSHOTS:
            try:
                snapshot = getattr(helper, name, None)
            except Exception:  # noqa: BLE001 - nothing received yet
                snapshot = None
            if snapshot is not None and _whole(snapshot):
                self.settle_with(snapshot)
                return
        self.abandon()

    def _end(self, *, keep: bool) -> None:
        if self.settled:
            return
        self.settled = True
        try:
            self._memory.note_calls(self._fingerprint, self.seen.ids)
            if not keep:
                self._memory.close(self._fingerprint, self._mark)
        except Exception:  # noqa: BLE001 - memory never fails the call
            _log.exception("memory_inject: could not settle a streamed turn")


def _whole(reply: Any) -> bool:
    """True when a reply so far has ended: a stop reason, or every choice finished."""
    if get_field(reply, "stop_reason") is not None:
        return True
    choices = get_field(reply, "choices") or ()
    return bool(choices) and all(get_field(c, "finish_reason") is not None for c in choices)


class _Proxy:
    """Forwards every attribute to the SDK's object and reports its class."""

    def __init__(self, target: Any, watch: Watch) -> None:
        self._target = target
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:
        return type(self._target)

    def __del__(self) -> None:
        # A stream dropped unread kept its turn open: every later conversation from that
        # code was a sub_turn with no memory (a helper's stress run, round 29).
        watch = self.__dict__.get("_watch")
        if watch is not None and not watch.settled:
            watch.abandon()


class _Stream(_Proxy):
    """A sync stream (the SDK's ``Stream`` or a helper's stream), watched as it is read."""

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._target:
                self._watch.see(event)
                yield event
        except BaseException:  # the caller left (GeneratorExit) or the read failed
            self._watch.abandon()
            raise
        self._watch.settle()

    def __next__(self) -> Any:
        try:
            event = next(self._target)
        except StopIteration:
            self._watch.settle()
            raise
        except BaseException:
            self._watch.abandon()
            raise
        self._watch.see(event)
        return event

    def __enter__(self) -> Any:
        self._target.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        try:
            return self._target.__exit__(*exc)
        finally:
            self._watch.abandon()

    def close(self) -> None:
        """The SDK's ``close``; a turn not settled yet ends (the stream was left)."""
        try:
            self._target.close()
        finally:
            self._watch.abandon()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name == "until_done" or name in _FINAL_GETTERS or name.startswith("get_final_"):
            return self._then_settle(value)
        return value

    def _then_settle(self, method: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            if not self._watch.settled:
                self._watch.settle_with(_final(self._target))
            return self if out is self._target else out

        return run


class _AsyncEvents:
    """The events of an async stream as ``async for`` reads them; dropped before the
    end (``break``), it ends the turn at once."""

    def __init__(self, stream: _AsyncStream, events: Any, watch: Watch) -> None:
        # The stream is held while it is read: ``async for e in await create(...)`` keeps
        # only this iterator, and the stream dropped would end the turn (``_Proxy``).
        self._stream, self._events, self._watch = stream, events, watch

    def __aiter__(self) -> _AsyncEvents:
        return self

    async def __anext__(self) -> Any:
        return await self._watch.anext_of(self._events)

    def __del__(self) -> None:
        if not self._watch.settled:
            self._watch.abandon()


class _AsyncStream(_Proxy):
    """An async stream, watched as it is read (the twin of :class:`_Stream`)."""

    def __aiter__(self) -> AsyncIterator[Any]:
        # Not an async generator: one left by ``break`` is closed by the event loop later,
        # after the caller's next call had found its turn still open (a sub_turn).
        return _AsyncEvents(self, self._target.__aiter__(), self._watch)

    async def __anext__(self) -> Any:
        return await self._watch.anext_of(self._target)

    async def __aenter__(self) -> Any:
        await self._target.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        try:
            return await self._target.__aexit__(*exc)
        finally:
            self._watch.abandon()

    async def close(self) -> None:
        """The SDK's ``close``; a turn not settled yet ends (the stream was left)."""
        try:
            await self._target.close()
        finally:
            self._watch.abandon()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name == "until_done" or name.startswith("get_final_"):
            return self._then_settle(value)
        return value

    def _then_settle(self, method: Any) -> Any:
        async def run(*args: Any, **kwargs: Any) -> Any:
            out = await method(*args, **kwargs)
            if not self._watch.settled:
                self._watch.settle_with(await _afinal(self._target))
            return self if out is self._target else out

        return run


def _final(helper: Any) -> Any:
    """A helper's final reply once it read the whole stream (None: it has none)."""
    try:
        getter = next(getattr(helper, n) for n in _FINAL_GETTERS if hasattr(helper, n))
        return getter()
    except Exception:  # noqa: BLE001 - no final reply (cut short, refused): the turn ends
        return None


async def _afinal(helper: Any) -> Any:
    try:
        getter = next(getattr(helper, n) for n in _FINAL_GETTERS if hasattr(helper, n))
        return await getter()
    except Exception:  # noqa: BLE001 - as _final
        return None


class _Manager(_Proxy):
    """A stream helper's manager: its ``with`` gives the watched stream, its exit settles."""

    def __enter__(self) -> Any:
        self._helper = self._target.__enter__()
        return _Stream(self._helper, self._watch)

    def __exit__(self, *exc: object) -> Any:
        try:
            return self._target.__exit__(*exc)
        finally:
            self._watch.at_exit(getattr(self, "_helper", None))


class _AsyncManager(_Proxy):
    """The async twin of :class:`_Manager`."""

    async def __aenter__(self) -> Any:
        self._helper = await self._target.__aenter__()
        return _AsyncStream(self._helper, self._watch)

    async def __aexit__(self, *exc: object) -> Any:
        try:
            return await self._target.__aexit__(*exc)
        finally:
            self._watch.at_exit(getattr(self, "_helper", None))


def watch_stream(
    memory: ClientMemory, endpoint: Endpoint, fingerprint: str | None, stream: Any
) -> Any:
    """``stream`` (the SDK's reply to ``stream=True``) watched for the turn of
    ``fingerprint``; anything but a stream comes back as it is, its turn ended."""
    return _watched(memory, endpoint, fingerprint, stream, manager=False)


def watch_manager(
    memory: ClientMemory, endpoint: Endpoint, fingerprint: str | None, manager: Any
) -> Any:
    """A stream helper's ``manager`` whose stream is watched for the turn of ``fingerprint``."""
    return _watched(memory, endpoint, fingerprint, manager, manager=True)


def _watched(
    memory: ClientMemory, endpoint: Endpoint, fingerprint: str | None, obj: Any, *, manager: bool
) -> Any:
    try:
        watch = Watch(memory, endpoint, fingerprint)
        if manager and hasattr(obj, "__aenter__"):
            return _AsyncManager(obj, watch)
        if manager and hasattr(obj, "__enter__"):
            return _Manager(obj, watch)
        if not manager and hasattr(obj, "__aiter__"):
            return _AsyncStream(obj, watch)
        if not manager and hasattr(obj, "__iter__"):
            return _Stream(obj, watch)
    except Exception:  # noqa: BLE001 - memory never fails the call
        _log.exception("memory_inject: could not watch a stream; its turn ends now")
    memory.close(fingerprint)
    return obj
