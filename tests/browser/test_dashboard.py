"""The tenant dashboard in a real browser (Debian's Chromium through Playwright).

A fresh tenant is made with cairn-admin and given data through the API (httpx); then the
dashboard is driven as a person would: sign in, executions, an execution's checkpoints
and state, replay, failures, workflows, billing, API keys, sign out. Every page visited is
saved as a full-page screenshot (1280x900, and the executions list and an execution page
again at 390x844). A reload of the page must get 304 Not Modified for each of its
assets. The page's console must show no JS error and no CSP violation.

Run (with the stack serving /dashboard and /api/v1):

    CAIRN_DASHBOARD_URL=http://127.0.0.1:3000/dashboard \
    CAIRN_API_URL=http://127.0.0.1:3000/api/v1 \
    CAIRN_TEST_ADMIN=target/debug/cairn-admin \
    pytest tests/browser -m browser
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from conftest import (
    DESKTOP,
    EMULATOR_RESENDS,
    PHONE,
    REPO,
    Api,
    Console,
    Seeded,
    Tenant,
    at,
    csp_violations,
    get_resending,
    no_horizontal_overflow,
    sign_in,
    tid,
)
from playwright.sync_api import Page, Response, expect

pytestmark = pytest.mark.browser

SECRET = re.compile(r"^cairn_[0-9A-Za-z]{43}$")


def test_signin_page_loads_clean(
    page: Page, dashboard_url: str, console: Console, screenshot: Callable[[Page, str], Path]
) -> None:
    response = page.goto(dashboard_url)
    assert response is not None
    assert response.ok, response
    csp = response.headers.get("content-security-policy", "")
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"):
        assert directive in csp, f"index.html is served without {directive!r}: {csp!r}"
    for asset, kind in (("app.js", "javascript"), ("app.css", "css")):
        answer = get_resending(page.request, urljoin(dashboard_url, f"/dashboard/{asset}"))
        assert answer.status == 200, f"{asset}: {answer.status} {answer.text()[:300]}"
        assert kind in answer.headers.get("content-type", ""), (
            f"{asset}: {answer.headers.get('content-type')}"
        )

    expect(page).to_have_url(re.compile(r"#/signin$"))
    expect(tid(page, "signin-key")).to_be_visible()
    expect(tid(page, "signin-key")).to_be_focused()
    expect(tid(page, "signout")).to_be_hidden()
    expect(tid(page, "error")).to_be_hidden()
    screenshot(page, "signin")

    # A key that is not one: the API's 401 is shown, and nothing is kept.
    tid(page, "signin-key").fill("cairn_" + "x" * 43)
    tid(page, "signin-submit").click()
    expect(tid(page, "error")).to_be_visible()
    expect(tid(page, "error")).to_contain_text("not accepted")
    expect(page).to_have_url(re.compile(r"#/signin$"))
    assert page.evaluate("sessionStorage.length") == 0
    console.expect_failure("/billing/balance", 401)

    # A signed-out visit to a page goes to sign-in.
    page.goto(at(dashboard_url, "/keys"))
    expect(page).to_have_url(re.compile(r"#/signin$"))

    assert csp_violations(page) == []
    console.assert_clean()


# The page's stylesheet and modules (functions/dashboard/assets, the page itself aside), by address.
ASSETS = sorted(
    f"/dashboard/{f.name}" for f in (REPO / "functions/dashboard/assets").iterdir() if f.name != "index.html"
)


def test_a_reload_revalidates_every_asset(cached_page: Page, dashboard_url: str, console: Console) -> None:
    """The assets carry an ETag and are served no-cache: a reload asks for each again and
    gets 304 Not Modified (the browser keeps its copy), and the page works as before."""
    page = cached_page
    answers: list[Response] = []
    page.on("response", lambda answer: answers.append(answer))

    def statuses(navigate: Callable[[], object]) -> dict[str, int]:
        """The status each asset got in a navigation. This page's requests are not routed,
        so a request the local gateway lost (its own 500) is not sent again: the whole
        navigation is then made again after a pause, as the Rust harness sends a request."""
        for pause in (*EMULATOR_RESENDS, None):
            answers.clear()
            navigate()
            lost = [a for a in answers if emulators_own_answer(a)]
            if not lost or pause is None:
                break
            console.messages.clear()  # what the page said of the asset it did not get
            console.page_errors.clear()
            time.sleep(pause)
        return {urlsplit(a.url).path: a.status for a in answers if urlsplit(a.url).path in ASSETS}

    first = statuses(lambda: page.goto(dashboard_url))
    assert sorted(first) == ASSETS, "the page asks for every asset"
    expect(tid(page, "signin-key")).to_be_visible()

    # Chromium writes its cache asynchronously: an asset of the first load it has not stored
    # yet is fetched whole on a reload. Reloads are made until every asset is revalidated,
    # at most three; an asset never answered 304 fails the test.
    revalidated = dict.fromkeys(ASSETS, 304)
    for _ in range(3):
        again = statuses(page.reload)
        if again == revalidated:
            break
    assert again == revalidated, "a reload revalidates every asset"
    expect(page).to_have_url(re.compile(r"#/signin$"))
    expect(tid(page, "signin-key")).to_be_visible()
    expect(tid(page, "signin-key")).to_be_focused()
    page.goto(at(dashboard_url, "/keys"))  # signed out: the router sends it to sign-in
    expect(page).to_have_url(re.compile(r"#/signin$"))
    assert csp_violations(page) == []
    console.assert_clean()


def emulators_own_answer(answer: Response) -> bool:
    """Whether an answer is the local gateway's own 500. Its body cannot be read here (the
    browser gives up on a module it did not get, and Playwright then has none to show), so
    it is told by its type: the gateway's is text/plain, a function's problem+json."""
    kind = answer.headers.get("content-type", "")
    return answer.status == 500 and not kind.startswith("application/problem+json")


def test_the_address_with_a_slash_opens_the_dashboard(
    page: Page, dashboard_url: str, tenant: Tenant, console: Console
) -> None:
    """/dashboard/ (typed or linked with the slash) is redirected to /dashboard, its #route kept."""
    with_slash = dashboard_url.split("#", 1)[0].rstrip("/") + "/"
    response = page.goto(with_slash + "#/keys")
    assert response is not None
    assert response.ok, response
    first = response.request.redirected_from
    assert first is not None, "the page was not redirected"
    assert first.url.split("#", 1)[0] == with_slash, "the page was not redirected"
    redirect = first.response()
    assert redirect is not None
    assert redirect.status == 308, redirect

    # Signed out: sign-in first, then the page asked for (#/keys, which the redirect kept).
    expect(page).to_have_url(re.compile(r"/dashboard#/signin$"))
    tid(page, "signin-key").fill(tenant.key)
    tid(page, "signin-submit").click()
    expect(page).to_have_url(re.compile(r"/dashboard#/keys$"))
    expect(tid(page, "nav-keys")).to_have_attribute("aria-current", "page")
    expect(tid(page, "key-row").first).to_be_visible()
    expect(page.locator("[aria-busy=true]")).to_have_count(0)

    assert csp_violations(page) == []
    console.assert_clean()


