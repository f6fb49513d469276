"""What event context costs a write: ``store()`` and ``import_jsonl`` of sessionless rows.

Since SQLite schema 8 / PostgreSQL schema 5 a sessionless row looks up the two
rows before it in its event (same namespace, category, profile and timestamp)
when it is inserted. Two layouts of LoCoMo dev's texts, without session ids:
``apart`` (every row its own timestamp, one second apart: what ``store()``
without a timestamp gives) and ``events`` (20 rows per timestamp: a dated
conversation). Prints the median ``store()`` time over ``--writes`` rows into a
store that already holds ``--rows`` (imported first, timed), per layout.

Reproduce: ``python benchmarks/event_writes.py [--backend postgres] [--rows 20000]
[--writes 1000]``; run it on the commit before to compare.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _locomo_data import DEFAULT_DATA, _open, backend, load

from memory_inject.storage import Fusion

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _stamp(i: int, layout: str) -> str:
    step = i if layout == "apart" else i // 20 * 60
    return (T0 + timedelta(seconds=step)).isoformat()


def main() -> None:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--writes", type=int, default=1_000)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    records, _ = load(args.data)
    texts = [r["content"] for rows in records.values() for r in rows]
    print(f"{args.backend}: {args.rows} rows imported, then {args.writes} store() calls")
    print("| layout | import s | store() p50 ms | store() p90 ms |")
    print("|---|---:|---:|---:|")
    with backend(args.backend, args.dsn), tempfile.TemporaryDirectory() as d:
        for layout in ("apart", "events"):
            store = _open(Path(d) / f"{layout}.db", None, Fusion())
            lines = "".join(
                json.dumps(
                    {
                        "key": f"k{i}",
                        "content": texts[i % len(texts)],
                        "timestamp": _stamp(i, layout),
                    }
                )
                + "\n"
                for i in range(args.rows)
            )
            t = time.perf_counter()
            store.import_jsonl(io.StringIO(lines))
            imported = time.perf_counter() - t
            took = []
            for j in range(args.writes):
                i = args.rows + j
                t = time.perf_counter()
                store.store(f"k{i}", texts[i % len(texts)], timestamp=_stamp(i, layout))
                took.append((time.perf_counter() - t) * 1000)
            q = statistics.quantiles(took, n=10)
            print(f"| {layout} | {imported:.2f} | {statistics.median(took):.3f} | {q[8]:.3f} |")
            store.close()


if __name__ == "__main__":
    main()
