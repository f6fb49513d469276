"""Wrapping an SDK's ``create``: the block placed in its keyword, the turn closed after.

This module owns how a wrapped SDK method is called: which keyword carries
the messages (:class:`Endpoint`), :func:`call` / :func:`acall` (prepare,
send, close the turn when the model answers without asking for a tool; the
request goes out as it came when memory fails), and the forwarding objects
the OpenAI and Anthropic wrappers are built from (:class:`Forward`,
:class:`Create`). The engine they drive is :class:`._client.ClientMemory`.
"""

from __future__ import annotations

import copy
import inspect
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FrameType
from typing import Any

from attrs import frozen

from ._client import ClientMemory
from ._client_stream import Seen, watch_manager, watch_stream
from .messages import Api, get_field

__all__ = ["Client", "Create", "Endpoint", "Forward", "acall", "call", "memory_of"]

_log = logging.getLogger("memory_inject.adapters")


@frozen
class Endpoint:
    """How one SDK method carries its messages: the keyword, the API and the tool tests
    (of a whole response, and of a streamed reply's events one by one)."""

    key: str  # "messages" or "input"
    api: Api
    wants_tools: Callable[[Any], bool]  # the response asks the caller to run a tool
    see: Callable[[Seen, Any], None]  # one streamed event: its calls, its stop, its end


def _outgoing(value: Any) -> tuple[list[Any], bool] | None:
    """The message list of a keyword's value (a Responses ``input`` string is one message)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}], True
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return list(value), False
    if isinstance(value, Iterable) and not isinstance(value, Mapping | bytes | bytearray):
        return list(value), False  # the SDKs take any iterable (a generator, a map): read once
    return None


def _back(messages: list[Any], was_text: bool) -> Any:
    if was_text and len(messages) == 1 and isinstance(get_field(messages[0], "content"), str):
        return get_field(messages[0], "content")
    return messages


def _finished(
    memory: ClientMemory, endpoint: Endpoint, fp: str | None, resp: Any, *, helper: bool, kw: Any
) -> Any:
    """What the caller gets: a stream watched as it is read (:mod:`._client_stream`),
    or the response, its turn settled now (kept open when it asks for a tool)."""
    if helper:
        return watch_manager(memory, endpoint, fp, resp)
    if kw.get("stream"):
        return watch_stream(memory, endpoint, fp, resp)
    try:
        asks = endpoint.wants_tools(resp)
        if asks:
            memory.note_step(fp, resp)
    except Exception:  # noqa: BLE001 - an unexpected response shape ends the turn
        asks = False
    if not asks:
        memory.close(fp)
    return resp


def call(
    memory: ClientMemory,
    endpoint: Endpoint,
    create: Callable[..., Any],
    kwargs: dict[str, Any],
    caller: FrameType | None = None,
    *,
    stream: bool = False,
) -> Any:
    """``create(**kwargs)`` with this turn's block placed in ``kwargs[endpoint.key]``;
    ``caller`` is the host's frame that called it (see :meth:`ClientMemory.prepare`);
    ``stream``: ``create`` is a stream helper, whose manager is returned watched; with
    ``stream=True`` in ``kwargs`` the SDK's stream is returned watched."""
    found = _outgoing(kwargs.get(endpoint.key))
    if found is None:
        return create(**kwargs)
    try:
        prepared = memory.prepare(found[0], api=endpoint.api, caller=caller or sys._getframe(1))
    except Exception:  # noqa: BLE001 - memory never fails the turn: send it as it came
        _log.exception("memory_inject: could not place the block; sending the request as is")
        return create(**kwargs)
    sent = {**kwargs, endpoint.key: _back(prepared.messages, found[1])}
    try:
        resp = create(**sent)
    except BaseException:
        memory.close(prepared.fingerprint)
        raise
    return _finished(memory, endpoint, prepared.fingerprint, resp, helper=stream, kw=kwargs)


async def acall(
    memory: ClientMemory,
    endpoint: Endpoint,
    create: Callable[..., Any],
    kwargs: dict[str, Any],
    caller: FrameType | None = None,
    *,
    stream: bool = False,
) -> Any:
    """The async twin of :func:`call`."""
    found = _outgoing(kwargs.get(endpoint.key))
    if found is None:
        return await create(**kwargs)
    try:
        prepared = await memory.aprepare(
            found[0], api=endpoint.api, caller=caller or sys._getframe(1)
        )
    except Exception:  # noqa: BLE001 - memory never fails the turn: send it as it came
        _log.exception("memory_inject: could not place the block; sending the request as is")
        return await create(**kwargs)
    sent = {**kwargs, endpoint.key: _back(prepared.messages, found[1])}
    try:
        resp = await create(**sent)
    except BaseException:
        memory.close(prepared.fingerprint)
        raise
    return _finished(memory, endpoint, prepared.fingerprint, resp, helper=stream, kw=kwargs)


def _protocol(target: Any, name: str, kind: str = "") -> Any:
    """``target``'s bound ``name``, or the ``TypeError`` Python raises for an object
    without it (``with`` on an async client)."""
    if getattr(type(target), name, None) is None:
        raise TypeError(
            f"{type(target).__name__!r} object does not support the {kind}context manager protocol"
        )
    return getattr(target, name)


# A wrapper's own attributes: never the SDK's. On an instance not set up yet (the bare
# one copy and pickle make before they fill it) they are missing, not forwarded.
_OWN = frozenset({"_target", "memory", "_endpoint"})


