"""The dashboard at a glance, in a real browser: the overview's charts against the API's
counts for a tenant with a known history across days (written at past times with
``cairn-admin history``), a list that shows a new execution without a reload (and pauses
while the tab is hidden), the diff of two known checkpoint states, and deep links
restored after sign-in. Screenshots at 1280 and 390 px wide go to the screenshot
directory (``target/dashboard-screenshots``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import (
    DESKTOP,
    PHONE,
    Api,
    Console,
    Tenant,
    at,
    csp_violations,
    new_page,
    no_horizontal_overflow,
    sign_in,
    tid,
)
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.browser

STATUSES = ["running", "paused", "failed", "completed", "cancelled"]


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture
def fresh(admin: Callable[..., str], api_url: str) -> tuple[Tenant, Api]:
    """A tenant of its own (its charts hold only this test's history)."""
    tenant_id = admin("tenant", "create", "--name", f"overview-test-{uuid.uuid4().hex[:8]}")
    key = admin("key", "create", "--tenant", tenant_id)
    admin("credits", "grant", "--tenant", tenant_id, "--credits", "200")
    return Tenant(tenant_id, key), Api(api_url, key)


def test_the_overview_charts_a_known_history(
    page: Page,
    dashboard_url: str,
    admin: Callable[..., str],
    fresh: tuple[Tenant, Api],
    console: Console,
    screenshot: Callable[[Page, str], Path],
) -> None:
    tenant, api = fresh
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    history = [
        (today - timedelta(days=5, hours=-9), "completed", 4),
        (today - timedelta(days=5, hours=-10), "failed", 2),
        (today - timedelta(days=3, hours=-14), "cancelled", 1),
        (today - timedelta(days=1, hours=-8), "paused", 3),
        (today - timedelta(days=1, hours=-9), "completed", 1),
    ]
    for when, status, count in history:
        admin("history", "--tenant", tenant.id, "--at", iso(when), "--status", status, "--count", str(count))

    # The page's "now" is today at noon UTC, the test's today, whenever it runs.
    page.clock.set_fixed_time(today + timedelta(hours=12))
    sign_in(page, dashboard_url, tenant.key)
    expect(tid(page, "range-30d")).to_have_attribute("aria-current", "page")
    tid(page, "range-7d").click()
    expect(page).to_have_url(re.compile(r"#/overview\?range=7d$"))
    expect(tid(page, "range-7d")).to_have_attribute("aria-current", "page")
    expect(tid(page, "chart-executions")).to_be_visible()

    # The bars are the API's counts, bucket by bucket and status by status.
    first = today - timedelta(days=6)
    window = {"created_after": iso(first), "created_before": iso(today + timedelta(days=1))}
    stats = api.call("GET", "/executions/stats", params=window)
    assert len(stats["buckets"]) == 7
    drawn = {
        (b.get_attribute("data-start"), b.get_attribute("data-series")): int(
            b.get_attribute("data-value") or "-1"
        )
        for b in tid(page, "chart-executions").locator('[data-testid="bar"]').all()
    }
    expected = {
        (bucket["start"], status): bucket["by_status"][status]
        for bucket in stats["buckets"]
        for status in STATUSES
        if bucket["by_status"][status]
    }
    assert drawn == expected
    # ... and the known history: 4 completed and 2 failed five days ago, and so on.
    day = lambda n: iso(today - timedelta(days=n))  # noqa: E731
    assert expected == {
        (day(5), "completed"): 4,
        (day(5), "failed"): 2,
        (day(3), "cancelled"): 1,
        (day(1), "paused"): 3,
        (day(1), "completed"): 1,
    }
    failures = {
        b.get_attribute("data-start"): b.get_attribute("data-value")
        for b in tid(page, "chart-failures").locator('[data-testid="bar"]').all()
    }
    assert failures == {day(5): "2"}
    credits = tid(page, "chart-credits").locator('[data-testid="bar"]')
    assert {b.get_attribute("data-start") for b in credits.all()} == {day(5), day(3), day(1)}
    expect(tid(page, "overview-executions")).to_have_text("11")
    expect(tid(page, "overview-failures")).to_have_text("2")
    expect(tid(page, "overview-open-failures")).to_have_text("2")

    # The chart's accessible form: a titled image, and every number in a table.
    drawing = tid(page, "chart-executions").locator("svg")
    expect(drawing).to_have_attribute("role", "img")
    assert "11 in all" in (drawing.locator("desc").text_content() or "")
    tid(page, "chart-executions").locator("summary").click()
    rows = tid(page, "chart-executions-table").locator("tbody tr")
    expect(rows).to_have_count(7)
    expect(rows.nth(1).locator('[data-series="failed"]')).to_have_text("2")
    expect(rows.nth(1).get_by_role("link")).to_have_attribute("href", re.compile(r"^#/executions\?after="))
    screenshot(page, "overview")
    page.set_viewport_size(PHONE)
    no_horizontal_overflow(page)
    screenshot(page, "overview-phone")
    page.set_viewport_size(DESKTOP)

    # A bucket links to its executions: five days ago's six.
    tid(page, "chart-executions").locator(f'a:has([data-start="{day(5)}"])').click()
    expect(page).to_have_url(re.compile(r"#/executions\?after="))
    expect(tid(page, "execution-row")).to_have_count(6)

    # The open failures link and Back: the overview as it was.
    page.go_back()
    expect(page).to_have_url(re.compile(r"#/overview\?range=7d$"))
    tid(page, "overview-open-link").click()
    expect(page).to_have_url(re.compile(r"#/failures\?status=open$"))
    expect(tid(page, "failure-row")).to_have_count(2)

    assert csp_violations(page) == []
    console.assert_clean()


def test_a_list_shows_a_new_execution_without_a_reload(
    page: Page, dashboard_url: str, fresh: tuple[Tenant, Api], console: Console
) -> None:
    tenant, api = fresh
    wf = api.call("POST", "/workflows", json={"name": "live", "workflow_type": "custom"}, expect=(201,))
    first = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    sign_in(page, dashboard_url, tenant.key)
    tid(page, "nav-executions").click()
    expect(tid(page, "execution-row")).to_have_count(1)
    status = tid(page, "live-status")
    expect(status).to_have_attribute("data-state", "live")
    page.evaluate("window.__sameDocument = true")

    second = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    api.call("POST", f"/executions/{first['id']}/fail", json={"error_type": "AGENT_ERROR", "message": "m"})
    expect(tid(page, "execution-row", id=second["id"])).to_be_visible()
    expect(tid(tid(page, "execution-row", id=first["id"]), "execution-status")).to_have_text("failed")
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"

    # A hidden tab stops asking; shown again, it asks at once.
    hide = "hidden => { Object.defineProperty(document, 'hidden', {value: hidden, configurable: true});"
    hide += " document.dispatchEvent(new Event('visibilitychange')); }"
    page.evaluate(hide, True)
    expect(status).to_have_attribute("data-state", "paused")
    third = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    page.wait_for_timeout(4000)  # longer than a live page's first interval: no request while hidden
    expect(tid(page, "execution-row", id=third["id"])).to_have_count(0)
    page.evaluate(hide, False)
    expect(tid(page, "execution-row", id=third["id"])).to_be_visible()
    expect(status).to_have_attribute("data-state", "live")
    console.assert_clean()


def test_a_running_executions_page_follows_it_and_stops_when_it_ends(
    page: Page, dashboard_url: str, fresh: tuple[Tenant, Api], console: Console
) -> None:
    tenant, api = fresh
    wf = api.call("POST", "/workflows", json={"name": "follow", "workflow_type": "custom"}, expect=(201,))
    ex = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    sign_in(page, dashboard_url, tenant.key)
    page.goto(at(dashboard_url, f"/executions/{ex['id']}"))
    expect(tid(page, "execution-status")).to_have_text("running")
    status = tid(page, "live-status")
    expect(status).to_have_attribute("data-state", "live")
    page.evaluate("window.__sameDocument = true")

    cp = api.call(
        "POST",
        "/checkpoints",
        json={"execution_id": ex["id"], "name": "plan", "state": {"n": 1}},
        expect=(201,),
    )
    expect(tid(page, "checkpoint-row", id=cp["id"])).to_be_visible()
    api.call("POST", f"/executions/{ex['id']}/complete", json={"output": {"ok": True}})
    expect(tid(page, "execution-status")).to_have_text("completed")
    expect(tid(page, "execution-output")).to_contain_text('"ok": true')
    expect(status).to_have_attribute("data-state", "done")
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    console.assert_clean()


def test_the_diff_of_two_known_states_and_a_deep_link_restored(
    page: Page,
    browser: Browser,
    dashboard_url: str,
    fresh: tuple[Tenant, Api],
    console: Console,
    screenshot: Callable[[Page, str], Path],
) -> None:
    tenant, api = fresh
    wf = api.call("POST", "/workflows", json={"name": "diff", "workflow_type": "langgraph"}, expect=(201,))
    ex = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    before = {"step": 1, "messages": ["hi"], "plan": {"a": 1, "b": [1, 2]}, "a/b": "x"}
    after = {"step": 2, "messages": ["hi", "there"], "plan": {"a": 1, "c": None}, "a/b": "y"}
    one = api.call(
        "POST", "/checkpoints", json={"execution_id": ex["id"], "name": "one", "state": before}, expect=(201,)
    )
    two = api.call(
        "POST", "/checkpoints", json={"execution_id": ex["id"], "name": "two", "state": after}, expect=(201,)
    )
    api.call("POST", f"/executions/{ex['id']}/complete", json={})

    sign_in(page, dashboard_url, tenant.key)
    page.goto(at(dashboard_url, f"/executions/{ex['id']}"))
    expect(tid(page, "checkpoint-row")).to_have_count(2)
    expect(tid(page, "diff-from")).to_have_value(one["id"])
    expect(tid(page, "diff-to")).to_have_value(two["id"])
    tid(page, "diff-submit").click()
    expect(page).to_have_url(re.compile(rf"\?from={one['id']}&to={two['id']}$"))
    expected = [
        ("/a~1b", "changed"),
        ("/messages/1", "added"),
        ("/plan/b", "removed"),
        ("/plan/c", "added"),
        ("/step", "changed"),
    ]
    rows = tid(page, "diff-row")
    expect(rows).to_have_count(len(expected))
    assert [(r.get_attribute("data-path"), r.get_attribute("data-kind")) for r in rows.all()] == expected
    summary = tid(page, "diff-summary")
    expect(summary).to_contain_text("2 added, 1 removed, 2 changed")
    expect(tid(page, "diff-row", path="/step").locator("td").nth(2)).to_have_text("1")
    expect(tid(page, "diff-row", path="/step").locator("td").nth(3)).to_have_text("2")
    expect(tid(page, "diff-row", path="/plan/b").locator("td").nth(2)).to_have_text("[1,2]")
    assert page.evaluate("document.querySelector('.diff').lastChild.nodeType") == 1, (
        "stray text after the table"
    )
    screenshot(page, "execution-diff")
    page.set_viewport_size(PHONE)
    no_horizontal_overflow(page)
    screenshot(page, "execution-diff-phone")
    page.set_viewport_size(DESKTOP)

    # Back: the page without the comparison; Forward: with it again.
    page.go_back()
    expect(page).to_have_url(re.compile(rf"#/executions/{ex['id']}$"))
    expect(tid(page, "diff-row")).to_have_count(0)
    page.go_forward()
    expect(tid(page, "diff-row")).to_have_count(len(expected))

    # A shared link: opened signed out, it asks for the key, then shows the same view.
    link = page.url
    # A context of its own (signed out), its requests routed as every test page's are.
    with new_page(browser, Console(), dashboard_url, retry_lost=True) as fresh_page:
        fresh_page.goto(link)
        expect(fresh_page).to_have_url(re.compile(r"#/signin$"))
        tid(fresh_page, "signin-key").fill(tenant.key)
        tid(fresh_page, "signin-submit").click()
        expect(fresh_page).to_have_url(re.compile(rf"\?from={one['id']}&to={two['id']}$"))
        expect(tid(fresh_page, "diff-row")).to_have_count(len(expected))
        expect(tid(fresh_page, "diff-summary")).to_contain_text("2 added, 1 removed, 2 changed")

    # A large state (about 1 MB, 60,000 values): one change, found without freezing the page.
    big = {"rows": [{"i": i, "text": f"row {i} " + "x" * 16} for i in range(20000)]}
    changed = {"rows": [dict(r) for r in big["rows"]]}
    changed["rows"][12345]["text"] = "edited"
    three = api.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
    a = api.call("POST", "/checkpoints", json={"execution_id": three["id"], "state": big}, expect=(201,))
    b = api.call("POST", "/checkpoints", json={"execution_id": three["id"], "state": changed}, expect=(201,))
    page.goto(at(dashboard_url, f"/executions/{three['id']}?from={a['id']}&to={b['id']}"))
    expect(tid(page, "diff-row")).to_have_count(1, timeout=60_000)
    expect(tid(page, "diff-row", path="/rows/12345/text", kind="changed")).to_be_visible()
    console.assert_clean()
