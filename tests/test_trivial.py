"""Trivial prompts: PI's injection-filter cases plus punctuation, emoji and path fixes."""

from __future__ import annotations

import pytest

from memory_inject import render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.signals import MemorySkipped
from memory_inject.storage.memory import InMemoryStore
from memory_inject.trivial import DEFAULT_ACKNOWLEDGEMENTS, has_query_terms, is_trivial_prompt


class TestPiCases:
    @pytest.mark.parametrize(
        "prompt",
        [
            "how do I implement the auth module?",
            "add a new endpoint for user profiles",
            "why is the test failing?",
            "what is the memory governance policy?",
        ],
    )
    def test_substantive_prompts_are_not_trivial(self, prompt: str) -> None:
        """PI 'injects for substantive prompts'."""
        assert False is is_trivial_prompt(prompt)

    @pytest.mark.parametrize("prompt", ["ok", "thanks", "sounds good", "yes", "continue", "got it"])
    def test_acknowledgements_are_trivial(self, prompt: str) -> None:
        """PI 'skips trivial acknowledgements'."""
        assert True is is_trivial_prompt(prompt)

    @pytest.mark.parametrize("prompt", ["/curate-memory", "/reload"])
    def test_slash_commands_are_trivial(self, prompt: str) -> None:
        """PI 'skips slash commands'."""
        assert True is is_trivial_prompt(prompt)

    @pytest.mark.parametrize("prompt", ["hi", "", "   "])
    def test_very_short_inputs_are_trivial(self, prompt: str) -> None:
        """PI 'skips very short inputs'."""
        assert True is is_trivial_prompt(prompt)

    @pytest.mark.parametrize(
        "prompt",
        ["thank you.", "got it.", "next.", "Thanks", "  go on  ", "make  sense", "Makes sense"],
    )
    def test_pi_edge_cases_that_skip(self, prompt: str) -> None:
        """Spec 1.13's 'not injected' column, and multi-word items with any spacing."""
        assert True is is_trivial_prompt(prompt)

    @pytest.mark.parametrize("prompt", ["great job", "yes please", "continue please", "hi!!"])
    def test_pi_edge_cases_that_inject(self, prompt: str) -> None:
        """An acknowledgement plus another word, or 'hi!!', is not trivial."""
        assert False is is_trivial_prompt(prompt)

    def test_pi_list_is_included(self) -> None:
        """Every acknowledgement of PI's list is in the default list."""
        pi = {
            "ok",
            "okay",
            "yes",
            "no",
            "sure",
            "right",
            "correct",
            "exactly",
            "true",
            "false",
            "thanks",
            "thank you",
            "sounds good",
            "looks good",
            "got it",
            "done",
            "continue",
            "proceed",
            "go on",
            "next",
            "great",
            "perfect",
            "nice",
            "cool",
            "yep",
            "nope",
            "understood",
            "make sense",
            "makes sense",
            "agreed",
        }
        assert set() == pi - set(DEFAULT_ACKNOWLEDGEMENTS)


class TestPunctuationAndEmoji:
    @pytest.mark.parametrize(
        "prompt",
        [
            "Thanks!!",
            "ok 👍",
            "Sounds good.",
            "thanks!",
            "sounds good!",
            "LGTM 🚀",
            "Thank you!! 🙏",
            "👍👍👍👍",
            "....",
            "ＯＫ！！",
        ],
    )
    def test_acknowledgements_ignore_punctuation_and_emoji(self, prompt: str) -> None:
        """Punctuation, symbols, emoji and width forms do not hide an acknowledgement."""
        assert True is is_trivial_prompt(prompt)

    def test_custom_acknowledgements_replace_the_default(self) -> None:
        """A host's own list is normalised the same way and replaces the default."""
        assert True is is_trivial_prompt("Merci !", acknowledgements=["merci"])
        assert False is is_trivial_prompt("thanks", acknowledgements=["merci"])

    def test_min_chars_is_configurable(self) -> None:
        """min_chars=0 lets a short prompt through; a bare symbol is still trivial."""
        assert False is is_trivial_prompt("why", min_chars=0)
        assert True is is_trivial_prompt("?", min_chars=0)


class TestSlashCommands:
    @pytest.mark.parametrize(
        "prompt", ["/help", "/clear", "/model gpt-4o", "/compact now", "  /reload  "]
    )
    def test_commands_with_or_without_arguments(self, prompt: str) -> None:
        """One /word token, optionally followed by arguments, is a command."""
        assert True is is_trivial_prompt(prompt)

    @pytest.mark.parametrize(
        "prompt",
        [
            "/usr/lib is broken",
            "/var/x.log fails to rotate",
            "// why is this comment here",
            "/2 of the tests fail",
        ],
    )
    def test_paths_and_other_slashes_are_not_commands(self, prompt: str) -> None:
        """A path, a double slash or a number after '/' is a real prompt."""
        assert False is is_trivial_prompt(prompt)

    def test_command_check_can_be_disabled(self) -> None:
        """slash_commands=False leaves commands to the host."""
        assert False is is_trivial_prompt("/explain the parser", slash_commands=False)


class TestQueryTerms:
    @pytest.mark.parametrize(
        "prompt",
        [
            "",
            "   \n\t",
            "*",
            "?",
            "...",
            "ok",
            "OK!",
            "ＯＫ",  # full-width letters fold to "ok"
            "thanks!",
            "thank you so much",
            "👍",
            "🙂🙂",
            "+1",
            "hi",
            "hey there",
            "haha lol",
            "go on",
            "what is it",
            "[IMAGE:/tmp/a.png]",
            "[FILE:report.pdf] ok",
            "please",
        ],
    )
    def test_prompts_without_content_words(self, prompt: str) -> None:
        """Function words, chit-chat, markers and symbols are nothing to recall by."""
        assert not has_query_terms(prompt)

    @pytest.mark.parametrize(
        "prompt",
        [
            "where do production deploys go?",
            "Hiking?",
            "kubectl logs",
            "[IMAGE:/tmp/a.png] what is in this chart",
            "2023",
            "josé",
            "東京",
            "ok so what about the invoice",
        ],
    )
    def test_prompts_with_a_content_word(self, prompt: str) -> None:
        """One content word, in any script, is enough."""
        assert has_query_terms(prompt)

    def test_a_long_contentless_prompt_is_still_contentless(self) -> None:
        """Length alone makes no content word (and the scan has no quadratic path)."""
        assert not has_query_terms("ok " * 20_000 + "👍" * 10_000)
        assert has_query_terms("ok " * 20_000 + "invoice")


class TestDirectRender:
    @pytest.mark.parametrize("prompt", ["/help deploy", "ok", "deploy?"])
    def test_render_memory_context_skips_a_trivial_prompt(self, prompt: str) -> None:
        """``render_memory_context(config=..., origin=...)`` resolved the policy without the
        prompt, so ``trivial_prompt.enabled`` held for the CLI and MemoryLoop only."""
        config = parse_agent_config(
            {"agent": "a", "memory": {"trivial_prompt": {"enabled": True, "min_chars": 10}}}
        ).memory
        store = InMemoryStore()
        store.store("deploy", "deploys go to prod-3", "core")
        result = render_memory_context(store, prompt, config=config, origin="interactive")
        assert result.skipped and "" == result.text
        assert isinstance(result.event, MemorySkipped) and "trivial_prompt" == result.event.reason
        kept = render_memory_context(
            store, "where do deploys go?", config=config, origin="interactive"
        )
        assert "prod-3" in kept.text
