"""The relevance benchmark's own data and pure helpers (``benchmarks/relevance.py``).

The prompt files are committed data, so a bad edit (a duplicate, a blank line
that shifts the meaning, a prompt on the chats' own topics) must fail here,
not skew the next run. The numbers themselves are a benchmark, never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from benchmarks.relevance import (
    CONTENTLESS,
    HELDOUT,
    OFFTOPIC,
    CurvePoint,
    floor_order_ok,
    keys_at,
    operating_curve,
    parse_floors,
    read_contentless,
    read_offtopic,
)

#: Words of the LoCoMo chats' own topics; an off-topic prompt must not be about them.
CHAT_TOPICS = re.compile(
    r"\b(paint(ing)?|camp(ing)?|family|kids?|child(ren)?|dogs?|cats?|pets?|books?|novels?|"
    r"music|guitar|adopt(ion)?|pride|transgender|lgbtq|hik(e|ing)|danc(e|ing)|movies?|"
    r"basketball|turtles?|volunteer(ing)?|support group)\b",
    re.IGNORECASE,
)


def _normalised(prompt: str) -> str:
    return " ".join(prompt.lower().split())


class TestOfftopicPrompts:
    """``offtopic_prompts.txt``: many distinct one-line prompts, off the chats' topics."""

    def test_at_least_150(self) -> None:
        """The file holds at least 150 prompts."""
        assert len(read_offtopic()) >= 150

    def test_no_duplicates(self) -> None:
        """No two prompts are the same up to case and spacing."""
        prompts = [_normalised(p) for p in read_offtopic()]
        assert [] == sorted({p for p in prompts if prompts.count(p) > 1})

    def test_lengths(self) -> None:
        """Every prompt has 2 to 40 words and no surrounding whitespace."""
        bad = [p for p in read_offtopic() if not 2 <= len(p.split()) <= 40 or p != p.strip()]
        assert [] == bad

    def test_off_the_chat_topics(self) -> None:
        """No prompt names one of the chats' topics (family, pets, painting, ...)."""
        assert [] == [p for p in read_offtopic() if CHAT_TOPICS.search(p)]

    def test_comments_and_blank_lines_skipped(self, tmp_path: Path) -> None:
        """``# `` lines and blank lines are not prompts; ``#include`` is."""
        f = tmp_path / "p.txt"
        f.write_text("# header\n#\n\nfirst prompt\n#include <x> fails\n", encoding="utf-8")
        assert ["first prompt", "#include <x> fails"] == read_offtopic(f)

    def test_header_documents_the_format(self) -> None:
        """The file starts with a comment saying what it is and how it is read."""
        assert OFFTOPIC.read_text(encoding="utf-8").startswith("# Off-topic prompts")


class TestHeldoutPrompts:
    """``offtopic_heldout.txt``: the check set, held apart from the tuning set."""

    def test_at_least_100_distinct_well_formed_prompts(self) -> None:
        """At least 100 prompts, no duplicates, 2 to 40 words, stripped."""
        prompts = read_offtopic(HELDOUT)
        assert len(prompts) >= 100
        normalised = [_normalised(p) for p in prompts]
        assert len(set(normalised)) == len(normalised)
        assert [] == [p for p in prompts if not 2 <= len(p.split()) <= 40 or p != p.strip()]

    def test_off_the_chat_topics(self) -> None:
        """No prompt names one of the chats' topics."""
        assert [] == [p for p in read_offtopic(HELDOUT) if CHAT_TOPICS.search(p)]

    def test_shares_no_prompt_with_the_tuning_set(self) -> None:
        """A prompt of the tuning set in the check set would make the check partly tuned."""
        tuning = {_normalised(p) for p in read_offtopic()}
        assert [] == [p for p in read_offtopic(HELDOUT) if _normalised(p) in tuning]


