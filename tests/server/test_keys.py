"""API keys: stored hashed in the store itself (every backend), created, listed, revoked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.cli.harness import Cli

import engram
from engram.apikeys import KEY_PREFIX, ApiKeys, hash_key
from engram.engine import Engram
from engram.errors import ConfigError, NotFound


def _keys(mem: Engram) -> ApiKeys:
    return mem.api_keys()  # every backend keeps keys


class TestKeyStore:
    def test_a_created_key_authenticates_until_revoked(self, mem: Engram) -> None:
        keys = _keys(mem)
        created = keys.create(scopes=["alpha", "beta"], read_only=True, label="ci")
        assert created.secret.startswith(KEY_PREFIX)
        found = keys.authenticate(created.secret)
        assert found is not None
        assert found.scopes == ("alpha", "beta")
        assert (found.admin, found.writable, found.label) == (False, False, "ci")
        keys.revoke(created.record.id)
        assert keys.authenticate(created.secret) is None
        assert keys.list()[0].revoked_at is not None
        assert keys.active() == []
        with pytest.raises(NotFound):
            keys.revoke(created.record.id)

    def test_unknown_and_malformed_secrets_do_not_authenticate(self, mem: Engram) -> None:
        keys = _keys(mem)
        created = keys.create(admin=True)
        assert keys.authenticate(created.secret + "x") is None
        assert keys.authenticate("not-a-key") is None
        assert keys.authenticate("") is None

    def test_rights_must_be_coherent(self, mem: Engram) -> None:
        keys = _keys(mem)
        with pytest.raises(ConfigError):
            keys.create()  # neither admin nor scoped
        with pytest.raises(ConfigError):
            keys.create(admin=True, scopes=["a"])
        with pytest.raises(ConfigError):
            keys.create(admin=True, read_only=True)
        with pytest.raises(Exception, match="scope"):
            keys.create(scopes=[""])

    def test_servers_sharing_a_store_share_its_keys(self, open_engram) -> None:  # type: ignore[no-untyped-def]
        first, second = open_engram(), open_engram()
        created = _keys(first).create(scopes=["shared"])
        found = _keys(second).authenticate(created.secret)
        assert found is not None and found.id == created.record.id


def test_only_the_hash_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    with engram.open(f"sqlite:///{path}", llm=None) as mem:
        created = mem.api_keys().create(admin=True)
    raw = (
        path.read_bytes() + (tmp_path / "k.db-wal").read_bytes()
        if (tmp_path / "k.db-wal").exists()
        else path.read_bytes()
    )
    assert created.secret.encode() not in raw
    with sqlite3.connect(path) as conn:
        (stored,) = conn.execute("SELECT key_hash FROM api_keys").fetchone()
    assert stored == hash_key(created.secret)


class TestKeysCommand:
    def test_create_list_revoke(self, tmp_path: Path) -> None:
        cli = Cli(tmp_path)
        made = cli("keys", "create", "--scope", "alpha", "--read-only", "--label", "bot")
        assert made.exit_code == 0, made.output
        secret = made.stdout.strip()
        assert secret.startswith(KEY_PREFIX)
        listed = cli("keys", "list")
        assert listed.exit_code == 0
        assert secret not in listed.output
        assert '"rights": "read"' in listed.output and '"alpha"' in listed.output
        assert cli("keys", "revoke", "1").exit_code == 0
        again = cli("keys", "revoke", "1")
        assert again.exit_code == 1 and "no active API key" in again.output

    def test_an_admin_key_with_scopes_is_refused_in_one_line(self, tmp_path: Path) -> None:
        result = Cli(tmp_path)("keys", "create", "--admin", "--scope", "x")
        assert result.exit_code == 1
        assert result.output.startswith("Error: ") and "Traceback" not in result.output
