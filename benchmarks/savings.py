"""The token savings curve of every preset, and the cost of planning.

Usage::

    python -m benchmarks.savings                 # 2,000 turns, every preset
    python -m benchmarks.savings --quick         # 300 turns
    python -m benchmarks.savings --turns 500 --presets summary_buffer,exchanges
    python -m benchmarks.savings --no-fake-llm   # skip summary_buffer with a (fake) model

One synthetic conversation (seeded, so every run and every preset sees the
same text) is replayed through each preset, each in a fresh SQLite database.
A turn is::

    user question  ->  [assistant tool call + tool result]  ->  context()  ->  answer

so one prompt is built per turn, right before the final answer (after the
turn's tool call, when it has one). The ``exchanges`` preset is driven through
the exchange API (``begin`` / ``add_agent_message`` / ``finalize``, tool
results cached for 3 exchanges), the others through ``Session.add``.

Compaction runs with the offline summarizer (no model here). Each preset keeps
its own timing mode: ``summary_buffer`` compacts synchronously inside
``context()`` (as its preset says); the others schedule it in the background, and the
benchmark calls ``Engram.wait_idle()`` right after ``context()`` and after
the answer, so a scheduled compaction commits before the next message is
stored. That keeps every run deterministic while measuring the real default
path (a turn that schedules a compaction sends the previous summary and the
window, as a live app would).

Measured per turn: tokens sent (``Context.tokens``, system prompt and every
section included) against the naive prompt that sends the whole history
(system prompt + every stored message + reply priming, exact o200k counts);
whether a compaction committed, was pending or degraded; the wall time of
``context()``; and the pure planner (``plan_compaction`` over the rows after
the watermark, as ``context()`` calls it), timed outside ``context()`` on the
same inputs. Budgets are each preset's ``default_budget`` with reserve 0.

``summary_buffer`` also runs with a model writing the summaries: a local
:class:`~engram.testing.FakeLLMServer` that answers deterministically (its
"extraction" picks out the generator's fact sentences and URLs), so that row
measures Engram's LLM path and loopback HTTP, not a model's latency.

Results: ``benchmarks/results/savings.json`` (curves as columns),
``savings.md`` (tables) and ``savings.png`` (log-scale curves).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import engram
from benchmarks.prompt_cache import PrefixMeter
from benchmarks.prompt_cache import plot as plot_cache
from benchmarks.timing import percentile
from engram.compaction.cycle import plan_state, unfolded
from engram.compaction.planner import plan_compaction, rows_from_messages
from engram.llm.client import LLMClient
from engram.policy import PRESETS, Policy, get_policy
from engram.prompt import PREREAD_ROWS
from engram.sections.summary import section_tokens
from engram.testing import FakeLLMServer, RecordedRequest
from engram.tokens import REPLY_PRIMING, count_message, storage_counter

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
#: Version of the conversation generator: bump when the text changes.
GENERATOR_VERSION = 1
DEFAULT_TURNS = 2_000
QUICK_TURNS = 300
SEED = 3_2024
PRESET_ORDER = ("default", "lean", "full_recall", "summary_buffer", "agent_state", "exchanges")
#: Calls of the pure planner per turn; the turn's figure is their median.
PLAN_REPEATS = 5
#: Tool results stay cached this many exchanges (``exchanges`` preset).
CACHE_EXCHANGES = 3
BASE_TIME = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
#: Results key of the optional run of ``summary_buffer`` with a (fake) model summarizing.
FAKE_LLM_LABEL = "summary_buffer+fake_llm"
SCOPE = "savings"
SESSION = "conversation"

SYSTEM_PROMPT = (
    "You are Atlas, the engineering assistant of the Phoenix team. Answer precisely, "
    "cite the documents you rely on, and say when you are unsure. Keep answers short "
    "unless the user asks for detail. You can call search_docs(query) to read the "
    "team's documentation and run_query(sql) to read the analytics database."
)

# ----------------------------------------------------------------- the conversation

_WORDS = (
    "the service deploy build cache index query latency memory queue worker retry timeout "
    "release branch review test coverage schema migration table column user account billing "
    "invoice report dashboard metric alert incident rollback config secret token session "
    "request response endpoint client server cluster node region backup restore snapshot "
    "error warning log trace span budget estimate sprint ticket owner team customer feature "
    "flag experiment result baseline regression throughput capacity storage disk network "
    "packet load balancer proxy gateway route handler job scheduler cron pipeline stage "
    "artifact image container volume replica primary shard partition key value document "
    "field record batch stream event topic consumer producer offset lag checkpoint "
    "and or but so because when while after before during then also still only just "
    "is are was were be been has have had will would should could can may might must "
    "we you they it this that these those our your their its some many few more most "
    "new old large small fast slow stable flaky safe risky simple clear careful quick "
    "check update move split merge fix add remove keep send read write open close run "
    "start stop wait watch measure compare plan ship ask answer explain describe"
).split()
_PROJECTS = ("Phoenix", "Atlas", "Orion", "Nimbus", "Helios", "Vega")
_PEOPLE = ("Maria Lopez", "Kenji Sato", "Amara Okafor", "Lukas Weber", "Priya Nair")
_TECH = ("PostgreSQL", "Redis", "FastAPI", "Kafka", "SQLite", "Terraform", "Grafana")
_PREFS = (
    "concise answers",
    "bullet points",
    "dark mode",
    "answers in English",
    "a formal tone",
    "tables for comparisons",
)
_TOOLS = ("search_docs", "run_query")


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One assistant tool call and its result."""

    call_id: str
    name: str
    parameters: dict[str, Any]
    result: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One user question, an optional tool step, and the final answer."""

    index: int
    question: str
    tool: ToolStep | None
    answer: str
    asked_at: datetime
    answered_at: datetime


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(low, high))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def _text(rng: random.Random, words: int) -> str:
    out: list[str] = []
    count = 0
    while count < words:
        sentence = _sentence(rng, 6, 18)
        out.append(sentence)
        count += sentence.count(" ") + 1
    return " ".join(out)


def _fact(rng: random.Random, turn: int) -> str:
    """A sentence the important-data extractor has rules for."""
    kind = rng.randrange(6)
    project, person, tech = rng.choice(_PROJECTS), rng.choice(_PEOPLE), rng.choice(_TECH)
    if kind == 0:
        return f"I prefer {rng.choice(_PREFS)}."
    if kind == 1:
        return f"We decided to use {tech} for the {project} {rng.choice(_WORDS)} service."
    if kind == 2:
        return f"Remember that {person} owns the {project} release on port {5000 + turn % 997}."
    if kind == 3:
        return f"See https://docs.example.com/{project.lower()}/{rng.choice(_WORDS)}-{turn}."
    if kind == 4:
        return f"The key finding is that {tech} {rng.choice(_WORDS)} latency dropped {turn % 90}%."
    return f"The sections are Overview, {project} Setup, Operations and Appendix."


def conversation(turns: int, *, seed: int = SEED) -> list[Turn]:
    """The synthetic conversation: same ``turns`` and ``seed``, same text, byte for byte.

    Questions are 8-60 words; answers short (20-60 words, 45%), medium
    (60-130, 35%) or long (130-420 words, 20%: over the 750 B that ``exchanges`` shows as a view);
    12% of turns call a tool (a 40-160 word result); about one message in six
    states a preference, decision, fact, URL or document structure. Time
    advances 30 s to 20 min per turn, with a new day every ~60 turns.
    """
    rng = random.Random(seed)
    out: list[Turn] = []
    now = BASE_TIME
    for index in range(turns):
        question = _text(rng, rng.randint(8, 60))
        if rng.random() < 0.18:
            question = f"{question} {_fact(rng, index)}"
        roll = rng.random()
        if roll < 0.45:
            size = rng.randint(20, 60)
        elif roll < 0.80:
            size = rng.randint(60, 130)
        else:
            size = rng.randint(130, 420)
        answer = _text(rng, size)
        if rng.random() < 0.15:
            answer = f"{_fact(rng, index)} {answer}"
        tool = None
        if rng.random() < 0.12:
            name = rng.choice(_TOOLS)
            params: dict[str, Any] = (
                {"query": f"{rng.choice(_PROJECTS)} {rng.choice(_WORDS)}"}
                if name == "search_docs"
                else {"sql": f"select count(*) from {rng.choice(_WORDS)}s"}
            )
            tool = ToolStep(f"call_{index}", name, params, _text(rng, rng.randint(40, 160)))
        asked = now
        answered = asked + timedelta(seconds=rng.randint(2, 40))
        out.append(Turn(index, question, tool, answer, asked, answered))
        step = rng.randint(30, 1200)
        if rng.random() < 1 / 60:
            step += 86_400
        now = answered + timedelta(seconds=step)
    return out


# ----------------------------------------------------------------- statistics


def _dist(values: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """Median, p95, max and count of timings (same unit as given)."""
    if not values:
        return {"n": 0, "median": None, "p95": None, "max": None}
    return {
        "n": len(values),
        "median": round(statistics.median(values), digits),
        "p95": round(percentile(sorted(values), 0.95), digits),
        "max": round(max(values), digits),
    }


# ----------------------------------------------------------------- one preset


@dataclass
class _Curve:
    """Per-turn columns of one preset."""

    sent: list[int]
    history: list[int]
    prompt_messages: list[int]
    compacted: list[int]
    pending: list[int]
    degraded: list[int]
    summary_version: list[int]
    context_ms: list[float]
    plan_us: list[float | None]
    planning_us: list[float | None]  # rows_from_messages + plan_state + plan_compaction
    folds: list[int]  # 1 when context() found a compaction due (it ran or scheduled one)
    fixed: list[int]  # system prompt + sections (memories, important data, summary, cache...)
    cacheable: list[int]  # tokens identical to the start of the previous turn's prompt

    @classmethod
    def empty(cls) -> _Curve:
        return cls([], [], [], [], [], [], [], [], [], [], [], [], [])


def _compactions_run(mem: engram.Engram) -> int:
    """Compactions ``mem`` has run so far, whatever their outcome (its own metrics)."""
    return sum(count for count, _ in mem.compaction_metrics.snapshot().values())


def _leading_sections(messages: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Tokens of the prompt's leading system messages, by section title ("system": the prompt)."""
    out: dict[str, int] = {}
    for message in messages:
        if message.get("role") != "system":
            break
        text = str(message.get("content") or "")
        title = text[1 : text.index("]")] if text.startswith("[") and "]" in text else "system"
        # section_tokens is cached by text: the engine counted these same strings to plan.
        out[title] = out.get(title, 0) + section_tokens(text)
    return out