class TestContentlessPrompts:
    """``contentless_prompts.jsonl``: JSON strings, blank ones included, no duplicates."""

    def test_at_least_25(self) -> None:
        """The file holds at least 25 messages."""
        assert len(read_contentless()) >= 25

    def test_no_duplicates(self) -> None:
        """Every message is distinct (exactly: ``" "`` and ``"\\n"`` are different turns)."""
        msgs = read_contentless()
        assert len(msgs) == len(set(msgs))

    def test_blank_messages_survive_the_format(self) -> None:
        """The empty, blank and newline-only messages are read back as themselves."""
        assert {"", " ", "\n", "ok", "👍", "[IMAGE:/tmp/a.png]"} <= set(read_contentless())

    def test_every_data_line_is_a_json_string(self) -> None:
        """Each non-comment line parses as a JSON string."""
        lines = CONTENTLESS.read_text(encoding="utf-8").splitlines()
        data = [json.loads(line) for line in lines if not line.startswith("#")]
        assert [] == [x for x in data if not isinstance(x, str)]

    def test_non_string_rejected(self, tmp_path: Path) -> None:
        """A line that is JSON but not a string is an error naming the line."""
        f = tmp_path / "c.jsonl"
        f.write_text('# h\n"ok"\n3\n', encoding="utf-8")
        with pytest.raises(ValueError, match=r"c\.jsonl:3"):
            read_contentless(f)


class TestKeysAt:
    """A floor keeps what ``RelevanceFilter`` keeps."""

    def test_floor(self) -> None:
        """Scores at the floor pass, below it drop, unscored always pass."""
        rendered = (("a", 0.9), ("b", 0.5), ("c", None), ("d", 0.49))
        assert ("a", "b", "c") == keys_at(rendered, 0.5)

    def test_floor_zero_keeps_all(self) -> None:
        """Floor 0 keeps every non-negative score."""
        assert ("a", "b") == keys_at((("a", 0.0), ("b", None)), 0.0)


class TestFloorOrder:
    """Filtering is exact only when every floor keeps a prefix."""

    def test_descending(self) -> None:
        """Non-increasing scores, ties included, are in order."""
        assert floor_order_ok([1.0, 0.7, 0.7, 0.2])

    def test_unscored_first(self) -> None:
        """Unscored entries count as highest: first is fine, after a score is not."""
        assert (True, False) == (
            floor_order_ok([None, None, 0.3]),
            floor_order_ok([0.3, None]),
        )

    def test_rising(self) -> None:
        """A score above an earlier one breaks the order."""
        assert not floor_order_ok([0.5, 0.2, 0.6])

    def test_empty(self) -> None:
        """Nothing recalled is trivially in order."""
        assert floor_order_ok([])


class TestOperatingCurve:
    """The curve on a hand-made input: two questions, two off-topic, one contentless."""

    def test_curve(self) -> None:
        """Block recall and each injection rate, per floor."""
        floors = (0.0, 0.5, 0.9)
        q1 = (("e1", 1.0), ("x", 0.6), ("e2", 0.3))
        q2 = (("y", 0.8), ("e3", 0.4))
        off1 = (("z", 0.55),)
        off2: tuple[tuple[str, float | None], ...] = ()
        blank = (("r", None),)

        def blocks(rendered: tuple[tuple[str, float | None], ...]) -> dict[float, tuple[str, ...]]:
            return {f: keys_at(rendered, f) for f in floors}

        curve = operating_curve(
            [(blocks(q1), ["e1", "e2"]), (blocks(q2), ["e3"])],
            [blocks(off1), blocks(off2)],
            [blocks(blank)],
            floors,
        )
        assert [
            CurvePoint(0.0, (1.0 + 1.0) / 2, 1.0, 0.5, 1.0),
            CurvePoint(0.5, (0.5 + 0.0) / 2, 1.0, 0.5, 1.0),
            CurvePoint(0.9, (0.5 + 0.0) / 2, 0.5, 0.0, 1.0),
        ] == curve


class TestParseFloors:
    """``--floors`` takes comma-separated values in 0..1."""

    def test_parse(self) -> None:
        """Spaces and a trailing comma are fine."""
        assert (0.0, 0.25, 1.0) == parse_floors("0, 0.25,1,")

    def test_out_of_range(self) -> None:
        """A floor above 1 is refused."""
        with pytest.raises(argparse.ArgumentTypeError, match=r"0\.\.1"):
            parse_floors("0.5,1.5")
