"""Who may call: local mode without keys, bearer keys once one exists, revocation."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from engram.engine import Engram

SCOPES = "/v1/scopes"


class TestLocalMode:
    def test_no_key_in_the_store_serves_this_machine(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        local = make_api(sqlite_engram, client=("127.0.0.1", 50000))
        assert local.get(SCOPES).status_code == 200
        assert local.delete("/v1/scopes/anything").status_code == 200  # every right

    def test_a_peer_off_this_machine_is_refused(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        remote = make_api(sqlite_engram, client=("203.0.113.9", 50000))
        refused = remote.get(SCOPES)
        assert refused.status_code == 401
        assert "engram keys create" in refused.json()["error"]["message"]
        assert remote.get("/healthz").status_code == 200


class TestBearerKeys:
    def test_once_a_key_exists_every_v1_request_needs_one(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        admin = sqlite_engram.api_keys().create(admin=True).secret
        anonymous = make_api(sqlite_engram)
        missing = anonymous.get(SCOPES)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert missing.json()["error"]["type"] == "unauthenticated"
        assert make_api(sqlite_engram, key="egk_wrong").get(SCOPES).status_code == 401
        assert make_api(sqlite_engram, key=admin).get(SCOPES).status_code == 200
        assert anonymous.get("/healthz").status_code == 200
        assert anonymous.get("/metrics").status_code == 200

    def test_a_revoked_key_is_refused(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        keys = sqlite_engram.api_keys()
        keys.create(admin=True)
        scoped = keys.create(scopes=["a"])
        api = make_api(sqlite_engram, key=scoped.secret)
        assert api.get("/v1/scopes/a/sessions").status_code == 200
        keys.revoke(scoped.record.id)
        assert api.get("/v1/scopes/a/sessions").status_code == 401

    def test_a_scoped_key_lists_only_its_scopes(
        self, sqlite_engram: Engram, make_api: Callable[..., TestClient]
    ) -> None:
        for scope in ("a", "b", "c"):
            sqlite_engram.session("s", scope).add("user", f"hello {scope}")
        key = sqlite_engram.api_keys().create(scopes=["a", "c"], read_only=True).secret
        listed = make_api(sqlite_engram, key=key).get(SCOPES).json()["scopes"]
        assert [s["scope"] for s in listed] == ["a", "c"]

    def test_the_cache_keeps_a_checked_key_for_its_ttl(self, sqlite_engram: Engram) -> None:
        from engram.server import ServerSettings, create_app

        keys = sqlite_engram.api_keys()
        made = keys.create(scopes=["a"])
        with TestClient(
            create_app(sqlite_engram, ServerSettings(key_cache_seconds=3600)),
            headers={"Authorization": f"Bearer {made.secret}"},
        ) as api:
            assert api.get("/v1/scopes/a/sessions").status_code == 200
            keys.revoke(made.record.id)
            # Documented: revocation reaches a running server within key_cache_seconds.
            assert api.get("/v1/scopes/a/sessions").status_code == 200
