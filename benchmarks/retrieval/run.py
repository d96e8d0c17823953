"""Retrieval benchmark: does search put the evidence first, on two unlike corpora?

Usage::

    python -m benchmarks.retrieval.run                 # both corpora, latency at 100K (SQLite)
    python -m benchmarks.retrieval.run --backends sqlite,postgres
    python -m benchmarks.retrieval.run --no-latency --sessions 50 --histories 10
    python -m benchmarks.retrieval.run --quick         # quality only, small corpora

Quality (:mod:`benchmarks.retrieval.quality`): the first corpus (two friends
chatting, :mod:`benchmarks.retrieval.corpus`) and the second (a person and an
assistant, :mod:`benchmarks.retrieval.assistant`), each against plain FTS5
BM25 over the same turns in the same run. Latency
(:mod:`benchmarks.retrieval.latency`): the default search at 100K messages.
Results: ``benchmarks/results/retrieval.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.retrieval import assistant, quality, scale
from benchmarks.retrieval.assistant import HISTORIES, SESSIONS
from benchmarks.retrieval.latency import latency
from benchmarks.retrieval.report import markdown

RESULTS = Path(__file__).resolve().parents[1] / "results"


def log(message: str) -> None:
    print(f"[retrieval {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Every part the arguments ask for."""
    embeddings = not args.quick and not args.no_embeddings
    corpora: dict[str, Any] = {}
    if args.corpus in ("both", "chats"):
        corpora["chats"] = quality.first_corpus(
            workdir, 2 if args.quick else 5, embeddings=embeddings,
            backend=args.quality_backend, log=log,
        )  # fmt: skip
    if args.corpus in ("both", "assistant"):
        corpora["assistant"] = quality.second_corpus(
            workdir,
            histories=3 if args.quick else args.histories,
            sessions=20 if args.quick else args.sessions,
            embeddings=embeddings,
            backend=args.quality_backend,
            log=log,
        )
    report: dict[str, Any] = {"corpora": corpora}
    if args.quality_backend == "postgres" and (args.quick or args.no_latency):
        from benchmarks.engram_bench import stop_postgres

        stop_postgres()
    if not args.quick and not args.no_latency:
        histories = assistant.build(histories=2)
        sessions: dict[tuple[str, str], list[Any]] = {}
        for conv in histories:
            for t in conv.turns:
                sessions.setdefault((conv.scope, t.session), []).append((t.speaker, t.text, t.at))
        report["indexing"] = scale.indexing(list(sessions.values()))
        log(f"indexing: {report['indexing']}")
        report["latency"] = {}
        for backend in args.backends.split(","):
            report["latency"][backend] = {
                corpus: latency(backend, workdir, corpus, hybrid=embeddings, log=log)
                for corpus in args.latency_corpora.split(",")
            }
        if "postgres" in args.backends:
            from benchmarks.engram_bench import stop_postgres

            stop_postgres()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="quality only, small corpora")
    parser.add_argument("--backends", default="sqlite", help="latency on: sqlite,postgres")
    parser.add_argument("--out", default=str(RESULTS), help="directory of the results")
    parser.add_argument("--no-embeddings", action="store_true", help="keyword runs only")
    parser.add_argument("--no-latency", action="store_true", help="quality only")
    parser.add_argument(
        "--corpus", choices=("both", "chats", "assistant", "none"), default="both",
        help="quality on (none: speed only)",
    )  # fmt: skip
    parser.add_argument("--before", help="JSON of an earlier run to compare the default with")
    parser.add_argument("--name", help="file name of the results (default: retrieval)")
    parser.add_argument(
        "--latency-corpora", default="chats,assistant", help="turns of the 100K stores"
    )
    parser.add_argument(
        "--quality-backend",
        choices=("sqlite", "postgres", "memory", "jsondir"),
        default="sqlite",
        help="store the corpora in (the floor is always plain SQLite FTS5)",
    )
    parser.add_argument("--histories", type=int, default=HISTORIES, help="second corpus")
    parser.add_argument(
        "--sessions", type=int, default=SESSIONS, help="sessions per history (second corpus)"
    )
    args = parser.parse_args(argv)
    began = _load()
    with tempfile.TemporaryDirectory() as tmp:
        measured = measure(args, Path(tmp))
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "command": "python -m benchmarks.retrieval.run " + " ".join(argv or sys.argv[1:]),
        "load": {"start": began, "end": _load()},
        **measured,
    }
    before = json.loads(Path(args.before).read_text()) if args.before else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = args.name or ("retrieval-quick" if args.quick else "retrieval")
    (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(report, before))
    print(markdown(report, before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