def test_dashboard_walkthrough(
    page: Page,
    dashboard_url: str,
    api: Api,
    tenant: Tenant,
    seeded: Seeded,
    console: Console,
    screenshot: Callable[[Page, str], Path],
) -> None:
    # ---- sign in: the overview, the home page; then the executions list
    sign_in(page, dashboard_url, tenant.key)
    assert page.evaluate("Object.keys(sessionStorage)") == ["cairn.apiKey"]
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    expect(tid(page, "nav-overview")).to_have_attribute("aria-current", "page")
    tid(page, "nav-executions").click()
    expect(tid(page, "nav-executions")).to_have_attribute("aria-current", "page")
    expect(tid(page, "executions-table")).to_be_visible()
    paused_row = tid(page, "execution-row", id=seeded.paused_id)
    expect(paused_row).to_be_visible()
    expect(tid(paused_row, "execution-status")).to_have_text("paused")
    expect(tid(tid(page, "execution-row", id=seeded.failed_id), "execution-status")).to_have_text("failed")
    screenshot(page, "executions")

    # filters live in the hash
    tid(page, "execution-filter-status").select_option("failed")
    tid(page, "execution-filter-submit").click()
    expect(page).to_have_url(re.compile(r"#/executions\?status=failed$"))
    # One row: not the list before (two rows) nor its loading state (none).
    expect(tid(page, "execution-row")).to_have_count(1)
    expect(tid(page, "execution-row", id=seeded.failed_id)).to_be_visible()
    expect(tid(page, "execution-row", id=seeded.paused_id)).to_have_count(0)
    page.goto(at(dashboard_url, "/executions"))

    # tags: a row's chip filters by its tag, the form adds one, an active tag's chip removes it
    tid(tid(page, "execution-row", id=seeded.failed_id), "tag-chip", tag="team:search").click()
    expect(page).to_have_url(re.compile(r"#/executions\?tag=team%3Asearch$"))
    expect(tid(page, "execution-row")).to_have_count(1)
    expect(tid(page, "execution-row", id=seeded.failed_id)).to_be_visible()
    screenshot(page, "executions-by-tag")
    tid(page, "execution-filter-tag").fill("model:offline")
    tid(page, "execution-filter-submit").click()
    expect(page).to_have_url(re.compile(r"tag=team%3Asearch&tag=model%3Aoffline$"))
    expect(tid(page, "active-tag")).to_have_count(2)
    expect(tid(page, "execution-row", id=seeded.failed_id)).to_be_visible()
    tid(page, "active-tag", tag="team:search").click()
    expect(page).to_have_url(re.compile(r"#/executions\?tag=model%3Aoffline$"))
    expect(tid(page, "active-tag")).to_have_count(1)
    expect(tid(page, "execution-row")).to_have_count(1)
    tid(page, "execution-filter-tag").fill("team:billing")
    tid(page, "execution-filter-submit").click()
    expect(page).to_have_url(re.compile(r"tag=model%3Aoffline&tag=team%3Abilling$"))
    expect(tid(page, "execution-row")).to_have_count(0)  # every tag must match: none has both
    expect(page.get_by_text("No executions match these filters.")).to_be_visible()
    page.goto(at(dashboard_url, "/executions"))

    # ---- one execution: fields, checkpoints, state
    tid(page, "execution-row", id=seeded.paused_id).get_by_role("link", name=seeded.paused_id).click()
    expect(page).to_have_url(re.compile(rf"#/executions/{seeded.paused_id}$"))
    expect(tid(page, "checkpoint-row")).to_have_count(2)  # the execution's page, not the list's last frame
    expect(tid(page, "execution-status")).to_have_text("paused")
    expect(tid(page, "execution-attempt")).to_have_text("1")
    first, second = seeded.checkpoint_ids
    expect(tid(page, "checkpoint-row", id=first)).to_have_attribute("data-sequence", "1")
    expect(tid(page, "checkpoint-row", id=second)).to_have_attribute("data-sequence", "2")
    expect(tid(page, "checkpoint-row", id=second)).to_have_attribute("data-current", "true")
    expect(tid(page, "execution-input")).to_contain_text('"ticket": 4711')

    tid(tid(page, "checkpoint-row", sequence=1), "view-state").click()
    expect(tid(page, "state-view")).to_be_visible()
    expect(tid(page, "state-view")).to_contain_text('"step": 1')
    expect(tid(page, "state-view")).to_have_attribute("data-checkpoint-id", first)
    expect(page).to_have_url(re.compile(rf"#/executions/{seeded.paused_id}\?checkpoint={first}$"))
    screenshot(page, "execution")

    # replay from the first checkpoint: Escape cancels, OK replays
    replay = tid(tid(page, "checkpoint-row", sequence=1), "replay-here")
    replay.click()
    expect(tid(page, "confirm-ok")).to_be_visible()
    expect(tid(page, "confirm-cancel")).to_be_focused()
    # the dialog says what the replay runs again: the step recorded after the first
    expect(tid(page, "replay-preview")).to_have_text(
        "Runs again 1 recorded checkpoint: steps draft-reply \u00d71; tool calls none recorded."
    )
    screenshot(page, "replay-preview")
    page.keyboard.press("Escape")
    expect(tid(page, "confirm-ok")).to_be_hidden()
    expect(tid(page, "execution-status")).to_have_text("paused")

    replay.click()
    tid(page, "confirm-ok").click()
    expect(tid(page, "execution-status")).to_have_text("running")
    expect(tid(page, "execution-attempt")).to_have_text("2")
    expect(tid(page, "notice")).to_contain_text("attempt 2")
    execution = api.call("GET", f"/executions/{seeded.paused_id}")
    assert (execution["status"], execution["attempt"]) == ("running", 2)

    # a replay of a running execution is refused: the API's detail is shown
    tid(tid(page, "checkpoint-row", sequence=1), "replay-here").click()
    tid(page, "confirm-ok").click()
    expect(tid(page, "error")).to_be_visible()
    expect(tid(page, "error")).not_to_be_empty()
    console.expect_failure(f"/executions/{seeded.paused_id}/replay", 409)

    # ---- failures: stats, list, one failure, resolve
    tid(page, "nav-failures").click()
    expect(page).to_have_url(re.compile(r"#/failures$"))
    expect(tid(page, "stats-open")).to_have_text("1")
    expect(tid(page, "stats-rate")).to_contain_text("%")
    failure_row = tid(page, "failure-row", id=seeded.failure_id)
    expect(tid(failure_row, "failure-status")).to_have_text("open")
    group_row = tid(page, "group-row").first
    expect(tid(group_row, "group-open")).to_have_text("1")
    expect(group_row).to_contain_text("boom")
    # its failures per hour over the last 24 hours: the one failure, made just now
    spark = tid(group_row, "group-sparkline")
    expect(spark).to_have_attribute("aria-label", "1 failure in the last 24 hours, at most 1 in one hour")
    expect(spark.locator("rect.spark-bar")).to_have_count(1)
    expect(spark.locator("rect")).to_have_count(24)
    screenshot(page, "failures")
    # a failure's cause: the failures of its group (here, the one failure); ignore them all
    tid(failure_row, "failure-same-cause").click()
    expect(page).to_have_url(re.compile(r"#/failures\?group_id=fgrp_[0-9a-f]{32}$"))
    expect(tid(page, "failure-group")).to_contain_text("boom")
    expect(tid(page, "failure-row")).to_have_count(1)
    # replay the group's failed runs in bulk: a dry run's count and cost in the
    # confirmation, then the job's page, live until the job (run by the relay) ends
    tid(page, "group-replay").click()
    expect(tid(page, "confirm-ok")).to_be_visible()
    expect(page.locator("#confirm")).to_contain_text("Replay 1 failed run?")
    expect(page.locator("#confirm")).to_contain_text("this costs 1 credit.")
    screenshot(page, "bulk-confirm")
    tid(page, "confirm-ok").click()
    expect(page).to_have_url(re.compile(r"#/bulk/bulk_[0-9a-f]{32}$"))
    expect(tid(page, "bulk-status")).to_have_text("completed", timeout=60_000)
    expect(tid(page, "bulk-counts")).to_contain_text("1 of 1 reached: 1 done, 0 skipped, 0 failed")
    screenshot(page, "bulk-job")
    replayed = api.call("GET", f"/executions/{seeded.failed_id}")
    assert (replayed["status"], replayed["attempt"]) == ("running", 2)
    page.go_back()
    expect(tid(page, "failure-group")).to_contain_text("boom")
    tid(page, "group-ignore").click()
    expect(tid(page, "confirm-ok")).to_be_visible()
    tid(page, "confirm-ok").click()
    failure_row = tid(page, "failure-row", id=seeded.failure_id)
    expect(tid(failure_row, "failure-status")).to_have_text("ignored")
    screenshot(page, "failure-group")
    failure_row.get_by_role("link", name=seeded.failure_id).click()
    expect(page).to_have_url(re.compile(rf"#/failures/{seeded.failure_id}$"))
    expect(tid(page, "failure-traceback")).to_have_text("Traceback: boom")
    expect(page.get_by_text("boom", exact=False).first).to_be_visible()
    screenshot(page, "failure")
    tid(page, "failure-resolve").click()
    expect(tid(page, "failure-status")).to_have_text("resolved")
    expect(tid(page, "failure-resolve")).to_be_disabled()
    assert api.call("GET", f"/failures/{seeded.failure_id}")["status"] == "resolved"

    # ---- API keys: create (secret once), copy, revoke; the last key cannot go
    tid(page, "nav-keys").click()
    expect(page).to_have_url(re.compile(r"#/keys$"))
    expect(tid(page, "key-row").first).to_be_visible()
    screenshot(page, "keys")
    tid(page, "key-create-name").fill("browser test key")
    tid(page, "key-create-submit").click()
    secret_box = tid(page, "key-secret")
    expect(secret_box).to_be_visible()
    secret = secret_box.inner_text().strip()
    assert SECRET.match(secret), "the secret shown is not a Cairn key"
    key_id = secret_box.get_attribute("data-key-id")
    assert key_id
    assert api.status_with_key(secret) == 200
    tid(page, "key-copy").click()
    expect(tid(page, "key-copy")).to_have_text(re.compile(r"^(Copied|Selected)"))
    screenshot(page, "keys-created")

    new_row = tid(page, "key-row", id=key_id)
    expect(new_row).to_have_attribute("data-live", "true")
    tid(new_row, "key-revoke").click()
    expect(tid(page, "confirm-ok")).to_be_visible()
    tid(page, "confirm-ok").click()
    expect(new_row).to_have_attribute("data-live", "false")
    assert api.status_with_key(secret) == 401

    # A restricted key: executions read only; its row says so and the API holds it to it.
    tid(page, "key-create-name").fill("runs reader")
    for area in ["workflows", "checkpoints", "failures", "billing", "keys", "webhooks"]:
        tid(page, f"key-scope-{area}").select_option("")
    tid(page, "key-scope-executions").select_option("read")
    tid(page, "key-create-submit").click()
    expect(secret_box).not_to_have_attribute("data-key-id", key_id)  # the new key's box
    reader = secret_box.inner_text().strip()
    reader_id = secret_box.get_attribute("data-key-id")
    expect(tid(tid(page, "key-row", id=reader_id), "key-scopes")).to_have_text("executions:read")
    assert api.status_with_key(reader, "/executions") == 200
    assert api.status_with_key(reader, "/billing/balance") == 403
    screenshot(page, "keys-restricted")
    tid(page, "key-row", id=reader_id).get_by_role("button", name="Revoke").click()
    tid(page, "confirm-ok").click()
    expect(tid(page, "key-row", id=reader_id)).to_have_attribute("data-live", "false")

    # A key for a coding agent: every area read only, no keys; the MCP server's address.
    tid(page, "key-preset-agent").click()
    expect(tid(page, "key-create-name")).to_have_value("coding agent")
    expect(tid(page, "key-scope-keys")).to_have_value("")
    tid(page, "key-create-submit").click()
    expect(secret_box).not_to_have_attribute("data-key-id", reader_id)
    agent = secret_box.inner_text().strip()
    agent_id = secret_box.get_attribute("data-key-id")
    expect(tid(page, "key-mcp-url")).to_have_text(re.compile(r"^http://127\.0\.0\.1:\d+/api/v1/mcp$"))
    agent_scopes = tid(tid(page, "key-row", id=agent_id), "key-scopes")
    expect(agent_scopes).to_contain_text("executions:read")
    shown = sorted(agent_scopes.inner_text().split())
    areas = ["billing", "checkpoints", "executions", "failures", "webhooks", "workflows"]
    assert shown == [f"{area}:read" for area in areas], shown
    assert api.status_with_key(agent, "/failures") == 200
    assert api.status_with_key(agent, "/keys") == 403
    screenshot(page, "keys-agent")
    tid(page, "key-row", id=agent_id).get_by_role("button", name="Revoke").click()
    tid(page, "confirm-ok").click()
    expect(tid(page, "key-row", id=agent_id)).to_have_attribute("data-live", "false")

    live = tid(page, "key-row", live="true")
    expect(live).to_have_count(1)
    tid(live, "key-revoke").click()
    tid(page, "confirm-ok").click()
    expect(tid(page, "error")).to_be_visible()
    expect(tid(page, "error")).not_to_be_empty()
    console.expect_failure("/keys/", 409)
    expect(tid(page, "signout")).to_be_visible()  # still signed in
    assert api.status_with_key(tenant.key) == 200

    # ---- workflows: list, create, publish
    tid(page, "nav-workflows").click()
    expect(page).to_have_url(re.compile(r"#/workflows$"))
    expect(tid(page, "workflow-row", id=seeded.workflow_id)).to_be_visible()
    screenshot(page, "workflows")
    tid(page, "workflow-create-name").fill("Made in the browser")
    tid(page, "workflow-create-type").select_option("langgraph")
    tid(page, "workflow-create-definition").fill('{"nodes": ["plan", "act"]}')
    tid(page, "workflow-create-submit").click()
    expect(page).to_have_url(re.compile(r"#/workflows/wf_"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Made in the browser")
    expect(tid(page, "workflow-status").first).to_have_text("draft")
    tid(page, "workflow-publish").click()
    expect(tid(page, "workflow-status").first).to_have_text("published")
    screenshot(page, "workflow")

    # ---- billing: balance, transactions, subscription, top-up
    console.expect_failure("/billing/subscriptions/status", 404)  # never subscribed
    tid(page, "nav-billing").click()
    expect(page).to_have_url(re.compile(r"#/billing$"))
    credits = api.call("GET", "/billing/balance")["credits_balance"]
    expect(tid(page, "balance")).to_have_text(f"{credits:,}")
    expect(tid(page, "transaction-row").first).to_be_visible()
    expect(tid(page, "plan-pro")).to_be_visible()
    # A top-up paid by card: Stripe.js (localstripe's stand-in, from the CSP's one extra
    # origin) mounts its card Element; a declined card is Stripe's message beside the
    # form, which stays usable; a good card pays, and the webhook's credits appear.
    tid(page, "topup-amount").fill("5")
    tid(page, "topup-submit").click()
    card = tid(page, "card-element")
    expect(card).to_be_visible()

    def type_card(number: str) -> None:
        typed = {"number": number, "exp_month": "12", "exp_year": "34", "cvc": "123", "postal_code": "75001"}
        for field, value in typed.items():
            card.get_by_placeholder(field, exact=True).fill(value)

    type_card("4000000000000341")  # declined when charged
    console.expect_failure("/confirm_card", 402)
    tid(page, "card-pay").click()
    expect(tid(page, "card-error")).to_contain_text("declined")
    assert api.call("GET", "/billing/balance")["credits_balance"] == credits, "a declined card adds nothing"
    screenshot(page, "billing-declined")
    type_card("4242424242424242")
    tid(page, "card-pay").click()
    expect(tid(page, "card-paid")).to_contain_text("Paid $5.00")
    expect(tid(page, "balance")).to_have_text(f"{credits + 500:,}")
    expect(tid(page, "transaction-row").first).to_contain_text("topup")
    screenshot(page, "billing")

    # ---- the phone width
    page.set_viewport_size(PHONE)
    page.goto(at(dashboard_url, "/executions"))
    expect(tid(page, "execution-row", id=seeded.paused_id)).to_be_visible()
    expect(tid(page, "nav-keys")).to_be_visible()
    no_horizontal_overflow(page)
    screenshot(page, "executions-390")
    page.goto(at(dashboard_url, f"/executions/{seeded.paused_id}"))
    expect(tid(page, "checkpoint-row")).to_have_count(2)
    no_horizontal_overflow(page)
    screenshot(page, "execution-390")
    page.set_viewport_size(DESKTOP)

    # ---- sign out
    tid(page, "signout").click()
    expect(page).to_have_url(re.compile(r"#/signin$"))
    expect(tid(page, "signin-key")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    page.goto(at(dashboard_url, "/executions"))
    expect(page).to_have_url(re.compile(r"#/signin$"))

    assert csp_violations(page) == []
    console.assert_clean()


def test_revoked_key_goes_back_to_signin(
    page: Page, dashboard_url: str, api: Api, seeded: Seeded, console: Console
) -> None:
    """Any 401 ends the session: a key revoked elsewhere sends the page to sign-in."""
    made = api.call("POST", "/keys", json={"name": "revoked elsewhere"}, expect=(201,))
    sign_in(page, dashboard_url, made["key"])
    api.call("DELETE", f"/keys/{made['id']}", expect=(204,))
    console.expect_failure("/api/v1/", 401)
    tid(page, "nav-failures").click()
    expect(page).to_have_url(re.compile(r"#/signin$"))
    expect(tid(page, "error")).to_be_visible()
    expect(tid(page, "error")).to_contain_text("Sign in again")
    assert page.evaluate("sessionStorage.length") == 0
    assert csp_violations(page) == []
    console.assert_clean()


class Receiver:
    """A webhook receiver on a loopback port (the local stack allows loopback endpoints),
    answering ``statuses`` first, then 204."""

    def __init__(self, statuses: list[int]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.received: list[bytes] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.received.append(self.rfile.read(int(self.headers.get("content-length", "0"))))
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_the_webhooks_page_shows_a_secret_once_and_each_deliverys_attempts(
    page: Page,
    dashboard_url: str,
    tenant: Tenant,
    console: Console,
    screenshot: Callable[[Page, str], Path],
) -> None:
    receiver = Receiver([500, 500])
    try:
        sign_in(page, dashboard_url, tenant.key)
        tid(page, "nav-webhooks").click()
        expect(page).to_have_url(re.compile(r"#/webhooks$"))
        tid(page, "webhook-create-url").fill(receiver.url)
        page.locator('[data-testid="webhook-create-type"][value="failure.ignored"]').check()
        tid(page, "webhook-create-submit").click()
        secret = tid(page, "webhook-secret")
        expect(secret).to_be_visible()
        assert re.match(r"^whsec_[A-Za-z0-9+/]{43}=$", secret.inner_text().strip())
        endpoint_id = secret.get_attribute("data-webhook-id")
        row = tid(page, "webhook-row", id=endpoint_id)
        expect(row).to_be_visible()
        expect(tid(row, "webhook-status")).to_have_text("enabled")
        screenshot(page, "webhooks")
        tid(page, "webhook-secret-dismiss").click()
        expect(tid(page, "webhook-secret")).to_have_count(0)

        # A test event: the receiver answers 500 twice (the first attempt and the retry 5 s
        # later), so the delivery waits 5 minutes for its next one.
        tid(row, "webhook-test").click()
        expect(tid(page, "notice")).to_contain_text("Test event")
        tid(row, "webhook-link").click()
        expect(page).to_have_url(re.compile(rf"#/webhooks/{endpoint_id}$"))
        delivery = tid(page, "delivery-row").first
        for _ in range(60):
            if delivery.count() and tid(delivery, "delivery-attempts").inner_text().strip() == "2":
                break
            page.wait_for_timeout(250)
            tid(page, "deliveries-refresh").click()
        expect(tid(delivery, "delivery-attempts")).to_have_text("2")
        expect(tid(delivery, "delivery-last")).to_have_text("500")
        expect(tid(delivery, "delivery-status")).to_have_text("pending")
        screenshot(page, "webhook-deliveries")

        # Retry now: due at once, delivered by the next sweep.
        tid(delivery, "delivery-retry").click()
        expect(tid(page, "notice")).to_contain_text("due again")
        for _ in range(60):
            if tid(page, "delivery-row", status="succeeded").count():
                break
            page.wait_for_timeout(250)
            tid(page, "deliveries-refresh").click()
        done = tid(page, "delivery-row", status="succeeded")
        expect(done).to_have_count(1)
        expect(tid(done, "delivery-last")).to_have_text("204")
        assert len(receiver.received) == 3

        # Disable it from the list.
        tid(page, "nav-webhooks").click()
        row = tid(page, "webhook-row", id=endpoint_id)
        tid(row, "webhook-toggle").click()
        expect(row).to_have_attribute("data-enabled", "false")
        expect(tid(row, "webhook-status")).to_have_text("disabled")
        assert csp_violations(page) == []
        console.assert_clean()
    finally:
        receiver.server.shutdown()


def test_the_settings_page_sets_retention_and_an_ended_execution_shows_its_expiry(
    page: Page,
    dashboard_url: str,
    api_url: str,
    admin: Callable[..., str],
    console: Console,
    screenshot: Callable[[Page, str], Path],
) -> None:
    # A tenant of its own: its retention is this test's alone.
    tenant_id = admin("tenant", "create", "--name", "dashboard-retention")
    key = admin("key", "create", "--tenant", tenant_id)
    admin("credits", "grant", "--tenant", tenant_id, "--credits", "10")
    own = Api(api_url, key)
    try:
        sign_in(page, dashboard_url, key)
        tid(page, "nav-settings").click()
        expect(page).to_have_url(re.compile(r"#/settings$"))
        expect(tid(page, "retention-summary")).to_contain_text("kept 30 days")
        expect(tid(page, "retention-checkpoint-days")).to_be_hidden()

        # More than the plan allows: the API's field message, nothing saved.
        console.expect_failure("/api/v1/settings/retention", 422)
        tid(page, "retention-days").fill("45")
        tid(page, "retention-save").click()
        expect(tid(page, "error")).to_contain_text("executions_days")
        assert own.call("GET", "/settings/retention")["executions_days"] is None

        tid(page, "retention-days").fill("7")
        tid(page, "retention-checkpoints").select_option("days")
        expect(tid(page, "retention-checkpoint-days")).to_be_visible()
        tid(page, "retention-checkpoint-days").fill("2")
        tid(page, "retention-save").click()
        expect(tid(page, "notice")).to_contain_text("Retention saved")
        expect(tid(page, "retention-summary")).to_contain_text("kept 7 days")
        saved = own.call("GET", "/settings/retention")
        assert (saved["executions_days"], saved["checkpoints"], saved["checkpoints_days"]) == (7, "days", 2)
        screenshot(page, "settings")

        # An execution that ends now shows when it expires.
        wf = own.call("POST", "/workflows", json={"name": "kept", "workflow_type": "custom"}, expect=(201,))
        e = own.call("POST", "/executions", json={"workflow_id": wf["id"]}, expect=(201,))
        done = own.call("POST", f"/executions/{e['id']}/complete", json={})
        page.goto(f"{dashboard_url}#/executions/{e['id']}")
        expires = tid(page, "execution-expires")
        expect(expires).to_be_visible()
        assert expires.locator("time").get_attribute("datetime") == done["expires_at"]

        # A workflow's own retention shows on its page; the tenant's otherwise.
        page.goto(f"{dashboard_url}#/workflows/{wf['id']}")
        expect(tid(page, "workflow-retention")).to_contain_text("the tenant's")
        body = {"name": "short-lived", "workflow_type": "custom", "retention": {"executions_days": 3}}
        short = own.call("POST", "/workflows", json=body, expect=(201,))
        page.goto(f"{dashboard_url}#/workflows/{short['id']}")
        expect(tid(page, "workflow-retention")).to_contain_text("its own: kept 3 days")
        assert csp_violations(page) == []
        console.assert_clean()
    finally:
        own.close()


def test_the_settings_page_deletes_the_account_after_its_typed_confirmation(
    page: Page,
    dashboard_url: str,
    api_url: str,
    admin: Callable[..., str],
    console: Console,
) -> None:
    """Delete account: the button waits for the exact phrase and a last question (Cancel
    changes nothing); then every key of the tenant is revoked and the page is back at
    sign-in saying what happens next."""
    tenant_id = admin("tenant", "create", "--name", "dashboard-deletion")
    key = admin("key", "create", "--tenant", tenant_id)
    other = admin("key", "create", "--tenant", tenant_id)
    own = Api(api_url, key)
    try:
        sign_in(page, dashboard_url, key)
        tid(page, "nav-settings").click()
        expect(page).to_have_url(re.compile(r"#/settings$"))
        submit = tid(page, "deletion-submit")
        expect(submit).to_be_disabled()
        tid(page, "deletion-confirm").fill("delete my")
        expect(submit).to_be_disabled()
        tid(page, "deletion-confirm").fill("delete my account")
        expect(submit).to_be_enabled()
        submit.click()
        expect(tid(page, "confirm-ok")).to_be_visible()
        tid(page, "confirm-cancel").click()
        expect(tid(page, "confirm-ok")).to_be_hidden()
        assert own.status_with_key(key) == 200, "Cancel asked for nothing"

        submit.click()
        tid(page, "confirm-ok").click()
        expect(page).to_have_url(re.compile(r"#/signin$"))
        expect(tid(page, "notice")).to_contain_text("deletion was asked for")
        expect(tid(page, "notice")).to_contain_text("2 keys are revoked")
        assert (own.status_with_key(key), own.status_with_key(other)) == (401, 401)
        assert page.evaluate("sessionStorage.length") == 0
        assert csp_violations(page) == []
        console.assert_clean()
    finally:
        own.close()
