"""Targets of the core issue, checked against a results dict, and the markdown report."""

from __future__ import annotations

from typing import Any

#: Most peak-RSS growth (KiB) from the smallest to the largest dataset still called "flat".
RSS_FLAT_KB = 16 * 1024
IMPORT_TARGET = 10_000

ENGRAMS = ("engram_sqlite", "engram_postgres")
SEARCHES = ("search_rare", "search_common", "search_two_words")
#: Rows reported but not judged (see ``evaluate``).
INFO_ONLY = frozenset({"search_common"})
#: Backends whose target rows are shown but not judged: the issue's targets are for
#: Engram on SQLite (in-process); PostgreSQL pays a client/server round trip per call.
INFO_BACKENDS = frozenset({"engram_postgres"})


#: The older sources measured beside Engram with ``--before`` (see ``benchmarks/before.py``).
BEFORE = "engram_before"
#: The issue's limits: context against the floor, import rate against the floor's.
CONTEXT_3K_LIMIT = 2.0
CONTEXT_50K_LIMIT = 1.5
IMPORT_FLOOR_LIMIT = 1.5


def _ratio(entry: dict[str, Any], key: str, kind: str = "median") -> float | None:
    value = entry.get("ratios", {}).get(key, {}).get(kind)
    return float(value) if value is not None else None


def _target(
    name: str, backend: str, size: int, value: float | None, op: str, limit: float, unit: str = "x"
) -> dict[str, Any]:
    if value is None:
        status = "N/A"
    elif op == "<=":
        status = "PASS" if value <= limit else "MISS"
    else:
        status = "PASS" if value >= limit else "MISS"
    return {
        "target": name,
        "backend": backend,
        "size": size,
        "value": value,
        "limit": f"{op} {limit:g}{unit}",
        "status": status,
    }


