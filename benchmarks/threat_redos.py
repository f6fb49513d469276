"""The threat scan on texts built to be slow, per rule and in a whole channel turn.

    python benchmarks/threat_redos.py [--chars 40000] [--reps 5]

Round 35: a helper found patterns that read the rest of the text again from every start
(a markdown image's URL, a URL's query, an HTML comment, a three-word key): a channel peer's
five 39 KB messages made another member's later turn take 2.3-4.0 s with a 300 ms deadline.
Prints, per hostile text, the slowest rule's median ms, the three-word key check's median
ms on a 30,000-letter key, and the victim's turn (median of ``--reps``) in that chat.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memory_inject.adapters import ChannelAdapter, InboundMessage
from memory_inject.config import parse_agent_config
from memory_inject.stages import threat
from memory_inject.stages._threat_rules import RULES
from memory_inject.storage import SQLiteStore

HOSTILE = [
    "![x](http://a/",
    "http://$TOKEN",
    "<!-- ignore ",
    "<!--",
    "http://a?b=",
    "ignore ",
    "gpt-",
    " ",  # after "SYSTEM"
]


def _ms(fn: object, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    """Run the measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=40_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for fragment in HOSTILE:
        text = ("now SYSTEM" + fragment * (args.chars // len(fragment) + 1))[: args.chars]
        worst = max(
            (_ms(lambda r=r, t=text: threat.threat_rule(t, (r,)), args.reps), r.id) for r in RULES
        )
        print(f"{fragment!r:18} x {args.chars:,} chars: slowest rule {worst[1]} {worst[0]:.1f} ms")
    for letters in ("a", "aB"):
        key = letters * (30_000 // len(letters))
        took = _ms(lambda key=key: threat._KEY_WORDS.search(key), args.reps)
        print(f"three-word key check, 30,000 x {letters!r}: {took:.2f} ms")
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "m.db")
        agent = parse_agent_config({"agent": "bot", "memory": {"deadline_ms": 300}})
        bot = ChannelAdapter(store, agent, channel_name="slack", autosave=True)
        hostile = "deploy notes " + "![x](http://a/" * 2800  # 39 KB, under Slack's limit
        for n in range(5):
            bot.handle(_message("mallory", hostile + str(n), str(n)))
        took = _ms(lambda: bot.handle(_message("alice", "what are the deploy notes?", "q")), 3)
        print(f"victim's channel turn (5 hostile 39 KB rows, deadline 300 ms): {took:.1f} ms")
        store.close()


def _message(sender: str, text: str, mid: str) -> InboundMessage:
    return InboundMessage(
        channel="slack",
        sender=sender,
        text=text,
        reply_target="group:eng",
        message_id=mid,
        history_key="slack_eng",
    )


if __name__ == "__main__":
    main()
