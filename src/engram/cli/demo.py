"""``engram demo``: a short, offline walkthrough on a bundled sample conversation.

It opens a throw-away SQLite database (or ``--db``), imports
``engram/data/sample_conversation.jsonl`` (a week of launch planning for a
product called Phoenix), and shows what Engram does with it: what is stored,
the lean prompt for a small budget, what the retrieval tools return when the
model asks for older history, the same history folded into a summary and
important data (``summary_buffer``), and a long-term memory written when the
conversation ends and shown in the next one. No network, no LLM (the offline
summarizer and memory writer): it runs in seconds.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import click

import engram
from engram import tools
from engram.cli._common import CliState, first_line
from engram.cli.query import context_lines
from engram.engine import Engram, Session
from engram.errors import CorruptedData
from engram.models import JSON
from engram.sections.summary import section_label
from engram.transfer.importers import parse_jsonl

#: The bundled conversation, its scope and what the walkthrough asks for.
SAMPLE_FILE = "sample_conversation.jsonl"
DEMO_SCOPE = "phoenix"
DEMO_BUDGET = 3000
DEMO_POLICY = "lean"
#: The sample session's stored policy: a summary and important data beside the recent turns.
SAMPLE_POLICY = "summary_buffer"
DEMO_MODEL = "gpt-4o-mini"
DEMO_SYSTEM = (
    "You are the Phoenix launch assistant. You see only the latest messages; "
    "use the history tools to recall anything older."
)
DEMO_SEARCH = "pricing"
DEMO_DATE = "2025-03-06"

#: Width of message previews in the walkthrough.
WIDTH = 88


def sample_bytes() -> bytes:
    """Read the bundled sample conversation (package data, so it works from a wheel)."""
    return resources.files("engram").joinpath("data", SAMPLE_FILE).read_bytes()


@click.command("demo")
@click.option(
    "--db",
    "db",
    metavar="URL",
    default=None,
    help="Store to use (default: a temporary SQLite database, deleted afterwards).",
)
@click.pass_context
def demo_command(ctx: click.Context, db: str | None) -> None:
    """Walk through Engram on a bundled sample conversation, offline, in seconds."""
    state = ctx.find_object(CliState)
    explicit_group_db = ctx.parent is not None and (
        ctx.parent.get_parameter_source("db") == click.core.ParameterSource.COMMANDLINE
    )
    # $ENGRAM_URL is deliberately ignored: the demo must not write into someone's real store.
    url = db or (state.db if state is not None and explicit_group_db else None)
    if url is not None:
        _run(url)
        return
    with tempfile.TemporaryDirectory(prefix="engram-demo-") as directory:
        _run(f"sqlite:///{Path(directory) / 'demo.db'}")


def _run(url: str) -> None:
    # llm=None: offline even when ENGRAM_LLM_* is set; closed before the directory is removed
    with engram.open(url, llm=None) as mem:
        _walkthrough(mem)


def _walkthrough(mem: Engram) -> None:
    chat = store_sample(mem)
    stored_tokens = _show_stored(chat, mem.url)
    _show_prompt(chat, stored_tokens)
    _show_search(chat)
    _show_by_date(chat)
    _show_compaction(chat)
    _show_memory(mem, chat)
    _heading("7. Tools offered to the model (OpenAI, Responses, Anthropic and MCP schemas)")
    names = [schema["function"]["name"] for schema in tools.schemas("openai")]
    click.echo("  " + ", ".join(names))
    click.echo("\nOn your own data: engram import FILE --session ID; engram context --session ID")


def store_sample(mem: Engram, *, replay_turns: bool = False) -> Session:
    """Import the sample (once: a persistent ``--db`` that already has it is left alone).

    With ``replay_turns`` the conversation is stored as it was lived: each
    user message is followed by the prompt an assistant would have been sent
    (a real :meth:`Session.context` call, recorded in the prompt log) before
    its answer is stored, so the dashboard has turns to chart.
    """
    chat: Session | None = None
    for batch in parse_jsonl(sample_bytes(), file=SAMPLE_FILE):
        chat = mem.session(batch.session, scope=DEMO_SCOPE, policy=SAMPLE_POLICY)
        info = chat.info()
        if info is not None and info.message_count:
            continue
        if not replay_turns:
            chat.add_many(batch.messages)
            continue
        for exchange in _exchanges(batch.messages):
            chat.add_many(exchange.asked)
            if exchange.answers:
                chat.context(DEMO_BUDGET, system=DEMO_SYSTEM, model=DEMO_MODEL)
                chat.add_many(exchange.answers)
    if chat is None:
        raise CorruptedData(f"the bundled {SAMPLE_FILE} holds no messages")
    return chat


@dataclass(frozen=True, slots=True)
class _Exchange:
    """What was said before an answer, and the answer (assistant and tool messages)."""

    asked: list[JSON]
    answers: list[JSON]


def _exchanges(messages: list[JSON]) -> list[_Exchange]:
    """Split a history at each answer: the messages before it, then the answer's run."""
    out: list[_Exchange] = []
    asked: list[JSON] = []
    answers: list[JSON] = []
    for message in messages:
        answering = message.get("role") in ("assistant", "tool")
        if not answering and answers:
            out.append(_Exchange(asked, answers))
            asked, answers = [], []
        (answers if answering else asked).append(message)
    if asked or answers:
        out.append(_Exchange(asked, answers))
    return out