def _ratio_target(
    name: str,
    be: str,
    size: int,
    entry: dict[str, Any],
    key: str,
    op: str,
    limit: float,
) -> dict[str, Any]:
    """A ratio target, with its CPU-time ratio and the older sources' value beside it."""
    row = _target(name, be, size, _ratio(entry, key.format(be=be)), op, limit)
    row["cpu"] = _ratio(entry, key.format(be=be), "cpu")
    if be == "engram_sqlite":
        row["before"] = _ratio(entry, key.format(be=BEFORE))
        row["before_cpu"] = _ratio(entry, key.format(be=BEFORE), "cpu")
    return row


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target per Engram backend, judged at the largest measured size."""
    sizes = sorted(int(s) for s in results.get("sizes", {}))
    rows: list[dict[str, Any]] = []
    if not sizes:
        return rows
    size = sizes[-1]
    sc = results["sizes"][str(size)]["scenarios"]
    for be in ENGRAMS:
        if be not in sc.get("context_3k", {}).get("targets", {}):
            continue
        rows.append(
            _ratio_target(
                f"context 3K <= {CONTEXT_3K_LIMIT:g}x floor",
                be,
                size,
                sc["context_3k"],
                "{be}/floor",
                "<=",
                CONTEXT_3K_LIMIT,
            )
        )
        rows.append(
            _ratio_target(
                f"context 50K <= {CONTEXT_50K_LIMIT:g}x floor",
                be,
                size,
                sc["context_50k"],
                "{be}/floor",
                "<=",
                CONTEXT_50K_LIMIT,
            )
        )
        for key, label in (("context_3k", "3K"), ("context_50k", "50K")):
            rows.append(
                _ratio_target(
                    f"context {label} >= 10x faster than Agents SDK",
                    be,
                    size,
                    sc[key],
                    "agents_sdk/{be}",
                    ">=",
                    10,
                )
            )
        rows.append(
            _ratio_target("append <= 3x floor", be, size, sc["append"], "{be}/floor", "<=", 3)
        )
        for key in SEARCHES:
            if key not in sc:
                continue
            what = key.removeprefix("search_")
            rows.append(
                _ratio_target(
                    f"search ({what}) <= 3x FTS floor",
                    be,
                    size,
                    sc[key],
                    "{be}/floor_fts",
                    "<=",
                    3,
                )
            )
            row = _ratio_target(
                f"search ({what}) >= 100x faster than LIKE",
                be,
                size,
                sc[key],
                "like_scan/{be}",
                ">=",
                100,
            )
            if key in INFO_ONLY:
                # LIKE newest-first with LIMIT 10 stops after the 10 newest matches of a
                # common word, while BM25 must rank every match: shown, not judged.
                row["status"] = "INFO"
            rows.append(row)
        imp = results.get("import", {})
        row = _target(
            f"import within {IMPORT_FLOOR_LIMIT:g}x of the floor's rate",
            be,
            0,
            imp.get(f"ratio_floor/{be}"),
            "<=",
            IMPORT_FLOOR_LIMIT,
        )
        rate = imp.get("targets", {}).get(be, {}).get("msgs_per_s_median")
        row["detail"] = None if rate is None else f"{rate:,.0f} msg/s"
        row["cpu"] = imp.get(f"ratio_floor/{be}_cpu")
        if be == "engram_sqlite":
            row["before"] = imp.get(f"ratio_floor/{BEFORE}")
            row["before_cpu"] = imp.get(f"ratio_floor/{BEFORE}_cpu")
        rows.append(row)
        end_to_end = imp.get(f"ratio_floor/{be}_chatgpt")
        if end_to_end is not None:
            row = _target(
                f"import of a ChatGPT export within {IMPORT_FLOOR_LIMIT:g}x of the floor's rate",
                be,
                0,
                end_to_end,
                "<=",
                IMPORT_FLOOR_LIMIT,
            )
            chatgpt_rate = imp["targets"][f"{be}_chatgpt"]["msgs_per_s_median"]
            row["detail"] = f"{chatgpt_rate:,.0f} msg/s"
            row["cpu"] = imp.get(f"ratio_floor/{be}_chatgpt_cpu")
            row["before"] = imp.get(f"ratio_floor/{BEFORE}_chatgpt")
            row["before_cpu"] = imp.get(f"ratio_floor/{BEFORE}_chatgpt_cpu")
            rows.append(row)
        rows.append(_target("import >= 10,000 msg/s", be, 0, rate, ">=", IMPORT_TARGET, " msg/s"))
        peaks = [results["sizes"][str(s)].get("rss", {}).get(be, {}).get("peak_kb") for s in sizes]
        known = [p for p in peaks if p is not None]
        growth = (known[-1] - known[0]) / 1024 if len(known) >= 2 else None
        rows.append(
            _target(
                "peak RSS flat (growth smallest->largest)",
                be,
                size,
                growth,
                "<=",
                RSS_FLAT_KB / 1024,
                " MiB",
            )
        )
    for row in rows:
        if row["backend"] in INFO_BACKENDS and row["status"] != "N/A":
            row["status"] = "INFO"
    return rows


def _us(summary: dict[str, Any] | None) -> str:
    if not summary or not summary.get("iterations"):
        return "-"
    cpu = f" (CPU {_fmt(summary['cpu_us'])})" if summary.get("cpu_us") is not None else ""
    return f"{_fmt(summary['median_us'])} / {_fmt(summary['p95_us'])}{cpu}"


def _fmt(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.0f} us"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.2f}"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:,.1f} MiB"


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    m = meta["machine"]
    p = meta["params"]
    load = meta.get("load_average", {})
    lines = [
        "# Engram core benchmark",
        "",
        f"Run {meta['date']} in {meta.get('seconds', '?')} s on {m.get('cpu_count')} CPUs"
        f" ({m.get('cpu_model', m.get('processor', '?'))}), Python {m.get('python')},"
        f" SQLite {m.get('sqlite')}, {m.get('platform')}."
        + (
            f" Load average (1, 5, 15 min) {load['start']} at the start,"
            f" {load.get('end', '?')} at the end."
            if load
            else ""
        ),
        f"Sizes {', '.join(f'{s:,}' for s in p['sizes'])}; {p['rounds']} rounds; backends"
        f" {', '.join(p['backends'])}; {p['slot_seconds']} s per (round, target) slot."
        + (" Quick run." if p.get("quick") else ""),
        "",
        "Times are median / p95 of single calls (and the CPU time per call). Ratios are the"
        " median of per-round ratios of round medians (targets run interleaved in every"
        " round); the CPU ratio is the same for CPU time per call (process time, without the"
        " waits for a core of a shared machine). The measured session holds min(total, 100K)"
        " messages; the rest of the database is other sessions and scopes.",
        *(
            [
                "",
                f"Before: {p['before']}, measured in the same rounds in a second process"
                f" on a copy of the dataset (target `{BEFORE}`).",
            ]
            if p.get("before")
            else []
        ),
        "",
        "## Targets",
        "",
        "| target | backend | at | value | CPU ratio | before | before, CPU | limit | status |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results.get("targets", []):
        at = f"{row['size']:,} msgs" if row["size"] else "slice"
        value = _num(row["value"]) + (f" ({row['detail']})" if row.get("detail") else "")
        lines.append(
            f"| {row['target']} | {row['backend']} | {at} | {value} | {_num(row.get('cpu'))}"
            f" | {_num(row.get('before'))} | {_num(row.get('before_cpu'))} | {row['limit']}"
            f" | **{row['status']}** |"
        )
    for size_key, entry in results.get("sizes", {}).items():
        ds = entry["dataset"]
        lines += [
            "",
            f"## {int(size_key):,} messages (session of {ds['main_session_messages']:,})",
            "",
        ]
        columns: list[str] = []
        for sc in entry["scenarios"].values():
            for t in sc["targets"]:
                if t not in columns:
                    columns.append(t)
        lines.append("| scenario | " + " | ".join(columns) + " | ratios |")
        lines.append("| --- " * (len(columns) + 2) + "|")
        for name, sc in entry["scenarios"].items():
            cells = [_us(sc["targets"].get(c)) for c in columns]
            ratios = ", ".join(
                f"{k} {v['median']:.2f}" + (f" (CPU {v['cpu']:.2f})" if v.get("cpu") else "")
                for k, v in sc.get("ratios", {}).items()
                if v.get("median") is not None
            )
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratios} |")
        files = ds.get("file_bytes", {})
        rss = entry.get("rss", {})
        lines += ["", "| | " + " | ".join(files) + " |", "| --- " * (len(files) + 1) + "|"]
        lines.append("| file size | " + " | ".join(_mib(v) for v in files.values()) + " |")
        if rss:
            lines.append(
                "| peak RSS (growth during the work, MiB) | "
                + " | ".join(
                    (
                        f"{_mib(rss[k]['peak_kb'] * 1024)}"
                        f" (+{rss[k].get('work_growth_kb', 0) / 1024:.1f})"
                        if k in rss and "peak_kb" in rss[k]
                        else "-"
                    )
                    for k in files
                )
                + " |"
            )
        builds = ds.get("builds", {})
        if builds:
            lines.append("")
            lines.append(
                "Dataset builds (cached; rate of the run that built them): "
                + "; ".join(
                    f"{k} {v['seconds']} s ({v['msgs_per_s']:,.0f} msg/s)"
                    for k, v in builds.items()
                )
                + "."
            )
        checks = entry.get("checks", {})
        if checks:
            parts = []
            for key, row in checks.items():
                if key.startswith("context"):
                    parts.append(
                        f"{key}: "
                        + ", ".join(
                            f"{t} {v['messages']} msgs/{v['tokens']} tok"
                            + (" (same messages as the floor)" if v.get("same_messages") else "")
                            for t, v in row.items()
                        )
                    )
                else:
                    parts.append(
                        f"{key} '{row['query']}': "
                        + ", ".join(f"{t} {n}" for t, n in row["hits"].items())
                    )
            lines += ["", "Same work: " + "; ".join(parts) + "."]
    imp = results.get("import")
    if imp:
        lines += [
            "",
            f"## Import ({imp['slice_messages']:,} fresh messages into an empty database,"
            f" batches of {imp['batch']:,})",
            "",
            "| target | msg/s median | min | msg per CPU second |",
            "| --- | --- | --- | --- |",
        ]
        for name, v in imp["targets"].items():
            per_cpu = v.get("msgs_per_cpu_s_median")
            lines.append(
                f"| {name} | {v['msgs_per_s_median']:,.0f} | {v['msgs_per_s_min']:,.0f}"
                f" | {'-' if per_cpu is None else f'{per_cpu:,.0f}'} |"
            )
    lines += [
        "",
        "INFO rows are not judged: the LIKE scan returns the 10 newest messages containing a"
        " common word after reading a few hundred rows, while BM25 must score every match."
        " The targets are for Engram on SQLite, so engram_postgres rows are INFO too (shown,"
        " not judged against the SQLite floor): PostgreSQL pays a client/server round trip"
        " per call.",
    ]
    if results.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"
