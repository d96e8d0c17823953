"""``engram serve``: the REST API on uvicorn (the ``server`` extra).

With no API key in the store the server listens on this machine only (and
refuses any other address); with keys, every ``/v1`` request needs one.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import signal

import click

from engram.cli._common import store_url
from engram.engine import Engram
from engram.errors import ConfigError, MissingDependency, install_hint
from engram.named_lock import SupportsHeldLocks

#: Store schemes several server processes can share (``--workers``).
SHARED_STORES = frozenset({"sqlite", "postgresql", "postgres"})
#: Default address and port.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option("--db", "db", metavar="URL", default=None, help="Store URL; overrides engram --db.")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port.")
@click.option(
    "--sample", is_flag=True, help="Load the bundled sample conversation when the store is empty."
)
@click.option(
    "--upstream",
    metavar="URL",
    default=None,
    help="OpenAI-compatible base URL the /v1/chat/completions and /v1/responses proxy calls "
    "(default: $ENGRAM_LLM_BASE_URL; key: $ENGRAM_LLM_API_KEY).",
)
@click.option(
    "--upstream-responses",
    is_flag=True,
    help="The upstream also speaks the Responses API: send /v1/responses to it in that format, "
    "so reasoning items go back as they came (default: as chat completions; "
    "$ENGRAM_PROXY_UPSTREAM_RESPONSES=1).",
)
@click.option(
    "--anthropic-upstream",
    metavar="URL",
    default=None,
    help="Anthropic-format base URL the /v1/messages proxy calls, e.g. https://api.anthropic.com "
    "(default: $ENGRAM_ANTHROPIC_BASE_URL); clients' own x-api-key is passed on.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=None,
    help="Tokens of prompt, tools and answer per proxied request "
    "(default: $ENGRAM_PROXY_BUDGET, else the model's context window).",
)
@click.option(
    "--single-system",
    is_flag=True,
    help="Proxy: send the system prompt, memories and summary as one system message.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    metavar="NAME",
    multiple=True,
    envvar="ENGRAM_ALLOWED_HOSTS",
    help="While the store holds no API key, also answer requests whose Host is NAME "
    "(repeatable; $ENGRAM_ALLOWED_HOSTS, separated by spaces). Without it only localhost, "
    "loopback addresses and the address listened on are answered (others: 421).",
)
@click.option(
    "--key-failures",
    type=click.IntRange(0),
    default=None,
    envvar="ENGRAM_KEY_FAILURES",
    help="Wrong API keys a client address may send within --key-failure-window before its "
    "requests get 429 with Retry-After ($ENGRAM_KEY_FAILURES; default 10; 0: no limit).",
)
@click.option(
    "--key-failure-window",
    type=click.FloatRange(1),
    default=None,
    envvar="ENGRAM_KEY_FAILURE_WINDOW",
    metavar="SECONDS",
    help="The window of --key-failures ($ENGRAM_KEY_FAILURE_WINDOW; default 60).",
)
@click.option(
    "--sign-in-hours",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    envvar="ENGRAM_SIGN_IN_HOURS",
    help="How long a dashboard sign-in lasts ($ENGRAM_SIGN_IN_HOURS; default 12).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes sharing the port, each with its own connections to the store "
    "(more cores; on PostgreSQL also the way to more machines).",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="uvicorn's log level.",
)
@click.pass_context
def serve_command(
    ctx: click.Context,
    db: str | None,
    host: str,
    port: int,
    sample: bool,
    upstream: str | None,
    upstream_responses: bool,
    anthropic_upstream: str | None,
    budget: int | None,
    single_system: bool,
    allowed_hosts: tuple[str, ...],
    key_failures: int | None,
    key_failure_window: float | None,
    sign_in_hours: float | None,
    workers: int,
    log_level: str,
) -> None:
    """Serve the REST API (OpenAPI at /docs, metrics at /metrics)."""
    try:
        import uvicorn

        from engram.server import ServerSettings, create_app
        from engram.server.mcp_mount import MCP_PATH
    except ImportError as exc:
        raise MissingDependency.extra("engram serve", "server", exc) from exc
    import engram
    from engram.cli.demo import DEMO_SCOPE, store_sample
    from engram.proxy import ProxySettings
    from engram.proxy.settings import anthropic_from_env

    proxy = ProxySettings.from_env(
        base_url=upstream,
        budget=budget,
        single_system=single_system,
        responses_api=upstream_responses,
    )
    anthropic = anthropic_from_env(
        base_url=anthropic_upstream, budget=budget, single_system=single_system
    )

    url = store_url(ctx, db)
    with engram.open(url) as mem:
        if workers > 1 and mem.url.partition(":")[0].split("+")[0] not in SHARED_STORES:
            raise click.ClickException(
                f"--workers {workers} needs a store the processes can share (SQLite or "
                f"PostgreSQL), not {mem.url.partition(':')[0]}: each process would have its own"
            )
        if workers > 1 and (proxy or anthropic) and not isinstance(mem.store, SupportsHeldLocks):
            raise click.ClickException(
                f"--workers {workers} with the proxy needs PostgreSQL: a session's turns go one "
                "at a time through a lock the processes share, which only PostgreSQL has. "
                "Serve the proxy on SQLite with one worker."
            )
        keys = _active_keys(mem)
        if not keys and not is_loopback(host):
            raise click.ClickException(
                f"refusing to listen on {host} with no API key: anyone could read every scope. "
                "Create one with `engram keys create --admin`, or listen on 127.0.0.1."
            )
        if sample and not mem.scopes():
            store_sample(mem, replay_turns=True)
            click.echo(f"Loaded the sample conversation into scope {DEMO_SCOPE!r}.")
        settings = ServerSettings(proxy=proxy, anthropic=anthropic, allowed_hosts=allowed_hosts)
        if key_failures is not None:
            settings = dataclasses.replace(settings, key_failures=key_failures)
        if key_failure_window is not None:
            settings = dataclasses.replace(settings, key_failure_window=key_failure_window)
        if sign_in_hours is not None:
            settings = dataclasses.replace(settings, session_seconds=sign_in_hours * 3600)
        app = create_app(mem, settings)
        _announce(mem.url, host, port, keys)
        if workers > 1:
            click.echo(f"  workers    {workers} processes")
        base = _base(host, port)
        if proxy is not None:
            click.echo(f"  proxy      {base}/v1/chat/completions -> {proxy.base_url}")
            api = "responses" if proxy.responses_api else "chat completions"
            click.echo(f"  proxy      {base}/v1/responses -> {proxy.base_url} ({api})")
        if anthropic is not None:
            click.echo(f"  proxy      {base}/v1/messages -> {anthropic.base_url}")
        served = proxy or anthropic
        if served is not None:
            window = f"{served.budget:,} tokens" if served.budget else "the model's context window"
            click.echo(f"  budget     {window} per request (X-Engram-Budget to change one)")
        if any(getattr(route, "path", None) == MCP_PATH for route in app.routes):
            click.echo(f"  MCP        {_base(host, port)}{MCP_PATH}")
        else:
            click.echo(f"  MCP        not served: it needs the 'mcp' extra ({install_hint('mcp')})")
        # uvicorn stops gracefully on SIGINT/SIGTERM, then raises the signal again with the
        # handlers found at start: quiet ones let this command close Engram and exit 0.
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, _ignore)
        if workers > 1:
            from engram.config import Config
            from engram.server.workers import run

            target = url or Config.from_env().url  # what engram.open resolved, unmasked
            run(target, settings, host=host, port=port, workers=workers, log_level=log_level)
            return
        uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)
        ).run()


def _ignore(signum: int, frame: object) -> None:
    """A handler that does nothing: the server has already stopped."""


def _active_keys(mem: Engram) -> int:
    try:
        return len(mem.api_keys().active())
    except ConfigError:  # a backend that keeps no keys: local mode only
        return 0


def _base(host: str, port: int) -> str:
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def _announce(url: str, host: str, port: int, keys: int) -> None:
    base = _base(host, port)
    if keys:
        click.echo(f"Engram on {url}: {keys} API key(s); every /v1 request needs one.")
        auth = ' -H "Authorization: Bearer $ENGRAM_KEY"'
    else:
        click.echo(f"Engram on {url}: no API key, so this server answers only this machine.")
        auth = ""
    click.echo(f"  dashboard  {base}/")
    click.echo(f"  API docs   {base}/docs")
    click.echo(f"  OpenAPI    {base}/openapi.json")
    click.echo(f"  metrics    {base}/metrics")
    click.echo(f"  try        curl -s{auth} {base}/v1/scopes")
