"""``engram keys``: create, list and revoke the server's API keys (stored hashed in the store)."""

from __future__ import annotations

import click

from engram.cli._common import db_option, echo_json, open_engram
from engram.models import ApiKeyRecord


def _key_json(key: ApiKeyRecord) -> dict[str, object]:
    return {
        "id": key.id,
        "prefix": key.prefix,
        "label": key.label,
        "admin": key.admin,
        "scopes": list(key.scopes),
        "rights": "admin" if key.admin else ("read-write" if key.writable else "read"),
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@click.group("keys")
def keys_group() -> None:
    """Manage the API keys of `engram serve` (shared by every server on the database)."""


@keys_group.command("create")
@db_option
@click.option("--scope", "scopes", multiple=True, metavar="NAME", help="A scope it reaches.")
@click.option("--read-only", is_flag=True, help="Only read in its scopes.")
@click.option("--admin", is_flag=True, help="Reach every scope and the admin routes.")
@click.option("--label", default="", help="A note to tell keys apart.")
@click.pass_context
def create_command(
    ctx: click.Context,
    db: str | None,
    scopes: tuple[str, ...],
    read_only: bool,
    admin: bool,
    label: str,
) -> None:
    """Create a key and print it once (only its hash is stored)."""
    created = (
        open_engram(ctx, db)
        .api_keys()
        .create(scopes=scopes, admin=admin, read_only=read_only, label=label)
    )
    click.echo(created.secret)
    rights = _key_json(created.record)["rights"]
    where = "every scope" if admin else ", ".join(created.record.scopes)
    click.echo(f"key {created.record.id} ({rights}, {where}); it is not shown again", err=True)


@keys_group.command("list")
@db_option
@click.pass_context
def list_command(ctx: click.Context, db: str | None) -> None:
    """List every key (prefix, rights, scopes, revoked or not); never the secrets."""
    echo_json([_key_json(key) for key in open_engram(ctx, db).api_keys().list()])


@keys_group.command("revoke")
@db_option
@click.argument("key_id", type=int)
@click.pass_context
def revoke_command(ctx: click.Context, db: str | None, key_id: int) -> None:
    """Revoke a key by id: servers refuse it within seconds."""
    open_engram(ctx, db).api_keys().revoke(key_id)
    click.echo(f"revoked key {key_id}", err=True)
