"""Run in a subprocess by test_jsondir_housekeeping: a turn and an end on a disk that fills up.

Usage: python full_disk_worker.py URL. The file-size limit (RLIMIT_FSIZE) is
set just above the store's largest file once the session is filled, so the
next write that grows a file fails as on a full disk (EFBIG instead of
ENOSPC: the same OSError path). Prints one JSON line with what happened.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path


def _largest_file(root: Path) -> int:
    return max((p.stat().st_size for p in root.rglob("*") if p.is_file()), default=0)


def main(url: str, root: str) -> None:
    import engram

    mem = engram.open(url, llm=None)
    chat = mem.session("s", scope="p", policy="summary_buffer")
    for i in range(14):
        role = "user" if i % 2 == 0 else "assistant"
        chat.add(role, f"turn {i}: we planned the Phoenix launch " + "detail " * 250)
    # Nothing compacted yet: the state written by the next context() is new.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = _largest_file(Path(root)) + 64  # any write that grows a file fails
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    out: dict[str, object] = {}
    try:
        ctx = chat.context(budget=4000)
        out["context"] = "ok"
        out["tokens"] = ctx.tokens
        out["degraded"] = ctx.degraded
        out["last"] = ctx.messages[-1]["content"][:7]
    except Exception as exc:
        out["context"] = f"{type(exc).__name__}: {exc}"
    try:
        future = chat.end("done")
        out["end"] = "returned"
        out["end_outcome"] = future.result(timeout=20).status
    except Exception as exc:
        out["end"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # the store may not close cleanly on a full disk: not what is tested


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
