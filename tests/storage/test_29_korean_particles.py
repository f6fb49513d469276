"""A Korean prompt searches each noun without its particle, as a prefix, on both engines.

Korean writes particles onto the noun ("이름이", "이름은", "예약은"), so the word index
holds "이름은" where the prompt says "이름이", and "강아지 이름이 뭐야?" found nothing it
could score over the floor. A Hangul word is now searched as its stem, a prefix
("이름"*), and question words and pronouns ("뭐야", "언제", "우리") are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memory_inject._stopwords import korean_term
from memory_inject.storage.fusion import content_words
from tests.storage._facts import rendered_keys

ENGINES = ["sqlite", "postgres"]


class TestTerms:
    @pytest.mark.parametrize(
        ("word", "term"),
        [
            ("이름이", ("이름", True)),
            ("예약은", ("예약", True)),
            ("어린이집에서", ("어린이집", True)),
            ("강아지", ("강아지", True)),
            ("차가", ("차가", False)),  # a one-syllable stem is not a prefix: 차* is everything
            ("뭐야", None),
            ("우리는", None),
            ("dentist", ("dentist", False)),
        ],
    )
    def test_a_words_term(self, word: str, term: tuple[str, bool] | None) -> None:
        assert korean_term(word) == term

    def test_a_prompts_terms(self) -> None:
        assert content_words("우리 강아지 이름이 뭐야?") == [("강아지", True), ("이름", True)]
        # English is untouched.
        assert content_words("what is my dog called?") == [("dog", False), ("called", False)]


FACTS = {
    "dog": "우리 강아지 이름은 초코야",
    "dentist": "치과 예약은 다음 주 화요일 오후 3시야",
    "wife": "아내는 서울대병원에서 간호사로 일해",
    "rent": "월세는 매달 5일에 80만원 내",
}


@pytest.mark.parametrize("engine", ENGINES)
class TestStores:
    @pytest.mark.parametrize(
        ("prompt", "key"),
        [
            ("강아지 이름이 뭐야?", "dog"),
            ("치과 예약이 언제야?", "dentist"),
            ("아내가 어디서 일해?", "wife"),
            ("월세 얼마야?", "rent"),
        ],
    )
    def test_a_question_gets_its_memory(
        self, engine_store: Callable[[str], Any], engine: str, prompt: str, key: str
    ) -> None:
        assert rendered_keys(engine_store(engine), FACTS, prompt) == [key]

    def test_a_question_no_memory_answers_gets_no_block(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        assert rendered_keys(engine_store(engine), FACTS, "내일 날씨 어때?") == []
