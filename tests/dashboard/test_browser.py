"""The dashboard end to end, in Debian's Chromium, against a real server on 127.0.0.1."""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.dashboard.conftest import Site, screenshot
from tests.dashboard.sample import LAUNCH, OTHER_SCOPE, SCOPE

pytestmark = pytest.mark.slow


def sign_in(page: Any, site: Site, key: str) -> None:
    page.goto(f"{site.url}/")
    assert "/login" in page.url  # no key yet: the sign-in form
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"{site.url}/")


class TestAProjectsTeam:
    def test_sign_in_and_see_only_ones_projects(self, page: Any, site: Site) -> None:
        page.goto(f"{site.url}/")
        screenshot(page, "login")
        page.fill("#key", "egk_not-a-key")
        page.click("button[type=submit]")
        assert page.locator("[role=alert]").inner_text() == "This key is unknown or revoked."
        sign_in(page, site, site.phoenix_key)
        rows = page.locator("table.projects tbody th[scope=row]")
        assert rows.all_inner_texts() == [SCOPE]
        cookie = next(c for c in page.context.cookies() if c["name"] == "engram_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert site.phoenix_key not in cookie["value"]  # the key stays on the server
        screenshot(page, "projects")

    def test_history_scrolls_past_the_first_page(self, page: Any, site: Site) -> None:
        sign_in(page, site, site.phoenix_key)
        page.click(f"table.projects a:text-is('{SCOPE}')")
        page.wait_for_url(re.compile(f"/p/{SCOPE}$"))
        screenshot(page, "project")
        page.click(f"a:text-is('{LAUNCH}')")
        messages = page.locator("article.msg")
        assert messages.count() == 50
        stored = site.engram.session_info(LAUNCH, SCOPE)
        assert stored is not None
        for _ in range(5):  # each scroll to the end reveals the link that loads the next page
            if messages.count() >= stored.message_count:
                break
            page.locator("a.more").last.scroll_into_view_if_needed()
            page.wait_for_function(
                "n => document.querySelectorAll('article.msg').length > n", arg=messages.count()
            )
        assert messages.count() == stored.message_count
        shown = page.eval_on_selector_all("article.msg", "els => els.map(e => e.dataset.id)")
        ids = [int(i) for i in shown]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert page.locator("p.end").is_visible()
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "conversation")

    def test_the_prompt_view_is_the_librarys_prompt(self, page: Any, site: Site) -> None:
        sign_in(page, site, site.phoenix_key)
        page.goto(f"{site.url}/p/{SCOPE}/s/{LAUNCH}")
        page.click("text=Prompt view")
        page.wait_for_url(re.compile("/prompt$"))
        chat = site.engram.session(LAUNCH, scope=SCOPE)
        budget = chat.prompt_log().last_budget
        expected = chat.context(budget, compact=False)
        shown = int(page.locator("#prompt").get_attribute("data-tokens"))
        assert shown == expected.tokens
        groups = page.locator(".groups .gtok").all_inner_texts()
        assert sum(int(g.split()[0].replace(",", "")) for g in groups) == expected.tokens
        screenshot(page, "prompt", full_page=True)
        # Rebuilt with another budget (htmx swaps the panel in place): still the library's.
        page.fill("input[name=budget]", "1200")
        page.click("text=Rebuild")
        page.wait_for_function(
            "old => document.querySelector('#prompt').dataset.tokens !== old", arg=str(shown)
        )
        rebuilt = chat.context(1200, compact=False)
        assert int(page.locator("#prompt").get_attribute("data-tokens")) == rebuilt.tokens

    def test_search_and_jump_to_the_hit(self, page: Any, site: Site) -> None:
        sign_in(page, site, site.phoenix_key)
        page.goto(f"{site.url}/p/{SCOPE}")
        page.fill("#q", "waitlist")
        page.press("#q", "Enter")
        page.wait_for_url(re.compile(r"/search\?q=waitlist"))
        hits = page.locator("ol.hits a.hit")
        assert hits.count() >= 1
        assert page.locator("ol.hits mark").first.inner_text().lower().startswith("waitlist")
        screenshot(page, "search")
        href = hits.first.get_attribute("href")
        wanted = int(re.search(r"at=(\d+)", href).group(1))  # type: ignore[union-attr]
        hits.first.click()
        page.wait_for_url(re.compile(rf"at={wanted}"))
        target = page.locator(f"#m-{wanted}")
        assert target.is_visible()
        assert "target" in (target.get_attribute("class") or "")
        assert "waitlist" in target.inner_text().lower()

    def test_delete_a_memory(self, page: Any, site: Site) -> None:
        sign_in(page, site, site.phoenix_key)
        page.goto(f"{site.url}/p/{SCOPE}/memories")
        before = [m.id for m in site.engram.memories(SCOPE).list()]
        assert page.locator("li.memory").count() == len(before) == 3
        screenshot(page, "memories", full_page=True)
        page.once("dialog", lambda dialog: dialog.accept())
        page.click(f"#memory-{before[0]} button")
        page.wait_for_function("document.querySelectorAll('li.memory').length === 2")
        assert [m.id for m in site.engram.memories(SCOPE).list()] == before[1:]
        newest = page.locator("table.audit tbody tr").first.locator("td")
        assert newest.nth(1).inner_text() == "delete"
        assert newest.nth(3).inner_text() == f"#{before[0]}"


class TestAnotherScopesKey:
    def test_sees_none_of_it(self, page: Any, site: Site) -> None:
        sign_in(page, site, site.atlas_key)
        assert page.locator("table.projects tbody th[scope=row]").all_inner_texts() == [OTHER_SCOPE]
        assert SCOPE not in page.locator("main").inner_text()
        for path in (
            f"/p/{SCOPE}",
            f"/p/{SCOPE}/s/{LAUNCH}",
            f"/p/{SCOPE}/s/{LAUNCH}/prompt",
            f"/p/{SCOPE}/s/{LAUNCH}/history?after=1",
            f"/p/{SCOPE}/search?q=launch",
            f"/p/{SCOPE}/memories",
        ):
            response = page.goto(f"{site.url}{path}")
            assert response.status == 403, path
            text = page.locator("main").inner_text()
            assert "Maya" not in text and "waitlist" not in text, path
        screenshot(page, "forbidden", doc=False)


def test_readable_on_a_phone(browser_context: Any, site: Site) -> None:
    browser_context.clear_cookies()
    tab = browser_context.new_page()
    try:
        tab.set_viewport_size({"width": 390, "height": 844})
        sign_in(tab, site, site.phoenix_key)
        tab.goto(f"{site.url}/p/{SCOPE}/s/{LAUNCH}")
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 390  # nothing wider than the screen: no sideways scrolling
        screenshot(tab, "phone")
        tab.keyboard.press("Tab")
        assert tab.evaluate("document.activeElement.className") == "skip"
    finally:
        tab.close()
