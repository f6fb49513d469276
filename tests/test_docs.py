"""Docs that run: every fenced Python block of README.md and docs/*.md is executed (issue 11).

How a page runs:

* **Cumulative per page.** The ``python`` blocks of one page run in order in one namespace,
  the way a reader pastes them into one session; each page starts from nothing.
* **In a scratch copy.** The page runs with a temporary directory as the current directory,
  holding a copy of ``config/`` (so ``config/agents/alice.yaml`` and ``.memory/`` resolve as
  in a fresh clone, without touching the repository), plus any file a page's ``yaml`` or
  ``jsonl`` block names on its first line as ``# file: NAME``.
* **Offline SDKs.** Every ``openai.OpenAI`` / ``AsyncOpenAI`` a page builds (directly or
  inside LangChain, the Agents SDK, pydantic-ai or mem0) talks to ``httpx.MockTransport``
  (:class:`tests._frameworks.ChatServer`, ``ResponsesServer`` and an ``/embeddings`` route),
  so a page calls the real SDKs and real requests are serialised, with no network.
* **Output shown is output printed.** A ``text`` block introduced by the one word
  ``prints`` must equal what the Python block before it printed (trailing spaces aside).
* **Not run, on purpose.** A block right after a line ``<!-- docs: no-run REASON -->`` is
  skipped; the reason is required, and :data:`NO_RUN` lists every such block, so the set
  stays small and each one is justified in the page itself. A block whose first line is
  ``# expect: ExceptionName`` must raise that exception (an example of an error).

A failure names the page, the line of the block and the traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import math
import os
import re
import shutil
import traceback
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest

from memory_inject.signals import memory_recall, memory_skipped
from tests import _frameworks as fw

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*$")
_NO_RUN = re.compile(r"^\s*<!-- docs: no-run(?P<reason>.*?)-->\s*$")
_FILE = re.compile(r"^#\s*file:\s*(?P<name>\S+)\s*$")
_EXPECT = re.compile(r"^#\s*expect:\s*(?P<name>\w+)\s*$")

#: Every block that is not run: (page, a line of its text). Keep it small; each is justified
#: by the reason in its marker.
NO_RUN: set[tuple[str, str]] = set()


@attrs.frozen
class Block:
    """One fenced block: its page, first line number, language, text and marker."""

    page: str
    line: int
    lang: str
    text: str
    no_run: str | None = None
    lead: str = ""  # the prose between the previous block and this one

    @property
    def where(self) -> str:
        """``page:line`` of the block's opening fence."""
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (indented fences too)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    pending: str | None = None
    prose: list[str] = []
    while i < len(lines):
        marker = _NO_RUN.match(lines[i])
        if marker is not None:
            pending = marker["reason"].strip()
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                pending = None
                prose.append(lines[i].strip())
            i += 1
            continue
        indent = len(fence["indent"])
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        text = "\n".join(body) + "\n"
        out.append(Block(path.name, start + 1, fence["lang"], text, pending, " ".join(prose)))
        pending, prose = None, []
        i += 1
    return out