def _naive_system_tokens() -> int:
    return int(count_message(storage_counter(), "system", SYSTEM_PROMPT))


def run_preset(
    name: str,
    turns: Sequence[Turn],
    workdir: Path,
    *,
    llm: LLMClient | None = None,
    label: str | None = None,
    plan_repeats: int = PLAN_REPEATS,
    progress: Callable[[str], None] | None = None,
    cache_window: bool = True,
) -> dict[str, Any]:
    """Replay ``turns`` through preset ``name`` in a fresh SQLite database under ``workdir``.

    ``llm`` (default: none) is the model that writes summaries; ``label`` names
    the run in the results (default: the preset name).
    """
    policy: Policy = get_policy(name)
    if not cache_window:  # the baseline: the window drops its oldest message every turn
        policy = policy.replace(cache_window=False)
    label = label or name
    budget, reserve = policy.default_budget, policy.default_reserve
    db = workdir / f"{label}.db"
    mem = engram.open(f"sqlite:///{db}", llm=llm)
    curve = _Curve.empty()
    system_tokens = _naive_system_tokens()
    extra = section_tokens(SYSTEM_PROMPT)
    triggers = policy.compacts
    use_exchanges = policy.max_exchanges is not None
    history = system_tokens + REPLY_PRIMING
    violations = 0
    phase = {"store": 0.0, "context": 0.0, "wait": 0.0, "planner_probe": 0.0}
    composition: dict[str, int] = {}
    meter = PrefixMeter()
    started = time.perf_counter()
    try:
        session = mem.session(SESSION, scope=SCOPE, policy=policy)
        ex = session.exchanges
        compactions_seen = 0
        for turn in turns:
            t0 = time.perf_counter()
            if use_exchanges:
                stored = [ex.begin(turn.question, created_at=turn.asked_at)]
            else:
                stored = [session.add("user", turn.question, created_at=turn.asked_at)]
            if turn.tool is not None:
                call = {
                    "id": turn.tool.call_id,
                    "type": "function",
                    "function": {
                        "name": turn.tool.name,
                        "arguments": json.dumps(turn.tool.parameters, sort_keys=True),
                    },
                }
                if use_exchanges:
                    stored.append(ex.add_agent_message("assistant", None, tool_calls=[call]))
                    stored.append(
                        ex.add_agent_message("tool", turn.tool.result, tool_call_id=call["id"])
                    )
                    ex.cache_tool(
                        turn.tool.name,
                        turn.tool.parameters,
                        turn.tool.result,
                        CACHE_EXCHANGES,
                        call_id=call["id"],
                    )
                else:
                    stored.extend(
                        session.add_many(
                            [
                                {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [call],
                                    "created_at": turn.asked_at,
                                },
                                {
                                    "role": "tool",
                                    "content": turn.tool.result,
                                    "tool_call_id": call["id"],
                                    "created_at": turn.asked_at,
                                },
                            ]
                        )
                    )
            history += sum(m.tokens for m in stored)
            t1 = time.perf_counter()
            phase["store"] += t1 - t0

            # The pure planner timed on exactly what context() is about to plan over.
            plan_us: float | None = None
            planning_us: float | None = None
            if triggers:
                state = session.compaction_state()
                rows, _ = unfolded(
                    mem.store, SCOPE, SESSION, state.watermark, max_rows=PREREAD_ROWS
                )
                planning_rows = rows_from_messages(rows)
                pstate = plan_state(state, extra_tokens=extra)
                samples = []
                for _ in range(plan_repeats):
                    p0 = time.perf_counter_ns()
                    plan_compaction(policy, planning_rows, pstate)
                    samples.append((time.perf_counter_ns() - p0) / 1000)
                plan_us = statistics.median(samples)
                # What context() pays to plan: Row conversion and plan state as well.
                samples = []
                for _ in range(plan_repeats):
                    p0 = time.perf_counter_ns()
                    plan_compaction(
                        policy, rows_from_messages(rows), plan_state(state, extra_tokens=extra)
                    )
                    samples.append((time.perf_counter_ns() - p0) / 1000)
                planning_us = statistics.median(samples)
            t2 = time.perf_counter()
            phase["planner_probe"] += t2 - t1

            # Whether a compaction was due is context()'s own decision: it ran or scheduled one.
            ran = _compactions_run(mem)
            c0 = time.perf_counter()
            ctx = session.context(system=SYSTEM_PROMPT)
            context_s = time.perf_counter() - c0
            phase["context"] += context_s
            w0 = time.perf_counter()
            mem.wait_idle()
            phase["wait"] += time.perf_counter() - w0
            due = _compactions_run(mem) > ran

            if ctx.tokens > budget - reserve:
                violations += 1
            curve.sent.append(ctx.tokens)
            curve.cacheable.append(meter.add(ctx.messages, ctx.tokens))
            curve.history.append(history)
            curve.prompt_messages.append(len(ctx.messages))
            curve.pending.append(int(ctx.pending_compaction))
            curve.degraded.append(int(ctx.degraded is not None))
            curve.context_ms.append(round(context_s * 1000, 4))
            curve.plan_us.append(round(plan_us, 2) if plan_us is not None else None)
            curve.planning_us.append(round(planning_us, 2) if planning_us is not None else None)
            curve.folds.append(int(due))
            composition = _leading_sections(ctx.messages)
            curve.fixed.append(sum(composition.values()))

            a0 = time.perf_counter()
            if use_exchanges:
                answer = ex.finalize(turn.answer)
            else:
                answer = session.add("assistant", turn.answer, created_at=turn.answered_at)
            history += answer.tokens
            phase["store"] += time.perf_counter() - a0
            w1 = time.perf_counter()
            mem.wait_idle()
            phase["wait"] += time.perf_counter() - w1

            final = session.compaction_state() if triggers else None
            compactions = final.compactions if final is not None else 0
            curve.compacted.append(compactions - compactions_seen)
            compactions_seen = compactions
            curve.summary_version.append(final.summary_version if final is not None else 0)
            if progress is not None and (turn.index + 1) % 500 == 0:
                progress(f"  {label}: {turn.index + 1}/{len(turns)} turns")
        state = session.compaction_state()
        stats = session.stats()
    finally:
        mem.close()
    elapsed = time.perf_counter() - started

    total_sent = sum(curve.sent)
    total_naive = sum(curve.history)
    quiet = [i for i, fold in enumerate(curve.folds) if not fold]
    quiet_context = [curve.context_ms[i] for i in quiet]
    quiet_plan = [p for i in quiet if (p := curve.plan_us[i]) is not None]
    all_plan = [p for p in curve.plan_us if p is not None]
    quiet_planning = [p for i in quiet if (p := curve.planning_us[i]) is not None]
    over_budget = [i for i, h in enumerate(curve.history) if h > budget - reserve]
    # Between compactions: no compaction committed around this turn or the one before it.
    between = [
        i
        for i in range(1, len(curve.sent))
        if not curve.compacted[i - 1]
        and not curve.compacted[i]
        and curve.summary_version[i - 1] == curve.summary_version[i]
    ]
    return {
        "preset": name,
        "label": label,
        "policy": policy.to_dict(),
        "budget": budget,
        "reserve": reserve,
        "summarizer": state.summarizer if triggers else None,
        "turns": len(turns),
        "stored_messages": stats["total_messages"],
        "stored_tokens": stats["stored_tokens"],
        "totals": {
            "tokens_sent": total_sent,
            "naive_tokens": total_naive,
            "savings_pct": round(100 * (1 - total_sent / total_naive), 2) if total_naive else 0,
            "mean_sent_per_turn": round(total_sent / len(turns), 1) if turns else 0,
            "max_sent": max(curve.sent, default=0),
            "final_sent": curve.sent[-1] if curve.sent else 0,
            "final_history": curve.history[-1] if curve.history else 0,
            "first_turn_over_budget": over_budget[0] if over_budget else None,
            "final_sections": composition,
            "final_window_tokens": curve.sent[-1] - curve.fixed[-1] if curve.sent else 0,
        },
        "compaction": {
            "compactions": state.compactions,
            "summary_version": state.summary_version,
            "messages_summarized": state.messages_summarized_count,
            "summary_bytes": len(state.summary.encode("utf-8")),
            "compressions": state.compressions,
            "llm_failures": state.llm_failures,
            "turns_due": sum(curve.folds),
            "turns_with_compaction": sum(1 for c in curve.compacted if c),
            "turns_pending": sum(curve.pending),
            "turns_degraded": sum(curve.degraded),
        },
        "invariant_1_violations": violations,
        "prompt_cache": {
            "all_turns": meter.summary(),
            "between_compactions": meter.summary(between),
        },
        "timing": {
            "context_ms_all": _dist(curve.context_ms),
            "context_ms_no_fold": _dist(quiet_context),
            "planner_us_all": _dist(all_plan, 2),
            "planner_us_no_fold": _dist(quiet_plan, 2),
            "planning_with_rows_us_no_fold": _dist(quiet_planning, 2),
            "seconds_total": round(elapsed, 2),
            "ms_per_turn": round(1000 * elapsed / len(turns), 3) if turns else 0,
            "seconds_by_phase": {k: round(v, 2) for k, v in phase.items()},
        },
        "curve": {
            "sent": curve.sent,
            "history": curve.history,
            "sections": curve.fixed,
            "cacheable": curve.cacheable,
            "prompt_messages": curve.prompt_messages,
            "compacted": curve.compacted,
            "pending": curve.pending,
            "due": curve.folds,
            "degraded": curve.degraded,
            "summary_version": curve.summary_version,
            "context_ms": curve.context_ms,
            "planner_us": curve.plan_us,
            "planning_with_rows_us": curve.planning_us,
        },
    }


