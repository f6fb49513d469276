"""Secrets said in words are scrubbed from the event's summary, as ``key: value`` ones are.

A hunter's assistant user said "my wifi password is hunter2-Rivoli" and gave an IBAN;
the recall event's ``query_summary`` (logged, exported to OpenTelemetry) kept both:
only the spec's ``password: value`` form was scrubbed.
"""

from __future__ import annotations

import pytest

from memory_inject import InMemoryStore, MemoryRecall, render_memory_context
from memory_inject._text import scrub_credentials


@pytest.mark.parametrize(
    ("said", "secret", "kept"),
    [
        ("my wifi password is hunter2-Rivoli", "hunter2-Rivoli", "password is hunt*[REDACTED]"),
        ("the door code is 4711, don't forget", "4711", "door code is *[REDACTED]"),
        ("Mein Passwort ist Sonnenblume22!", "Sonnenblume22", "Passwort ist Sonn*[REDACTED]"),
        ("the PIN code is now 9931", "9931", "PIN code is now *[REDACTED]"),
        ("my IBAN is DE89 3704 0044 0532 0130 00, thanks", "3704 0044", "DE89*[REDACTED]"),
        ("IBAN: GB82WEST12345698765432", "WEST1234", "GB82*[REDACTED]"),
        # Forms an attack on the first version found (helper 118).
        ('my wifi password is "hunter2-Rivoli"', "hunter2", 'password is "hunt*[REDACTED]'),
        ("my password is still hunter2-Rivoli", "hunter2", "is still hunt*[REDACTED]"),
        ("my password is correct-horse-battery-staple", "horse", "corr*[REDACTED]"),
        ("the password for my bank is Rivoli42x", "Rivoli42x", "bank is Rivo*[REDACTED]"),
        ("the door code: 4711", "4711", "door code: *[REDACTED]"),
        ("mein WLAN-Passwort lautet Rivoli42x", "Rivoli42x", "Passwort lautet Rivo*[REDACTED]"),
        ("my PIN number is 4711", "4711", "PIN number is *[REDACTED]"),
        ("my IBAN is de89-3704-0044-0532-0130-00", "0532", "de89*[REDACTED]"),
        ("the door code is four seven one one", "seven", "door code is *[REDACTED]"),
    ],
)
def test_a_secret_said_in_words_is_scrubbed(said: str, secret: str, kept: str) -> None:
    out = scrub_credentials(said)
    assert secret not in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "my password was changed yesterday",
        "the password is wrong, help",
        "what is my wifi password?",
        "the pin is in the drawer",
        "ABBA was great in 1979",
    ],
)
def test_talk_about_a_secret_is_left_alone(text: str) -> None:
    assert scrub_credentials(text) == text


def test_the_spec_form_is_unchanged() -> None:
    assert scrub_credentials("password: hunter2hunter2") == "password: hunt*[REDACTED]"
    assert scrub_credentials('token="abcd1234efgh"') == 'token="abcd*[REDACTED]"'


def test_the_event_summary_hides_it() -> None:
    store = InMemoryStore()
    store.store("wifi", "The wifi is called Rivoli.", "core")
    result = render_memory_context(store, "remember: my wifi password is hunter2-Rivoli")
    assert isinstance(result.event, MemoryRecall)
    assert result.event.query_summary is not None
    assert "hunter2" not in result.event.query_summary