def _show_stored(chat: Session, url: str) -> int:
    _heading(f"1. Store a conversation ({url})")
    stats = chat.stats()
    click.echo(
        f"Session {chat.id!r} in scope {chat.scope!r}: {stats['total_messages']} messages, "
        f"{stats['stored_tokens']:,} tokens, {stats['first_message_at'][:10]} to "
        f"{stats['last_message_at'][:10]}. Every message is kept."
    )
    return int(stats["stored_tokens"])


def _show_prompt(chat: Session, stored_tokens: int) -> None:
    _heading(
        f"2. The prompt for the next turn ({DEMO_BUDGET:,}-token budget, "
        f"{DEMO_POLICY!r} policy, {DEMO_MODEL})"
    )
    built = chat.context(DEMO_BUDGET, system=DEMO_SYSTEM, model=DEMO_MODEL, policy=DEMO_POLICY)
    for line in context_lines(built, width=WIDTH):
        click.echo(line)
    click.echo(f"The model reads {built.tokens:,} tokens of the {stored_tokens:,} stored.")


def _show_search(chat: Session) -> None:
    _heading(f'3. The model asks: search_history(query="{DEMO_SEARCH}", limit=3)')
    found = _call(chat, "search_history", {"query": DEMO_SEARCH, "limit": 3})
    for item in found.get("results", []):
        stamp = item["created_at"][:16].replace("T", " ")
        click.echo(f"  #{item['id']} {stamp} {item['role']}:")
        click.echo(f"     {first_line(item.get('snippet', ''), WIDTH)}")


def _show_by_date(chat: Session) -> None:
    _heading(f'4. The model asks: get_messages_by_date(date="{DEMO_DATE}", limit=4)')
    day = _call(chat, "get_messages_by_date", {"date": DEMO_DATE, "limit": 4})
    more = ", and more that day" if day.get("has_more") else ""
    click.echo(f"  {day.get('count', 0)} messages from {DEMO_DATE}{more}:")
    for item in day.get("messages", []):
        preview = first_line(item.get("content", ""), WIDTH - 20)
        click.echo(f"  #{item['id']} {item['created_at'][11:16]} {item['role']:<9} {preview}")


def _show_compaction(chat: Session) -> None:
    _heading("5. The same history under 'summary_buffer' (summarize over 3,000 tokens)")
    result = chat.compact(system=DEMO_SYSTEM, policy="summary_buffer")
    state = chat.compaction_state()
    if result.committed or state.summary_version:
        click.echo(
            f"  Summary version {state.summary_version} ({state.summarizer}), "
            f"{len(state.summary.split())} words, covers messages up to id {state.watermark}:"
        )
        click.echo(f"  {first_line(state.summary, WIDTH)}")
        data = state.important_data
        for key in ("key_decisions", "source_urls", "entities"):
            if data.get(key):
                click.echo(f"  {key}: {first_line('; '.join(map(str, data[key][:3])), WIDTH)}")
    built = chat.context(DEMO_BUDGET, system=DEMO_SYSTEM, model=DEMO_MODEL, policy="summary_buffer")
    click.echo(
        f"  Prompt: {built.tokens:,} tokens; sections {_titles(built.sections)}; "
        f"{len(built.message_ids)} recent messages. Nothing stored was changed."
    )


def _show_memory(mem: Engram, chat: Session) -> None:
    _heading("6. The conversation ends: a long-term memory for the scope")
    outcome = chat.end("demo finished", wait=True).result()
    written = outcome.memory.content if outcome.memory else outcome.detail
    click.echo(f"  {outcome.status}: {first_line(written, WIDTH)}")
    follow_up = mem.session("phoenix-follow-up", scope=DEMO_SCOPE)
    if not follow_up.messages(limit=1):
        follow_up.add("user", "Where did we land on launch pricing?")
    built = follow_up.context(DEMO_BUDGET, system=DEMO_SYSTEM, model=DEMO_MODEL)
    click.echo(
        f"  A new conversation in scope {DEMO_SCOPE!r} starts with sections "
        f"{_titles(built.sections) or '(none)'}; {built.tokens:,} tokens."
    )


def _titles(sections: list[str]) -> str:
    """The prompt's sections as a person reads them."""
    return ", ".join(section_label(title) for title in sections)


def _call(chat: Session, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run a tool exactly as a model's call would be run, and decode its JSON answer."""
    result: dict[str, Any] = json.loads(tools.dispatch(chat, name, json.dumps(arguments)))
    if "error" in result:  # the demo's own calls are valid: an error here is a bug to see
        raise CorruptedData(f"{name} failed on the sample: {result['error']}")
    return result


def _heading(text: str) -> None:
    click.echo("")
    click.secho(text, bold=True)
