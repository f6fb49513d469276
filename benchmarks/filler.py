"""Chat between questions: how much of it recalls, and how much topical chat keeps its words.

Issue 29, thirtieth round. ``benchmarks/filler/`` holds sets written by helpers who never
saw the rules (our own text, MIT, like the repository):

* ``set1_filler.txt`` (200) and ``set1_topical.txt`` (150): acknowledgements, praise,
  farewells, turn-taking ("yep that works", "try again"), and short messages that carry
  a topic in the same words ("good job on the quarterly report?"). The rules' second pass
  read set 1's misses: it is no longer held out.
* ``set2_filler.txt`` (150) and ``set2_topical.txt`` (100): written later, unseen until
  measured (Discord and support-chat style, longer complaints, slang).
* ``facts.txt``: 122 facts of one fictional user, as ``remember()`` stores them.

For each file: how many prompts have a content word (``trivial.has_query_terms``), and
how many inject a block against a ``SQLiteStore`` of the 122 facts (``remember()``,
default config, a session turn). A filler that injects is a false injection; a topical
message without a content word is a question that can never get its memory.
``python benchmarks/filler.py [--data benchmarks/filler]``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from memory_inject import MemoryInjectConfig, render_memory_context
from memory_inject.adapters import remember
from memory_inject.storage import SQLiteStore
from memory_inject.trivial import has_query_terms

HERE = Path(__file__).resolve().parent / "filler"
SETS = ("set1_filler", "set1_topical", "set2_filler", "set2_topical")


def read_lines(path: Path) -> list[str]:
    """The non-blank lines of ``path``, stripped."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(data: Path) -> dict[str, tuple[int, int, int]]:
    """Per set: (prompts, with a content word, injecting against the facts)."""
    out: dict[str, tuple[int, int, int]] = {}
    config = MemoryInjectConfig()
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "facts.db")
        try:
            for fact in read_lines(data / "facts.txt"):
                remember(store, None, fact)
            for name in SETS:
                prompts = read_lines(data / f"{name}.txt")
                worded = sum(has_query_terms(p) for p in prompts)
                injected = sum(
                    bool(render_memory_context(store, p, config=config, sessions=["u"]).text)
                    for p in prompts
                )
                out[name] = (len(prompts), worded, injected)
        finally:
            store.close()
    return out


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=HERE)
    args = ap.parse_args()
    print("| set | prompts | with a content word | injecting against 122 facts |")
    print("|---|---:|---:|---:|")
    for name, (n, worded, injected) in measure(args.data).items():
        print(f"| {name} | {n} | {worded} | {injected} |")


if __name__ == "__main__":
    main()
