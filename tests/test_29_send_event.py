"""The one event reaches its receivers whatever they are (twenty-eighth round).

Found by a helper running a server's worth of receivers: blinker prunes dead weak
receivers while it lists a sender's receivers, and another thread's ``connect(fn,
sender=...)`` meanwhile made that list raise ``RuntimeError: dictionary changed size
during iteration`` out of ``render_memory_context`` (4 in 51,000 renders): the turn
failed and no event went out. And an ``async def`` receiver was never run, with nothing
but Python's "never awaited" to say so.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from memory_inject import InMemoryStore, render_memory_context
from memory_inject.signals import memory_recall


def _store() -> InMemoryStore:
    store = InMemoryStore()
    store.store("deploy_target", "Production deploys go to prod-3.", "core")
    return store


def test_receivers_that_change_while_listed_are_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[Any] = []
    real = memory_recall.receivers_for
    calls = [0]

    def changing(sender: Any) -> Any:
        calls[0] += 1
        if calls[0] <= 3:  # as blinker raises when another thread resizes its dict
            yield from ()
            raise RuntimeError("dictionary changed size during iteration")
        yield from real(sender)

    def hear(sender: object, **kw: Any) -> None:
        heard.append(kw["event"])

    with memory_recall.connected_to(hear):
        monkeypatch.setattr(memory_recall, "receivers_for", changing)
        result = render_memory_context(_store(), "where do production deploys go?")
    assert 4 == calls[0]
    assert ["deploy_target"] == [e.key for e in result.entries]
    assert [result.event] == heard


def test_receivers_that_never_stop_changing_cost_the_event_not_the_turn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(sender: Any) -> Any:
        yield from ()
        raise RuntimeError("dictionary changed size during iteration")

    with memory_recall.connected_to(lambda sender, **kw: None):
        monkeypatch.setattr(memory_recall, "receivers_for", broken)
        result = render_memory_context(_store(), "where do production deploys go?")
    assert ["deploy_target"] == [e.key for e in result.entries]
    assert "the receivers kept changing; this event was not sent" in caplog.text


def test_an_async_receiver_is_named_once_and_its_coroutine_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[int] = []

    async def on_recall(sender: object, **kw: Any) -> None:
        ran.append(1)

    caplog.set_level(logging.WARNING, logger="memory_inject")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would fail here
        with memory_recall.connected_to(on_recall):
            for _ in range(3):
                render_memory_context(_store(), "where do production deploys go?")
    assert [] == ran
    named = [r for r in caplog.records if "is a coroutine function" in r.getMessage()]
    assert 1 == len(named)
    assert "on_recall" in named[0].getMessage()
