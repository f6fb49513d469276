"""benchmarks/facts.py: its prompts are what it says, and it counts what a block shows."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from adapters._remember import memory_key
from benchmarks.facts import HERE, LAYOUTS, evaluate, read_prompts, run, write
from memory_inject.storage import SQLiteStore

PROMPTS = read_prompts()
HELD_OUT = read_prompts(HERE / "facts_heldout.json")
HELD_OUT_2 = read_prompts(HERE / "facts_heldout2.json")
HELD_OUT_3 = read_prompts(HERE / "facts_heldout3.json")
HELD_OUT_4 = read_prompts(HERE / "facts_heldout4.json")
HELD_OUT_5 = read_prompts(HERE / "facts_heldout5.json")
CHINESE = read_prompts(HERE / "facts_zh.json")
JAPANESE = read_prompts(HERE / "facts_ja.json")
FRENCH = read_prompts(HERE / "facts_fr.json")
GERMAN = read_prompts(HERE / "facts_de.json")
SPANISH = read_prompts(HERE / "facts_es.json")
CHECKS = {f"{lang}-2": read_prompts(HERE / f"facts_{lang}2.json") for lang in ("fr", "de", "es")}
ITALIAN = read_prompts(HERE / "facts_it.json")
PORTUGUESE = read_prompts(HERE / "facts_pt.json")
KOREAN = read_prompts(HERE / "facts_ko.json")
#: Written while the twenty-fourth round built its rules, measured once before and after.
ROUND_24 = {
    name: read_prompts(HERE / f"facts_{name}.json") for name in ("ko2", "it2", "de3", "pt2", "es3")
}
NAMED = {
    "probe": PROMPTS,
    "held-out": HELD_OUT,
    "held-out-2": HELD_OUT_2,
    "held-out-3": HELD_OUT_3,
    "held-out-4": HELD_OUT_4,
    "held-out-5": HELD_OUT_5,
    "chinese": CHINESE,
    "japanese": JAPANESE,
    "french": FRENCH,
    "german": GERMAN,
    "spanish": SPANISH,
    **CHECKS,
    "italian": ITALIAN,
    "portuguese": PORTUGUESE,
    "korean": KOREAN,
    **ROUND_24,
}
SETS = pytest.mark.parametrize("prompts", list(NAMED.values()), ids=list(NAMED))
PAIRS = list(itertools.combinations(NAMED, 2))


class TestPrompts:
    @SETS
    def test_every_question_names_a_fact(self, prompts: dict[str, Any]) -> None:
        keys = set(prompts["facts"])
        assert {key for _, key in prompts["questions"]} <= keys

    @SETS
    def test_distinct(self, prompts: dict[str, Any]) -> None:
        asked = [q for q, _ in prompts["questions"]] + prompts["nearmiss"]
        assert len(asked) == len({q.lower() for q in asked})

    @SETS
    def test_questions_are_not_worded_as_the_facts(self, prompts: dict[str, Any]) -> None:
        """People ask "what is my dog called?", not the stored sentence back."""
        facts = {text.lower().rstrip(".") for text in prompts["facts"].values()}
        assert not any(q.lower().rstrip("?") in facts for q, _ in prompts["questions"])

    @pytest.mark.parametrize(
        ("one", "other"),
        [(NAMED[a], NAMED[b]) for a, b in PAIRS],
        ids=[f"{a}/{b}" for a, b in PAIRS],
    )
    def test_the_held_out_sets_are_their_own(
        self, one: dict[str, Any], other: dict[str, Any]
    ) -> None:
        """No fact, question or near miss of a held-out set is in another set."""
        for part in ("questions", "nearmiss"):
            seen = {str(q).lower() for q in one[part]}
            assert not seen & {str(q).lower() for q in other[part]}
        assert not set(one["facts"].values()) & set(other["facts"].values())


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


def test_derived_keys_hold_no_word_and_are_reported_by_name(tmp_path: Path) -> None:
    """``--keys derived``: each fact under remember()'s key, a hit reported by its name."""
    facts = {"dog": "The dog is named Biscuit.", "car": "Drives a blue Civic."}
    prompts: dict[str, Any] = {
        "facts": facts,
        "questions": [["Biscuit", "dog"], ["dog", "dog"]],
        "nearmiss": [],
    }
    r = run("apart", prompts, [], tmp_path, derived=True)
    assert r["answered"] == 2, r["missed"]
    store = SQLiteStore(tmp_path / "facts_apart.db")
    try:
        keys = {e.key for e in store.list()}
    finally:
        store.close()
    assert keys == {memory_key(t) for t in facts.values()}
    # "car" is only the name: under a derived key no row holds it.
    car = {"facts": facts, "questions": [["car", "car"]], "nearmiss": []}
    assert run("now", car, [], tmp_path / "n", derived=True)["answered"] == 0
    assert run("now", car, [], tmp_path / "m")["answered"] == 1


def test_frames_framed() -> None:
    from benchmarks.frames import framed

    assert framed("When did Caroline go?", "do you remember ") == (
        "do you remember when did Caroline go?"
    )
    assert framed("When did Caroline go?", "") == "When did Caroline go?"
