"""``@loop.wrap`` on a generator function: a streaming endpoint's body runs inside its turn.

A generator's body runs at each ``next()`` (``__anext__``), not when it is
called, and a server may run each step in a context of its own (Starlette's
``iterate_in_threadpool`` copies the context for every ``next()`` of a sync
generator). So the turn cannot be a ``with`` block around the call, nor a mark
set at the first step and reset at the last: the wrapper drives the generator
itself, and marks the turn around each step only, set and reset in the same
context. The turn opens at the first step and closes when the generator
finishes, raises or is closed (``close()`` / ``aclose()``: a consumer that left
with ``break``); between steps no context holds its mark, so a stream its
consumer abandoned makes nobody's next turn a ``sub_turn``. A task or thread a
step starts shares the mark, and sees it closed once the turn ends. What the
consumer sends, and an exception it throws in, is passed on to the generator
(a ``BaseException`` such as a cancellation closes it instead).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

from attrs import define

from ._turns import CURRENT, LoopTurn

__all__ = ["wrap_agen", "wrap_gen"]


@define
class _Steps:
    """One wrapped generator's turn, and what its consumer sent or threw in last."""

    turn: LoopTurn
    inner: Any  # the generator, sync or async
    sent: Any = None
    thrown: BaseException | None = None

    def took(self, sent: Any = None, thrown: BaseException | None = None) -> None:
        """What the consumer's last resume carried, passed on at the next step."""
        self.sent, self.thrown = sent, thrown

    @contextmanager
    def inside(self, *, last: bool = False) -> Iterator[None]:
        """A step (the last one, a close, ends the turn), marked in this context alone."""
        token = CURRENT.set(self.turn)
        try:
            yield
        finally:
            CURRENT.reset(token)
            if last:
                self.turn.close()

    def next(self) -> Any:
        """The next item of a sync generator, made inside the turn."""
        with self.inside():
            gen = self.inner
            return gen.send(self.sent) if self.thrown is None else gen.throw(self.thrown)

    async def anext(self) -> Any:
        """The next item of an async generator, made inside the turn."""
        with self.inside():
            gen = self.inner
            return await (gen.asend(self.sent) if self.thrown is None else gen.athrow(self.thrown))

    def close(self) -> None:
        """Close the sync generator (its own cleanup runs inside the turn), ending the turn."""
        with self.inside(last=True):
            self.inner.close()

    async def aclose(self) -> None:
        """Close the async generator inside the turn, ending the turn."""
        with self.inside(last=True):
            await self.inner.aclose()


def wrap_gen(
    opens: Callable[[], LoopTurn], f: Callable[..., Generator[Any, Any, Any]]
) -> Callable[..., Generator[Any, Any, Any]]:
    """``f`` (a generator function) run step by step inside a turn ``opens`` starts."""

    @functools.wraps(f)
    def stream(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        steps = _Steps(opens(), f(*args, **kwargs))
        try:
            while True:
                try:
                    item = steps.next()
                except StopIteration as stop:
                    return stop.value
                try:
                    steps.took((yield item))
                except Exception as exc:  # noqa: BLE001 - thrown in by the consumer: passed on
                    steps.took(thrown=exc)
        finally:
            steps.close()

    return stream


def wrap_agen(
    opens: Callable[[], LoopTurn], f: Callable[..., AsyncGenerator[Any, Any]]
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """The async twin of :func:`wrap_gen`, for an async generator function."""

    @functools.wraps(f)
    async def stream(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        steps = _Steps(opens(), f(*args, **kwargs))
        try:
            while True:
                try:
                    item = await steps.anext()
                except StopAsyncIteration:
                    return
                try:
                    steps.took((yield item))
                except Exception as exc:  # noqa: BLE001 - thrown in by the consumer: passed on
                    steps.took(thrown=exc)
        finally:
            await steps.aclose()

    return stream