class Forward:
    """Forwards every attribute to the wrapped SDK object, except those it defines."""

    def __init__(self, target: Any, memory: ClientMemory) -> None:
        """Wrap ``target``; ``memory`` is the client's engine."""
        self._target = target
        self.memory = memory

    def __getattr__(self, name: str) -> Any:
        """Everything not intercepted is the SDK's own (``with_raw_response``, ``list``...)."""
        if name in _OWN:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self._target, name)

    def __copy__(self) -> Any:
        """``copy.copy``: a wrapper of ``copy.copy`` of the SDK object (the SDK's clients
        copy so), with the same memory, as :meth:`Client.copy` keeps it."""
        new = self._bare()
        new._target = copy.copy(self._target)
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """``copy.deepcopy``: a wrapper of the SDK object's deep copy (the SDK's own error
        when it has none), with the same memory (a store is not copied)."""
        new = memo[id(self)] = self._bare()
        new._target = copy.deepcopy(self._target, memo)
        return new

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Not picklable, as the SDK's clients are not (and the memory holds a store)."""
        raise TypeError(
            f"cannot pickle a {type(self._target).__name__!r} wrapped with memory"
            " (wrap the SDK object again where it is needed)"
        )

    def _bare(self) -> Any:
        new = object.__new__(type(self))
        new.__dict__.update(vars(self))
        return new

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:
        """The SDK object's class: ``isinstance(wrapped, openai.OpenAI)`` holds, as code
        that picks its mode by the client's class (instructor's ``from_openai``) asks."""
        return type(self._target)


class Client(Forward):
    """A wrapped SDK client: its copies (``with_options``, ``copy``) and its ``beta``
    namespace keep the memory (they were the SDK's own, and sent no block and no event)."""

    def __enter__(self) -> Any:
        """``with client:`` as the SDK's (it closes the client at the end); gives the
        wrapper, not the SDK's client, so the block still reaches the calls made in it."""
        _protocol(self._target, "__enter__")()
        return self

    def __exit__(self, *exc: object) -> Any:
        """The SDK client's ``__exit__`` (it closes the client)."""
        return _protocol(self._target, "__exit__")(*exc)

    async def __aenter__(self) -> Any:
        """``async with client:`` as the SDK's async client; gives the wrapper."""
        await _protocol(self._target, "__aenter__", "asynchronous ")()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        """The SDK async client's ``__aexit__`` (it closes the client)."""
        return await _protocol(self._target, "__aexit__", "asynchronous ")(*exc)

    def with_options(self, **kwargs: Any) -> Any:
        """The SDK's ``with_options`` (a copy with a timeout, retries...), with memory."""
        return type(self)(self._target.with_options(**kwargs), self.memory)

    def copy(self, **kwargs: Any) -> Any:
        """The SDK's ``copy``, with memory."""
        return type(self)(self._target.copy(**kwargs), self.memory)

    @property
    def beta(self) -> Any:
        """``client.beta``, whose resources of the same names place the block as well."""
        return type(self)(self._target.beta, self.memory)


class Create(Forward):
    """An SDK resource whose ``create`` places the block (sync or async, as the SDK's is)."""

    def __init__(self, target: Any, memory: ClientMemory, endpoint: Endpoint) -> None:
        """Wrap ``target.create`` for ``endpoint``."""
        super().__init__(target, memory)
        self._endpoint = endpoint

    def create(self, **kwargs: Any) -> Any:
        """The SDK's ``create`` with memory; returns what it returns (a coroutine when async)."""
        return self._with_memory(self._target.create, kwargs, sys._getframe(1))

    def parse(self, **kwargs: Any) -> Any:
        """The SDK's ``parse`` (structured output: ``create`` and a parsed reply) with memory."""
        return self._with_memory(self._target.parse, kwargs, sys._getframe(1))

    def stream(self, **kwargs: Any) -> Any:
        """The SDK's ``stream`` helper (a stream manager) with memory, like ``create(stream=
        True)``: the stream is watched as it is read, and a reply that asks for a tool
        keeps the turn open, as a non-streamed one does."""
        fn = self._target.stream
        caller = sys._getframe(1)
        if inspect.iscoroutinefunction(inspect.unwrap(self._target.create)):
            return _AsyncStream(self, fn, kwargs, caller)
        return call(self.memory, self._endpoint, fn, kwargs, caller, stream=True)

    def _with_memory(self, fn: Any, kwargs: dict[str, Any], caller: FrameType) -> Any:
        # caller: the host's code; the turn lives while it runs
        if inspect.iscoroutinefunction(inspect.unwrap(fn)):
            return acall(self.memory, self._endpoint, fn, kwargs, caller)
        return call(self.memory, self._endpoint, fn, kwargs, caller)


class _AsyncStream:
    """An async client's stream helper: the block is recalled (awaited) and placed when the
    stream is entered, then the SDK's own manager runs."""

    def __init__(self, create: Create, fn: Any, kwargs: dict[str, Any], caller: FrameType):
        self._create, self._fn, self._kwargs, self._caller = create, fn, kwargs, caller
        self._manager: Any = None

    async def _open(self, **kwargs: Any) -> Any:
        return self._fn(**kwargs)

    async def __aenter__(self) -> Any:
        c = self._create
        self._manager = await acall(
            c.memory, c._endpoint, self._open, self._kwargs, self._caller, stream=True
        )
        return await self._manager.__aenter__()

    async def __aexit__(self, *exc: object) -> Any:
        return await self._manager.__aexit__(*exc)


def memory_of(client: object) -> ClientMemory:
    """The memory engine of a wrapped client (its options, e.g. ``.sessions``)."""
    memory = vars(client).get("memory") if hasattr(client, "__dict__") else None
    if not isinstance(memory, ClientMemory):
        raise TypeError(f"'client' must be a wrapped client (got {type(client).__name__})")
    return memory