@contextlib.contextmanager
def offline_sdks() -> Iterator[None]:
    """Every ``OpenAI()`` / ``AsyncOpenAI()`` built inside the block talks to a mock server."""
    import openai

    chat, responses = fw.ChatServer(), fw.ResponsesServer()

    def route(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path.endswith("/embeddings"):
            return embeddings(request)
        return responses(request) if path.endswith("/responses") else chat(request)

    originals = {cls: cls.__init__ for cls in (openai.OpenAI, openai.AsyncOpenAI)}

    def patched(cls: Any) -> Any:
        init = originals[cls]
        client_type = httpx2.AsyncClient if cls is openai.AsyncOpenAI else httpx2.Client

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs["api_key"] = kwargs.get("api_key") or "docs-test"
            # every client, also one a framework builds with its own http_client, goes offline
            kwargs["http_client"] = client_type(transport=httpx2.MockTransport(route))
            init(self, *args, **kwargs)

        return __init__

    for cls in originals:
        cls.__init__ = patched(cls)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, init in originals.items():
            cls.__init__ = init  # type: ignore[method-assign]


def embeddings(request: httpx2.Request) -> httpx2.Response:
    """OpenAI ``/embeddings``: a normalised bag of hashed words per input (mem0's embedder)."""
    body = json.loads(request.content)
    texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
    data = []
    for i, text in enumerate(texts):
        vec = [0.0] * body.get("dimensions", 1536)
        for word in re.findall(r"\w+", text.lower()):
            vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % len(vec)] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        data.append({"object": "embedding", "index": i, "embedding": [x / norm for x in vec]})
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return httpx2.Response(
        200, json={"object": "list", "data": data, "model": "docs", "usage": usage}
    )


