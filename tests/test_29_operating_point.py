"""Issue 29: the near-miss prompt set and its place in ``benchmarks/relevance.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.relevance import (
    NEARMISS,
    OFFTOPIC,
    CurvePoint,
    keys_at,
    measure,
    operating_curve,
    print_report,
    read_contentless,
    read_offtopic,
)


def _normalised(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


class TestNearMissFile:
    """``nearmiss_prompts.txt``: many distinct personal one-line questions."""

    def test_size(self) -> None:
        """Between 150 and 250 prompts, as the issue asks."""
        assert 150 <= len(read_offtopic(NEARMISS)) <= 250

    def test_distinct(self) -> None:
        """No prompt is repeated, even up to case and punctuation."""
        prompts = [_normalised(p) for p in read_offtopic(NEARMISS)]
        assert len(set(prompts)) == len(prompts)

    def test_shape(self) -> None:
        """Each prompt is 2 to 40 words with no surrounding blanks."""
        bad = [
            p for p in read_offtopic(NEARMISS) if not 2 <= len(p.split()) <= 40 or p != p.strip()
        ]
        assert [] == bad

    def test_personal(self) -> None:
        """Each prompt asks about the user's own life (I, my, me, we, us, our)."""
        own = re.compile(r"\b(i|my|me|we|us|our|i'm|i'd)\b", re.IGNORECASE)
        assert [] == [p for p in read_offtopic(NEARMISS) if not own.search(p)]

    def test_apart_from_offtopic(self) -> None:
        """No near-miss prompt is also an off-topic one."""
        offtopic = {_normalised(p) for p in read_offtopic(OFFTOPIC)}
        assert [] == [p for p in read_offtopic(NEARMISS) if _normalised(p) in offtopic]


class TestCurve:
    """The operating curve's near-miss column."""

    def test_nearmiss_rate_per_floor(self) -> None:
        """The near-miss rate is the share of near-miss renders keeping an entry at each floor."""
        floors = (0.0, 0.5)

        def blocks(rendered: tuple[tuple[str, float | None], ...]) -> dict[float, tuple[str, ...]]:
            return {f: keys_at(rendered, f) for f in floors}

        curve = operating_curve(
            [(blocks((("e", 0.9),)), ["e"])],
            [],
            [],
            floors,
            [blocks((("a", 0.6),)), blocks((("b", 0.3),)), blocks(())],
        )
        assert [
            CurvePoint(0.0, 1.0, 1.0, 0.0, 0.0, 2 / 3),
            CurvePoint(0.5, 1.0, 1.0, 0.0, 0.0, 1 / 3),
        ] == curve


def _dataset(root: Path) -> Path:
    """Two tiny conversations and one question each, in the layout ``load`` reads."""
    rows = []
    for conv, topic in (("c1", "pottery kiln glaze"), ("c2", "marathon training shoes")):
        for n, text in enumerate(
            (f"Ann: I spent the weekend on {topic}", "Bob: my landlord raised the rent again")
        ):
            rows.append(
                {
                    "id": f"{conv}:D1:{n}",
                    "conversation": conv,
                    "content": text,
                    "timestamp": f"2023-05-0{n + 1}T10:00:00",
                }
            )
    queries = [
        {
            "conversation": conv,
            "question": f"What did Ann do with {word}?",
            "evidence": [f"{conv}:D1:0"],
            "category_name": "single-hop",
        }
        for conv, word in (("c1", "pottery kiln glaze"), ("c2", "marathon training shoes"))
    ]
    (root / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    return root


class TestMeasure:
    """``measure`` renders the near-miss prompts against every store, on the filtered sweep."""

    @pytest.fixture
    def report(self, tmp_path: Path) -> dict[str, Any]:
        """The report of a two-store dataset with two near-miss prompts, one sharing a word."""
        data = _dataset(tmp_path)
        off = tmp_path / "off.txt"
        off.write_text("git rebase onto main\n")
        near = tmp_path / "near.txt"
        near.write_text(
            "# a comment\nwhat did my landlord say about the rent?\nwhen is my flight\n"
        )
        return measure(data, (0.0, 0.4), verify_every=1, offtopic_file=off, nearmiss_file=near)

    def test_counts(self, report: dict[str, Any]) -> None:
        """Each near-miss prompt is rendered once per store."""
        assert (2, 4) == (report["nearmiss_prompts"], report["default"]["nearmiss_renders"])

    def test_rate(self, report: dict[str, Any]) -> None:
        """The landlord prompt injects in both stores; the flight prompt in none."""
        assert 0.5 == report["default"]["nearmiss_injected"]

    def test_fast_path(self, report: dict[str, Any]) -> None:
        """Every prompt, near-miss ones included, is filtered from one floor-0 render."""
        sweep = report["sweep"]
        assert (sweep["prompts"], None) == (sweep["filtered"], sweep["mismatch"])
        assert 2 + 2 + 4 + 2 * len(read_contentless()) == sweep["prompts"]

    def test_curve_column(self, report: dict[str, Any]) -> None:
        """The curve's near-miss column at floor 0 is the share of near-miss renders injecting."""
        assert [0.5, 0.5] == [p["nearmiss_injected"] for p in report["curve"]]

    def test_printed(self, report: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
        """The printed report has the near-miss row and the curve's near-miss column."""
        print_report(report)
        out = capsys.readouterr().out
        assert "| near-miss false-injection rate | 0.500 (of 4) |" in out
        assert "| near-miss false injection |" in out