# ----------------------------------------------------------------- the whole run


def run(
    turns: int = DEFAULT_TURNS,
    presets: Sequence[str] = PRESET_ORDER,
    *,
    seed: int = SEED,
    workdir: Path | None = None,
    plan_repeats: int = PLAN_REPEATS,
    fake_llm: bool = False,
    progress: Callable[[str], None] | None = None,
    cache_window: bool = True,
) -> dict[str, Any]:
    """Replay the conversation through each preset; return the JSON-ready results.

    With ``fake_llm``, ``summary_buffer`` runs once more with a model writing
    the summaries and important data: a :class:`~engram.testing.FakeLLMServer`
    on 127.0.0.1 answering deterministically (results key :data:`FAKE_LLM_LABEL`).
    """
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        raise SystemExit(f"unknown preset(s) {unknown}; presets: {', '.join(PRESETS)}")
    convo = conversation(turns, seed=seed)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="engram-savings-", dir=workdir) as tmp:
        for name in presets:
            if progress is not None:
                progress(f"{name}: {turns} turns")
            results[name] = run_preset(
                name,
                convo,
                Path(tmp),
                plan_repeats=plan_repeats,
                progress=progress,
                cache_window=cache_window,
            )
            _report(results[name], progress)
        if fake_llm:
            if progress is not None:
                progress(f"{FAKE_LLM_LABEL}: {turns} turns")
            results[FAKE_LLM_LABEL] = run_with_fake_llm(
                convo, Path(tmp), plan_repeats=plan_repeats, progress=progress
            )
            _report(results[FAKE_LLM_LABEL], progress)
    return {
        "benchmark": "savings",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "method": {
            "turns": turns,
            "seed": seed,
            "generator_version": GENERATOR_VERSION,
            "system_prompt_tokens": _naive_system_tokens(),
            "turn": "user question -> [tool call + result, 12% of turns] -> context() -> answer",
            "budget": "each preset's default_budget, reserve 0",
            "naive": "system prompt + every stored message + reply priming (o200k_base, exact)",
            "compaction": (
                "offline summarizer; summary_buffer compacts synchronously in context() "
                "(its preset), the others in the background, with Engram.wait_idle() after "
                "context() and after the answer so every run is deterministic"
            ),
            "planner": (
                f"plan_compaction over the rows after the watermark, as context() calls it, "
                f"timed outside context(): median of {plan_repeats} calls per turn"
            ),
            "no_fold": "turns whose context() ran or scheduled no compaction",
            "exchanges": "driven through Session.exchanges; tool results cached 3 exchanges",
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "presets": results,
    }


def _report(r: dict[str, Any], progress: Callable[[str], None] | None) -> None:
    if progress is not None:
        progress(
            f"  {r['label']}: savings {r['totals']['savings_pct']}%, "
            f"{r['compaction']['compactions']} compactions, {r['timing']['seconds_total']} s"
        )


_TARGET = re.compile(r"Word count target: (\d+)-(\d+) words")
_PREVIOUS = "Previous summary (if exists):"
_NEW = "New messages to incorporate:"
_TAIL = "Create an updated summary"
#: What the stand-in model "extracts": the generator's fact sentences and its URLs.
_FACTS = re.compile(r"(?:Remember that|We decided|I prefer|The key finding is)[^.]*\.")
_URLS = re.compile(r"https://[^\s]+[^\s.]")


def fake_llm_answer(request: RecordedRequest) -> str:
    """A deterministic stand-in model: summaries of the asked length, small JSON facts.

    Summary requests (the summary prompt) get the low end of the word target,
    half from the previous summary and half from the new messages; extraction
    requests (JSON mode) get the generator's fact sentences and URLs found in
    the transcript (at most three of each), as a model would pick them out.
    """
    body = request.body or {}
    text = "\n".join(str(m.get("content") or "") for m in request.messages)
    if body.get("response_format"):
        transcript = str(request.messages[-1].get("content") or "") if request.messages else ""
        return json.dumps(
            {
                "important_facts": _FACTS.findall(transcript)[:3],
                "source_urls": _URLS.findall(transcript)[:3],
            }
        )
    match = _TARGET.search(text)
    low = int(match.group(1)) if match else 100
    previous, _, new = text.partition(_NEW)
    previous = previous.partition(_PREVIOUS)[2]
    new = new.partition(_TAIL)[0]
    old_words = [] if previous.strip() == "None" else previous.split()
    new_words = new.split()
    keep_old = min(len(old_words), low // 2)
    words = old_words[:keep_old] + new_words[: low - keep_old]
    return " ".join(words) or "Nothing to summarize."


def run_with_fake_llm(
    turns: Sequence[Turn],
    workdir: Path,
    *,
    plan_repeats: int = PLAN_REPEATS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``summary_buffer`` with summaries written by a model over HTTP (a local fake)."""
    with FakeLLMServer(default=fake_llm_answer) as server:
        client = LLMClient("fake-model", base_url=server.base_url, api_key="bench", timeout=30)
        try:
            result = run_preset(
                "summary_buffer",
                turns,
                workdir,
                llm=client,
                label=FAKE_LLM_LABEL,
                plan_repeats=plan_repeats,
                progress=progress,
            )
        finally:
            client.close()
        purposes: dict[str, int] = {}
        for request in server.requests:
            kind = "important_data" if (request.body or {}).get("response_format") else "summary"
            purposes[kind] = purposes.get(kind, 0) + 1
    result["llm"] = {"requests": len(server.requests), "by_purpose": purposes}
    return result


def write_json(results: dict[str, Any], path: Path) -> None:
    """Write the results (curves as compact columns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, separators=(",", ":"), sort_keys=False) + "\n")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cache_table(results: dict[str, Any]) -> list[str]:
    """The prompt-cache table: the share of each prompt a provider's cache could reuse."""
    lines = [
        "",
        "## Prompt cache",
        "",
        "Cacheable: the tokens of each prompt that are a byte-identical prefix of the previous "
        "turn's prompt. OpenAI cached: what OpenAI would bill as cached (from 1,024 identical "
        "leading tokens, in 128-token steps). Cost per 1,000 turns at gpt-4o-mini input prices "
        "($0.15 per million, cached $0.075). 'Between compactions': turns with no compaction "
        "committed around them.",
        "",
        "| preset | cacheable, all turns | cacheable, between compactions | OpenAI cached "
        "| $ / 1,000 turns, no cache | $ / 1,000 turns, with cache |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["presets"].items():
        cache = r.get("prompt_cache")
        if cache is None:
            continue
        every, between = cache["all_turns"], cache["between_compactions"]
        lines.append(
            f"| {name} | {every['cacheable_pct']:.1f}% | {between['cacheable_pct']:.1f}% "
            f"({between['turns']} turns) | {every['openai_cached_pct']:.1f}% | "
            f"{every['usd_per_1000_turns_no_cache']:.4f} | "
            f"{every['usd_per_1000_turns_with_cache']:.4f} |"
        )
    return [*lines, "", "![prompt cache](prompt_cache.png)"]


def markdown(results: dict[str, Any]) -> str:
    """The tables of ``savings.md``."""
    method = results["method"]
    lines = [
        "# Savings curve",
        "",
        f"{method['turns']} turns, seed {method['seed']}, generated "
        f"{results['created_at']} on {results['machine']['platform']} "
        f"({results['machine']['cpus']} CPUs, Python {results['machine']['python']}).",
        "Command: `python -m benchmarks.savings"
        + ("" if method["turns"] == DEFAULT_TURNS else f" --turns {method['turns']}")
        + "`.",
        "",
        f"- Turn: {method['turn']}.",
        f"- Budget: {method['budget']}; system prompt {method['system_prompt_tokens']} tokens.",
        f"- Naive prompt: {method['naive']}.",
        f"- Compaction: {method['compaction']}.",
        f"- Planner: {method['planner']}; 'no fold' = {method['no_fold']}.",
        "",
        "## Tokens",
        "",
        "| preset | budget | tokens sent | naive (whole history) | savings | mean/turn | max/turn "
        "| final history | compactions | summary v | inv. 1 violations |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["presets"].items():
        t, c = r["totals"], r["compaction"]
        lines.append(
            f"| {name} | {r['budget']:,} | {t['tokens_sent']:,} | {t['naive_tokens']:,} | "
            f"{t['savings_pct']:.1f}% | {t['mean_sent_per_turn']:,.0f} | {t['max_sent']:,} | "
            f"{t['final_history']:,} | {c['compactions']} | {c['summary_version']} | "
            f"{r['invariant_1_violations']} |"
        )
    lines += _cache_table(results)
    lines += [
        "",
        "## Time",
        "",
        "Planner in microseconds, `context()` in milliseconds; target: planning under "
        "1 ms median when nothing is folded.",
        "",
        "| preset | planner no-fold median / p95 (us) | planner all turns median / p95 | "
        "planner + Row conversion no-fold median / p95 (us) | "
        "context() no-fold median / p95 (ms) | context() all median / p95 | no-fold turns "
        "| ms per turn | total s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["presets"].items():
        tm = r["timing"]
        pq, pa = tm["planner_us_no_fold"], tm["planner_us_all"]
        pr = tm["planning_with_rows_us_no_fold"]
        cq, ca = tm["context_ms_no_fold"], tm["context_ms_all"]
        lines.append(
            f"| {name} | {_us(pq['median'])} / {_us(pq['p95'])} | "
            f"{_us(pa['median'])} / {_us(pa['p95'])} | {_us(pr['median'])} / {_us(pr['p95'])} | "
            f"{_ms(cq['median'])} / {_ms(cq['p95'])} | "
            f"{_ms(ca['median'])} / {_ms(ca['p95'])} | {cq['n']} | {tm['ms_per_turn']:.2f} | "
            f"{tm['seconds_total']:.1f} |"
        )
    lines += [
        "",
        "Presets without triggers (`default`, `lean`) never plan: `context()` reads no "
        "compaction state for them. 'Planner + Row conversion' adds what `context()` also "
        "pays to plan: `rows_from_messages` and `plan_state` over the same rows.",
        "",
        "## Where the time goes (seconds)",
        "",
        "| preset | store (add / exchanges) | planner probe (benchmark only) | context() "
        "| wait_idle (background compaction) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["presets"].items():
        ph = r["timing"]["seconds_by_phase"]
        lines.append(
            f"| {name} | {ph['store']:.2f} | {ph['planner_probe']:.2f} | {ph['context']:.2f} | "
            f"{ph['wait']:.2f} |"
        )
    lines += [
        "",
        "## The prompt at the last turn",
        "",
        "Tokens of each part of the last prompt: the system prompt, the sections (long-term "
        "memories, important data, summary, cached tool results, agent state) and the window "
        "of recent messages; 'turns compacting' counts turns on which a compaction committed.",
        "",
        "| preset | sections (tokens) | window | total | turns compacting | summarizer |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for name, r in results["presets"].items():
        t = r["totals"]
        parts = ", ".join(f"{title.lower()} {n:,}" for title, n in t["final_sections"].items())
        lines.append(
            f"| {name} | {parts or '-'} | {t['final_window_tokens']:,} | {t['final_sent']:,} | "
            f"{r['compaction']['turns_with_compaction']} | {r['summarizer'] or '-'} |"
        )
    llm_runs = {name: r["llm"] for name, r in results["presets"].items() if "llm" in r}
    for name, llm in llm_runs.items():
        lines += [
            "",
            f"`{name}`: summaries and important data written by a model over HTTP (a local "
            f"`FakeLLMServer` answering deterministically, so the time is Engram's plus "
            f"loopback HTTP, not a model's): {llm['requests']} requests "
            f"({', '.join(f'{k} {v}' for k, v in llm['by_purpose'].items())}).",
        ]
    lines += ["", "![savings curve](savings.png)", ""]
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """Tokens sent per turn (one line per preset) and the whole history, log y-axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    presets = results["presets"]
    fig, (ax, cum) = plt.subplots(
        1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [3, 2]}, constrained_layout=True
    )
    first = next(iter(presets.values()))
    x = range(1, len(first["curve"]["history"]) + 1)
    ax.plot(
        x,
        first["curve"]["history"],
        color="black",
        linestyle="--",
        linewidth=2,
        label="whole history (naive prompt)",
    )
    colors = plt.get_cmap("tab10")
    for i, (name, r) in enumerate(presets.items()):
        label = f"{name} (budget {r['budget']:,}; saves {r['totals']['savings_pct']:.1f}%)"
        ax.plot(x, r["curve"]["sent"], color=colors(i), linewidth=1.3, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("turn")
    ax.set_ylabel("tokens sent in the prompt (log scale)")
    ax.set_title(f"Tokens sent per turn, {len(x):,}-turn synthetic conversation")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=9)

    naive_cum = _cumulative(first["curve"]["history"])
    cum.plot(x, naive_cum, color="black", linestyle="--", linewidth=2, label="whole history")
    for i, (name, r) in enumerate(presets.items()):
        cum.plot(x, _cumulative(r["curve"]["sent"]), color=colors(i), linewidth=1.3, label=name)
    cum.set_yscale("log")
    cum.set_xlabel("turn")
    cum.set_ylabel("cumulative tokens sent (log scale)")
    cum.set_title("Cumulative tokens sent")
    cum.grid(True, which="both", alpha=0.3)
    cum.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cumulative(values: Sequence[int]) -> list[int]:
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.savings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--turns", type=int, default=None, help=f"default {DEFAULT_TURNS}")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns")
    parser.add_argument("--presets", default=",".join(PRESET_ORDER))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--no-cache-window",
        action="store_true",
        help="baseline: every preset with cache_window off (the window drops a message per turn)",
    )
    parser.add_argument(
        "--no-fake-llm",
        action="store_true",
        help="skip the extra summary_buffer run with a local fake model writing the summaries",
    )
    args = parser.parse_args(argv)
    turns = args.turns or (QUICK_TURNS if args.quick else DEFAULT_TURNS)
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    fake_llm = not args.no_fake_llm and "summary_buffer" in presets
    results = run(
        turns,
        presets,
        seed=args.seed,
        fake_llm=fake_llm,
        progress=say,
        cache_window=not args.no_cache_window,
    )
    write_json(results, args.out / "savings.json")
    (args.out / "savings.md").write_text(markdown(results))
    if not args.no_plot:
        plot(results, args.out / "savings.png")
        plot_cache(results["presets"], args.out / "prompt_cache.png")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