@contextlib.contextmanager
def page_environment(workdir: Path) -> Iterator[None]:
    """An API key the frameworks look for; mem0 and the Agents SDK with nothing sent out."""
    values = {
        "OPENAI_API_KEY": "docs-test",
        "MEM0_TELEMETRY": "False",
        "MEM0_DIR": str(workdir / ".mem0"),
        "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the SDK's trace exporter would go online
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@contextlib.contextmanager
def loop_closed() -> Iterator[None]:
    """Close the event loop a page left set (pydantic-ai's ``run_sync`` leaves one open)."""
    try:
        yield
    finally:
        loop: asyncio.AbstractEventLoop | None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
        if loop is not None and not loop.is_running():
            loop.close()
            asyncio.set_event_loop(None)


@contextlib.contextmanager
def signals_restored() -> Iterator[None]:
    """Receivers a page connects (bridges, metrics) are disconnected when the page ends."""
    before = {sig: set(sig.receivers) for sig in (memory_recall, memory_skipped)}
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for sig, ids in before.items():
            for rid in set(sig.receivers) - ids:
                ref = sig.receivers[rid]
                receiver = ref() if isinstance(ref, weakref.ref) else ref
                if receiver is not None:
                    sig.disconnect(receiver)
        root.handlers[:], root.level = handlers, level


def _write_files(page: list[Block], workdir: Path) -> None:
    for block in page:
        first = block.text.splitlines()[0] if block.text.strip() else ""
        named = _FILE.match(first)
        if named is not None:
            target = workdir / named["name"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def run_page(path: Path, workdir: Path) -> tuple[list[Block], str]:
    """Run a page's Python blocks in ``workdir``; return the blocks run and what they printed.

    Raises ``AssertionError`` naming the page, the block's line and the traceback.
    """
    shutil.copytree(ROOT / "config", workdir / "config")
    page = blocks(path)
    _write_files(page, workdir)
    namespace: dict[str, Any] = {"__name__": f"docs_{path.stem}"}
    ran: list[Block] = []
    printed = io.StringIO()
    with (
        contextlib.chdir(workdir),
        page_environment(workdir),
        offline_sdks(),
        signals_restored(),
        loop_closed(),
    ):
        for block, after in zip(page, [*page[1:], None] if page else [], strict=True):
            if block.lang != "python" or block.no_run is not None:
                continue
            first = block.text.splitlines()[0] if block.text.strip() else ""
            expect = _EXPECT.match(first)
            own = io.StringIO()
            try:
                with contextlib.redirect_stdout(own):
                    exec(compile(block.text, block.where, "exec"), namespace)  # noqa: S102
            except Exception as exc:
                if expect is not None and type(exc).__name__ == expect["name"]:
                    ran.append(block)
                    continue
                detail = "".join(traceback.format_exception(exc))
                raise AssertionError(f"{block.where}: the block raised\n{detail}") from None
            if expect is not None:
                raise AssertionError(f"{block.where}: expected {expect['name']}, nothing raised")
            printed.write(own.getvalue())
            if after is not None and after.lang == "text" and after.lead == "prints":
                assert _lines(after.text) == _lines(own.getvalue()), (
                    f"{block.where}: prints what {after.where} does not show"
                )
            ran.append(block)
    return ran, printed.getvalue()


class TestBlocks:
    def test_fences_indented_and_markers_are_read(self, tmp_path: Path) -> None:
        """Blocks are found with their line, language and marker; indented ones are dedented."""
        page = tmp_path / "p.md"
        page.write_text(
            "intro\n```python\nx = 1\n```\n<!-- docs: no-run needs a server -->\n"
            "```python\ny = 2\n```\n* item\n\n  ```yaml\n  a: 1\n  ```\n",
            encoding="utf-8",
        )
        found = blocks(page)
        assert [(2, "python", None), (6, "python", "needs a server"), (11, "yaml", None)] == [
            (b.line, b.lang, b.no_run) for b in found
        ]
        assert "a: 1\n" == found[2].text

    def test_a_failing_block_names_its_page_and_line(self, tmp_path: Path) -> None:
        """A block that raises fails the page with ``page:line`` and the exception."""
        (tmp_path / "config").mkdir()
        page = tmp_path / "bad.md"
        page.write_text("```python\nx = 1\n```\n\n```python\nundefined_name\n```\n")
        with pytest.raises(AssertionError, match=r"bad\.md:5: the block raised[\s\S]*NameError"):
            run_page_from(page, tmp_path / "work")

    def test_a_prints_block_must_match_the_output(self, tmp_path: Path) -> None:
        """A ``prints`` block that differs from what was printed fails with both places."""
        page = tmp_path / "out.md"
        page.write_text("```python\nprint('a')\n```\n\nprints\n\n```text\nb\n```\n")
        with pytest.raises(AssertionError, match=r"out\.md:1: prints what out\.md:7 does not"):
            run_page_from(page, tmp_path / "work")

    def test_blocks_share_one_namespace_per_page(self, tmp_path: Path) -> None:
        """A later block sees what an earlier block of the same page defined."""
        page = tmp_path / "ok.md"
        page.write_text("```python\nx = 41\n```\ntext\n```python\nprint(x + 1)\n```\n")
        ran, printed = run_page_from(page, tmp_path / "work")
        assert 2 == len(ran) and "42\n" == printed


def run_page_from(page: Path, workdir: Path) -> tuple[list[Block], str]:
    """:func:`run_page` for a page outside the repository (the runner's own tests)."""
    workdir.mkdir()
    return run_page(page, workdir)


class TestPages:
    @pytest.mark.parametrize("path", PAGES, ids=[p.name for p in PAGES])
    def test_every_python_block_runs(self, path: Path, tmp_path: Path) -> None:
        """The page's Python blocks run, in order, in one namespace, offline."""
        ran, _ = run_page(path, tmp_path)
        expected = [b for b in blocks(path) if b.lang == "python" and b.no_run is None]
        assert [b.where for b in expected] == [b.where for b in ran]

    def test_the_no_run_set_is_the_listed_one_and_each_has_a_reason(self) -> None:
        """Only the blocks in :data:`NO_RUN` are skipped, each with a reason in its marker."""
        skipped = [b for p in PAGES for b in blocks(p) if b.no_run is not None]
        assert all(b.no_run for b in skipped), [b.where for b in skipped if not b.no_run]
        found = {
            (b.page, line)
            for b in skipped
            for line in b.text.splitlines()
            if (b.page, line) in NO_RUN
        }
        assert NO_RUN == found
        assert len(NO_RUN) == len(skipped)

    def test_the_quickstart_and_signal_examples_print_what_they_found(self, tmp_path: Path) -> None:
        """The README's Quickstart shows its block and the signal example prints its event."""
        _, printed = run_page(ROOT / "README.md", tmp_path)
        assert fw.BLOCK_START in printed
        assert "sqlite True" in printed
