"""A process out of file descriptors is told as that, not as a missing database
(twenty-eighth round).

Found by a helper serving many tenants' SQLite stores (about 5 descriptors each): at the
limit, ``SQLiteStore(existing_file)`` raised a bare ``OSError`` and a render said
``missing: ... cannot open: unable to open database file``, for a file that was there.
SQLite says "cannot open" for both; the store now asks whether a file can be opened at
all. Run in a child process: the limit is the whole process's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, resource, sys
from memory_inject import SQLiteStore, render_memory_context
from memory_inject.exceptions import StorageError, StoreMissingError

a, b = sys.argv[1], sys.argv[2]
for p in (a, b):
    with SQLiteStore(p) as s:
        s.store("deploy_target", "Production deploys go to prod-3.", "core")
fresh = SQLiteStore(a)
out = {}
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")), hard))
try:
    SQLiteStore(b)
    out["open"] = "opened"
except StoreMissingError as exc:
    out["open"] = "missing: " + str(exc)
except StorageError as exc:
    out["open"] = "storage: " + str(exc)
except OSError as exc:
    out["open"] = "bare OSError: " + str(exc)
r = render_memory_context(fresh, "where do production deploys go?")
out["render"] = [r.event.success, r.event.error]
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
r = render_memory_context(fresh, "where do production deploys go?")
out["after"] = [r.event.success, [e.key for e in r.entries]]
print(json.dumps(out))
"""


def test_the_limit_is_named_at_open_and_on_the_event(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "a.db"), str(tmp_path / "b.db")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["open"].startswith("storage: ")
    assert "no file descriptor left" in out["open"]
    success, error = out["render"]
    assert success is False
    assert "no file descriptor left" in error
    assert "missing" not in error
    assert [True, ["deploy_target"]] == out["after"]
