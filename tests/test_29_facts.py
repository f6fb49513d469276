"""benchmarks/facts.py: its prompts are what it says, and it counts what a block shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.facts import LAYOUTS, evaluate, read_prompts, run, write
from memory_inject.storage import SQLiteStore

PROMPTS = read_prompts()


class TestPrompts:
    def test_every_question_names_a_fact(self) -> None:
        keys = set(PROMPTS["facts"])
        assert {key for _, key in PROMPTS["questions"]} <= keys

    def test_distinct(self) -> None:
        asked = [q for q, _ in PROMPTS["questions"]] + PROMPTS["nearmiss"]
        assert len(asked) == len({q.lower() for q in asked})

    def test_questions_are_not_worded_as_the_facts(self) -> None:
        """People ask "what is my dog called?", not the stored sentence back."""
        facts = {text.lower().rstrip(".") for text in PROMPTS["facts"].values()}
        assert not any(q.lower().rstrip("?") in facts for q, _ in PROMPTS["questions"])


class TestEvaluate:
    def test_counts(self) -> None:
        shown = {"q1": ("a",), "q2": ("b", "a"), "q3": (), "n1": ("a",), "o1": ()}
        r = evaluate(lambda p: shown[p], [("q1", "a"), ("q2", "a"), ("q3", "c")], ["n1"], ["o1"])
        assert (r["answered"], r["questions"]) == (2, 3)
        assert r["precision"] == pytest.approx(2 / 3)
        assert (r["nearmiss_injected"], r["offtopic_injected"]) == (1, 0)
        assert r["missed"] == [("q3", ())]
        assert r["false"] == [("n1", ("a",))]


class TestLayouts:
    @pytest.mark.parametrize("layout", LAYOUTS)
    def test_one_row_a_fact(self, tmp_path: Path, layout: str) -> None:
        store = SQLiteStore(tmp_path / "f.db")
        try:
            write(store, PROMPTS["facts"], layout)
            assert store.count() == len(PROMPTS["facts"])
        finally:
            store.close()

    def test_unknown_layout(self, tmp_path: Path) -> None:
        store = SQLiteStore(tmp_path / "f.db")
        try:
            with pytest.raises(ValueError, match="layout must be one of"):
                write(store, PROMPTS["facts"], "sideways")
        finally:
            store.close()

    def test_a_fact_asked_in_its_own_words_is_answered(self, tmp_path: Path) -> None:
        """The real pipeline: a question that repeats its fact's words gets that fact."""
        prompts = dict(PROMPTS)
        prompts["questions"] = [[text, key] for key, text in PROMPTS["facts"].items()]
        r = run("apart", prompts, ["what is the capital of Peru?"], tmp_path)
        assert r["answered"] == r["questions"], r["missed"]
        assert r["offtopic_injected"] == 0


def test_frames_framed() -> None:
    from benchmarks.frames import framed

    assert framed("When did Caroline go?", "do you remember ") == (
        "do you remember when did Caroline go?"
    )
    assert framed("When did Caroline go?", "") == "When did Caroline go?"
