"""A Korean prompt searches each noun without its particle, as a prefix, on both engines.

Korean writes particles onto the noun ("이름이", "이름은", "예약은"), so the word index
holds "이름은" where the prompt says "이름이", and "강아지 이름이 뭐야?" found nothing it
could score over the floor. A Hangul word is now searched as its stem, a prefix
("이름"*), and question words and pronouns ("뭐야", "언제", "우리") are dropped. The
renders on both engines are with the other languages' in test_29_foreign_function_words.
"""

from __future__ import annotations

import pytest

from memory_inject._stopwords import korean_term
from memory_inject.storage.fusion import content_words


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
            # A noun made a verb by 하다 / 되다 is searched as the noun.
            ("예약했지", ("예약", True)),
            ("접속하려면", ("접속", True)),
            ("출근할", ("출근", True)),
            ("등록돼", ("등록", True)),
            ("일하지", ("일하지", True)),  # a one-syllable noun keeps its ending
            # Question words with any ending, and the auxiliaries around them.
            ("언제였더라", None),
            ("몇시", None),
            ("어디로", None),
            ("있었지", None),
            ("할", None),
            ("수", None),
            # A noun that merely ends like a verb stays whole when its stem would be one
            # syllable; a longer one is searched by its first syllables, a prefix of it.
            ("동해", ("동해", True)),
            ("지중해", ("지중", True)),
            ("dentist", ("dentist", False)),
        ],
    )
    def test_a_words_term(self, word: str, term: tuple[str, bool] | None) -> None:
        assert korean_term(word) == term

    def test_a_prompts_terms(self) -> None:
        assert content_words("우리 강아지 이름이 뭐야?") == [("강아지", True), ("이름", True)]
        assert content_words("재택 무슨 요일에 할 수 있어?") == [("재택", True), ("요일", True)]
        assert content_words("회사 VPN 접속하려면 뭐 써야 돼?") == [
            ("회사", True),
            ("vpn", False),
            ("접속", True),
            ("써야", False),
        ]
        # English is untouched.
        assert content_words("what is my dog called?") == [("dog", False), ("called", False)]
