"""The dashboard over HTTP, as scripts and browsers reach it: keys, rights, forms, safety."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi.routing import APIRoute
from tests.dashboard.conftest import Site
from tests.dashboard.sample import LAUNCH, OTHER_SCOPE, SCOPE, TOOLS

from engram.dashboard import login, pages


@pytest.fixture
def http(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site.url, timeout=10, follow_redirects=False) as client:
        yield client


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _routes() -> list[tuple[str, str]]:
    """Every dashboard route that names a scope, with its method."""
    out = []
    for route in pages.router.routes:
        assert isinstance(route, APIRoute)
        if "{scope}" in route.path:
            out.extend((method, route.path) for method in sorted(route.methods))
    return out


class TestKeys:
    def test_a_script_reads_pages_with_a_bearer_key(self, http: httpx.Client, site: Site) -> None:
        response = http.get(f"/p/{SCOPE}/s/{LAUNCH}", headers=bearer(site.phoenix_key))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert 'id="prompt"' in response.text

    def test_no_key_sends_a_browser_to_the_login_form(self, http: httpx.Client) -> None:
        response = http.get(f"/p/{SCOPE}?offset=0")
        assert response.status_code == 303
        assert response.headers["location"] == f"/login?next=/p/{SCOPE}%3Foffset%3D0"

    def test_a_wrong_bearer_key_is_a_401_page(self, http: httpx.Client) -> None:
        response = http.get("/", headers=bearer("egk_wrong"))
        assert response.status_code == 401
        assert "<h1>Sign in needed</h1>" in response.text

    def test_login_opens_a_sign_in_named_by_an_http_only_same_site_cookie(
        self, http: httpx.Client, site: Site
    ) -> None:
        response = http.post("/login", data={"key": site.atlas_key, "next": "/p/atlas"})
        assert response.status_code == 303
        assert response.headers["location"] == "/p/atlas"
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert site.atlas_key not in cookie
        assert http.get(f"/p/{OTHER_SCOPE}").status_code == 200  # the client keeps the cookie
        out = http.post("/logout")
        assert out.status_code == 303
        assert http.get(f"/p/{OTHER_SCOPE}").status_code == 303

    @pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil"])
    def test_login_never_redirects_off_site(
        self, http: httpx.Client, site: Site, target: str
    ) -> None:
        response = http.post("/login", data={"key": site.atlas_key, "next": target})
        assert response.headers["location"] == "/"

    def test_pages_are_not_in_the_api_document(self, http: httpx.Client, site: Site) -> None:
        document = http.get("/openapi.json", headers=bearer(site.phoenix_key)).json()
        assert not [p for p in document["paths"] if not p.startswith("/v1/") and "/p/" in p]
        assert all(route.include_in_schema is False for route in pages.router.routes)  # type: ignore[attr-defined]
        assert all(route.include_in_schema is False for route in login.router.routes)  # type: ignore[attr-defined]


class TestIsolation:
    @pytest.mark.parametrize(("method", "path"), _routes())
    def test_every_page_of_another_scope_is_refused(
        self, http: httpx.Client, site: Site, method: str, path: str
    ) -> None:
        memory = site.engram.memories(SCOPE).list()[0].id
        url = path.format(scope=SCOPE, session=LAUNCH, memory_id=memory)
        form = {"data": {"confirm": SCOPE}} if method == "POST" else {}
        response = http.request(
            method, url, headers=bearer(site.atlas_key), params={"q": "x"}, **form
        )
        assert response.status_code == 403, url
        assert "Maya" not in response.text
        assert site.engram.memories(SCOPE).list()[0].id == memory

    def test_the_projects_page_lists_only_the_keys_scopes(
        self, http: httpx.Client, site: Site
    ) -> None:
        text = http.get("/", headers=bearer(site.atlas_key)).text
        assert f'href="/p/{OTHER_SCOPE}"' in text and f'href="/p/{SCOPE}"' not in text


class TestForms:
    def test_purge_needs_the_projects_name(self, http: httpx.Client, site: Site) -> None:
        headers = bearer(site.phoenix_key)
        before = len(site.engram.memories(SCOPE).list())
        refused = http.post(f"/p/{SCOPE}/memories/purge", data={"confirm": "yes"}, headers=headers)
        assert refused.status_code == 422
        assert "type the project&#39;s name" in refused.text
        assert len(site.engram.memories(SCOPE).list()) == before

    def test_a_form_from_another_site_is_refused(self, http: httpx.Client, site: Site) -> None:
        memory = site.engram.memories(OTHER_SCOPE).list()[0].id
        http.post("/login", data={"key": site.atlas_key})
        response = http.post(
            f"/p/{OTHER_SCOPE}/memories/{memory}/delete", headers={"Origin": "https://evil.example"}
        )
        assert response.status_code == 403
        assert [m.id for m in site.engram.memories(OTHER_SCOPE).list()] == [memory]

    def test_a_read_only_key_cannot_delete(self, http: httpx.Client, site: Site) -> None:
        key = site.engram.api_keys().create(scopes=[OTHER_SCOPE], read_only=True).secret
        memory = site.engram.memories(OTHER_SCOPE).list()[0].id
        page = http.get(f"/p/{OTHER_SCOPE}/memories", headers=bearer(key))
        assert page.status_code == 200 and "Delete" not in page.text
        response = http.post(f"/p/{OTHER_SCOPE}/memories/{memory}/delete", headers=bearer(key))
        assert response.status_code == 403
        assert [m.id for m in site.engram.memories(OTHER_SCOPE).list()] == [memory]


class TestConversation:
    def test_tool_calls_and_results_are_folded(self, http: httpx.Client, site: Site) -> None:
        page = http.get(f"/p/{SCOPE}/s/{TOOLS}", headers=bearer(site.phoenix_key)).text
        call = re.search(r'<details class="call"><summary>Tool call <code>(\w+)</code>', page)
        assert call is not None and call.group(1) == "search_history"
        assert re.search(r"<details><summary>Tool result for <code>call_1</code>", page)
        assert "vendor confirmed 3x capacity" in page  # inside the folded result

    def test_each_message_says_whether_the_model_sees_it(
        self, http: httpx.Client, site: Site
    ) -> None:
        chat = site.engram.session(LAUNCH, scope=SCOPE)
        ctx = chat.context(chat.prompt_log().last_budget, compact=False)
        watermark = chat.compaction_state().watermark
        page = http.get(
            f"/p/{SCOPE}/s/{LAUNCH}?after={watermark - 3}", headers=bearer(site.phoenix_key)
        )
        marks = dict(
            re.findall(
                r'id="m-(\d+)" data-id="\d+"[^>]*>\s*<header>.*?class="badge (\w+)"',
                page.text,
                re.S,
            )
        )
        assert marks[str(watermark)] == "folded"
        assert marks[str(ctx.message_ids[0])] == "sent"
        assert all(marks[str(i)] == "sent" for i in ctx.message_ids if str(i) in marks)

    def test_the_important_data_is_named_for_this_conversation(
        self, http: httpx.Client, site: Site
    ) -> None:
        page = http.get(f"/p/{SCOPE}/s/{LAUNCH}/prompt", headers=bearer(site.phoenix_key)).text
        titles = re.findall(r'<span class="gtitle">([^<]+)</span>', page)
        assert "IMPORTANT DATA FROM EARLIER IN THIS CONVERSATION" in titles
        assert not [t for t in titles if "PREVIOUS CONVERSATIONS" in t]
        # What the model reads is shown as sent: the summary-buffer design's title.
        assert "[IMPORTANT DATA FROM PREVIOUS CONVERSATIONS]" in page

    def test_the_offline_summary_reads_as_notes(self, http: httpx.Client, site: Site) -> None:
        page = http.get(f"/p/{SCOPE}/s/{LAUNCH}/prompt", headers=bearer(site.phoenix_key)).text
        summary = re.search(r'<blockquote class="summary">(.*?)</blockquote>', page, re.S)
        assert summary is not None and summary.group(1).strip()
        text = re.sub(r"<[^>]+>", "", summary.group(1))
        assert "User:" not in text and "?" not in text

    def test_citations_link_to_the_messages(self, http: httpx.Client, site: Site) -> None:
        page = http.get(f"/p/{SCOPE}/s/{LAUNCH}/prompt", headers=bearer(site.phoenix_key)).text
        summary = re.search(r'<blockquote class="summary">(.*?)</blockquote>', page, re.S)
        assert summary is not None
        paragraphs = re.findall(r"<p>(.*?)</p>", summary.group(1), re.S)
        link = rf'<a class="cite" href="/p/{SCOPE}/s/{LAUNCH}\?at=(\d+)#m-(\d+)">'
        links = re.findall(link, page)
        assert paragraphs and all('class="cite"' in p for p in paragraphs)
        assert links and all(at == anchor for at, anchor in links)
        history = http.get(
            f"/p/{SCOPE}/s/{LAUNCH}?at={links[0][0]}", headers=bearer(site.phoenix_key)
        ).text
        assert f'id="m-{links[0][0]}"' in history


class TestSafety:
    def test_message_text_is_escaped(self, http: httpx.Client, site: Site) -> None:
        chat = site.engram.session("xss", scope=OTHER_SCOPE)
        chat.add("user", "<script>alert(1)</script> [bold] & more")
        page = http.get(f"/p/{OTHER_SCOPE}/s/xss", headers=bearer(site.atlas_key)).text
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt; [bold] &amp; more" in page
        hits = http.get(
            f"/p/{OTHER_SCOPE}/search", params={"q": "alert"}, headers=bearer(site.atlas_key)
        ).text
        assert "<mark>alert</mark>" in hits and "<script>" not in hits

    def test_a_missing_conversation_is_a_404_page(self, http: httpx.Client, site: Site) -> None:
        response = http.get(f"/p/{SCOPE}/s/nope", headers=bearer(site.phoenix_key))
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("text/html")

    def test_htmx_is_served_from_the_package(self, http: httpx.Client) -> None:
        response = http.get("/static/htmx.min.js")
        assert response.status_code == 200
        assert re.search(r'version:"2\.\d+\.\d+"', response.text)
        page_refs = http.get("/login").text
        assert "http://" not in page_refs and "https://" not in page_refs  # nothing off-site


def test_an_image_message_shows_a_thumbnail_and_a_caption(http: httpx.Client, site: Site) -> None:
    from images import image_part, png_url

    inline, remote = png_url(32, 24), "https://example.com/board.png"
    chat = site.engram.session("pictures", SCOPE)
    chat.add_many(
        [{"role": "user", "content": [{"type": "text", "text": "Which board?"},
                                      image_part(inline, "high"), image_part(remote)]}]
    )  # fmt: skip
    page = http.get(f"/p/{SCOPE}/s/pictures", headers=bearer(site.phoenix_key)).text
    assert "Which board?" in page
    assert f'<img src="{inline}"' in page  # a stored data URL is shown as it is
    assert "[image: image/png, 32x24, 1 KiB, detail high]" in page
    assert f"[image: {remote}]" in page and f'src="{remote}"' not in page  # never loaded


class TestPromptCache:
    def test_the_chart_shows_the_cacheable_and_cached_tokens(
        self, http: httpx.Client, site: Site
    ) -> None:
        chat = site.engram.session(LAUNCH, scope=SCOPE)
        recorded = chat.prompts(newest=True, limit=1)[0]
        page = http.get(f"/p/{SCOPE}/s/{LAUNCH}", headers=bearer(site.phoenix_key)).text
        assert '<polyline class="cacheable" points="' in page
        assert "cached by the provider" in page
        row = re.search(rf"<tr><td>{recorded.turn}</td>.*?</tr>", page, re.S)
        assert row is not None and f">{recorded.tokens:,}<" in row.group(0)

    def test_what_if_shows_both_policies_on_one_chart_and_writes_nothing(
        self, http: httpx.Client, site: Site
    ) -> None:
        before = site.engram.export_session(LAUNCH, SCOPE)
        turns = len(site.engram.session(LAUNCH, scope=SCOPE).prompts(limit=1000))
        page = http.get(
            f"/p/{SCOPE}/s/{LAUNCH}/what-if",
            params={"policy": "lean", "budget": 2000},
            headers=bearer(site.phoenix_key),
        )
        assert page.status_code == 200
        assert '<polyline class="s0" points="' in page.text
        assert '<polyline class="s1" points="' in page.text
        assert re.search(r'<th scope="row">current \(\w+\)</th>', page.text)
        assert '<th scope="row">lean</th>' in page.text
        assert site.engram.export_session(LAUNCH, SCOPE) == before
        assert len(site.engram.session(LAUNCH, scope=SCOPE).prompts(limit=1000)) == turns

    def test_what_if_names_the_presets_for_an_unknown_policy(
        self, http: httpx.Client, site: Site
    ) -> None:
        page = http.get(
            f"/p/{SCOPE}/s/{LAUNCH}/what-if",
            params={"policy": "nope"},
            headers=bearer(site.phoenix_key),
        )
        assert page.status_code == 422
        assert "choose one of default, lean" in page.text
