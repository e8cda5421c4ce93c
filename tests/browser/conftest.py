"""Fixtures of the dashboard's browser test.

Environment:

- ``CAIRN_DASHBOARD_URL``: the dashboard page, e.g. ``http://127.0.0.1:3000/dashboard``.
- ``CAIRN_API_URL``: the API's base URL, e.g. ``http://127.0.0.1:3000/api/v1``.
- ``CAIRN_TEST_ADMIN``: the ``cairn-admin`` binary (a path, or a command line such as
  ``cargo run -q -p infra --bin cairn-admin --``). It runs with this process's
  environment, so ``TABLE_PREFIX``, ``AWS_REGION``, credentials and
  ``AWS_ENDPOINT_URL_DYNAMODB`` must point at the stack's tables.
- ``CHROMIUM``: the browser binary (default ``/usr/bin/chromium``, Debian's package; the
  test never downloads a browser).
- ``CAIRN_SCREENSHOTS``: where screenshots go (default ``target/dashboard-screenshots``,
  relative paths from the repository root).

Without the first three (or without the browser) the tests are skipped, unless
``CAIRN_BROWSER_REQUIRED=1``, which turns the skip into a failure (for CI).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    APIRequestContext,
    APIResponse,
    Browser,
    ConsoleMessage,
    Error,
    Locator,
    Page,
    expect,
    sync_playwright,
)

REPO = Path(__file__).resolve().parents[2]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

# The local stack's first answers can be slow (cargo lambda watch starting functions).
expect.set_options(timeout=20_000)


def _unavailable(reason: str) -> None:
    if os.environ.get("CAIRN_BROWSER_REQUIRED") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        _unavailable(
            f"{name} is not set: the browser test needs the running stack (see tests/browser/conftest.py)"
        )
    return value


# ------------------------------------------------------------------ the stack


@pytest.fixture(scope="session")
def dashboard_url() -> str:
    # As given: the page is served at /dashboard (/dashboard/ redirects there); hash
    # routes are appended to it, and the assets are absolute (/dashboard/app.js).
    return _env("CAIRN_DASHBOARD_URL")


@pytest.fixture(scope="session")
def api_url() -> str:
    return _env("CAIRN_API_URL").rstrip("/")


@pytest.fixture(scope="session")
def admin() -> Callable[..., str]:
    command = shlex.split(_env("CAIRN_TEST_ADMIN"))

    def run(*args: str) -> str:
        done = subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=300, check=False, cwd=REPO
        )
        if done.returncode != 0:
            raise AssertionError(
                f"cairn-admin {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
            )
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        assert lines, f"cairn-admin {' '.join(args)} printed nothing"
        return lines[-1]

    return run


@dataclass
class Tenant:
    id: str
    key: str = field(repr=False)  # never in a failure's output (the run's logs are scanned for keys)


@pytest.fixture(scope="session")
def tenant(admin: Callable[..., str]) -> Tenant:
    """A fresh tenant with one live key and 100 credits."""
    tenant_id = admin("tenant", "create", "--name", f"dashboard-test-{uuid.uuid4().hex[:8]}")
    assert tenant_id.startswith("ten_"), tenant_id
    key = admin("key", "create", "--tenant", tenant_id)
    assert key.startswith("cairn_"), "cairn-admin key create printed something else than a key"
    admin("credits", "grant", "--tenant", tenant_id, "--credits", "100")
    return Tenant(tenant_id, key)


class Api:
    """The API through httpx, authenticated with one key."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.client = httpx.Client(base_url=base_url, headers={"X-API-Key": key}, timeout=30.0)

    def call(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any) -> Any:
        # cargo lambda watch rarely answers a request with a 500 of its own (never a
        # function's problem+json); as the Rust harness does (docs/testing.md), such a GET or POST is
        # sent again after a growing pause. Every POST carries an Idempotency-Key, so a POST
        # sent again runs at most once.
        if method == "POST":
            kwargs["headers"] = {
                "Idempotency-Key": f"browser-test-{uuid.uuid4()}",
                **kwargs.get("headers", {}),
            }
        response = self.client.request(method, path, **kwargs)
        for pause in EMULATOR_RESENDS:
            if method not in ("GET", "POST") or not emulators_own_500(response.status_code, response.content):
                break
            time.sleep(pause)
            response = self.client.request(method, path, **kwargs)
        assert response.status_code in expect, (
            f"{method} {path}: {response.status_code} {response.text[:800]}"
        )
        return response.json() if response.content else None

    def status_with_key(self, key: str, path: str = "/billing/balance") -> int:
        """The status of a GET made with another key (e.g. a revoked one)."""
        with httpx.Client(base_url=self.base_url, timeout=30.0) as other:
            return other.get(path, headers={"X-API-Key": key}).status_code

    def close(self) -> None:
        self.client.close()


@pytest.fixture(scope="session")
def api(api_url: str, tenant: Tenant) -> Iterator[Api]:
    client = Api(api_url, tenant.key)
    yield client
    client.close()


def wait_until(what: str, check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Lists read indexes that DynamoDB fills within about a second: wait for them."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@dataclass
class Seeded:
    workflow_id: str
    workflow_name: str
    paused_id: str
    checkpoint_ids: list[str]
    failed_id: str
    failure_id: str
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="session")
def seeded(api: Api) -> Seeded:
    """A workflow; an execution with two checkpoints, paused (tagged team:billing); another
    execution, failed (tagged team:search and model:offline)."""
    name = "Support triage (browser test)"
    wf = api.call(
        "POST",
        "/workflows",
        json={
            "name": name,
            "workflow_type": "crewai",
            "description": "Made by tests/browser",
            "definition": {"agents": ["triager", "writer"]},
        },
        expect=(201,),
    )

    paused = api.call(
        "POST",
        "/executions",
        json={"workflow_id": wf["id"], "input": {"ticket": 4711}, "tags": {"team": "billing"}},
        expect=(201,),
    )
    checkpoints = []
    for step, cp_name in enumerate(["plan", "draft-reply"], start=1):
        cp = api.call(
            "POST",
            "/checkpoints",
            json={
                "execution_id": paused["id"],
                "name": cp_name,
                "state": {"step": step, "notes": [f"{cp_name} done"]},
            },
            expect=(201,),
        )
        checkpoints.append(cp["id"])
    api.call("POST", f"/executions/{paused['id']}/pause", expect=(200,))

    failed = api.call(
        "POST",
        "/executions",
        json={
            "workflow_id": wf["id"],
            "input": {"ticket": 4712},
            "tags": {"team": "search", "model": "offline"},
        },
        expect=(201,),
    )
    api.call(
        "POST",
        f"/executions/{failed['id']}/fail",
        json={"error_type": "AGENT_ERROR", "message": "boom", "details": {"traceback": "Traceback: boom"}},
        expect=(200,),
    )

    failures: list[dict[str, Any]] = []

    def failure_listed() -> bool:
        failures[:] = api.call("GET", "/failures", params={"status": "open"})["items"]
        return any(f["execution_id"] == failed["id"] for f in failures)

    def executions_listed() -> bool:
        def listed(**params: str) -> set[str]:
            return {
                e["id"] for e in api.call("GET", "/executions", params={"page_size": 100, **params})["items"]
            }

        return (
            {paused["id"], failed["id"]} <= listed()
            and paused["id"] in listed(status="paused")
            and failed["id"] in listed(status="failed")
        )

    wait_until("the executions in GET /executions", executions_listed)
    wait_until("the failure in GET /failures", failure_listed)
    failure_id = next(f["id"] for f in failures if f["execution_id"] == failed["id"])
    return Seeded(wf["id"], name, paused["id"], checkpoints, failed["id"], failure_id)


# ------------------------------------------------------------------ the browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(executable).exists():
        _unavailable(f"no Chromium at {executable} (apt-get install chromium, or set CHROMIUM)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Console:
    """What the page said: console messages, uncaught errors and CSP violations."""

    messages: list[ConsoleMessage] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    # (url fragment, status) of API answers a step expects to be errors, which Chromium
    # logs as "Failed to load resource" (e.g. the subscription status's 404 for a tenant
    # that never subscribed).
    expected_failures: list[tuple[str, int | None]] = field(default_factory=list)

    def expect_failure(self, url_fragment: str, status: int | None = None) -> None:
        self.expected_failures.append((url_fragment, status))

    def _expected(self, message: ConsoleMessage) -> bool:
        text = message.text
        if not text.startswith("Failed to load resource: the server responded with a status of"):
            return False
        url = (message.location or {}).get("url", "")
        return any(
            fragment in url and (status is None or f"status of {status} " in text)
            for fragment, status in self.expected_failures
        )

    def problems(self) -> list[str]:
        found = [f"pageerror: {e}" for e in self.page_errors]
        for message in self.messages:
            csp = "Content Security Policy" in message.text or "Content-Security-Policy" in message.text
            if csp or (message.type == "error" and not self._expected(message)):
                where = (message.location or {}).get("url", "")
                found.append(f"console.{message.type}: {message.text} ({where})")
        return found

    def assert_clean(self) -> None:
        problems = self.problems()
        assert not problems, "the page logged errors:\n" + "\n".join(problems)


# Records CSP violations in the page itself too (Playwright injects init scripts through
# the DevTools protocol, so the page's CSP does not block this one).
CSP_RECORDER = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${where})`);
});
"""


@pytest.fixture
def console() -> Console:
    return Console()


@contextmanager
def _new_page(browser: Browser, console: Console, dashboard_url: str, *, retry_lost: bool) -> Iterator[Page]:
    """A page in a context of its own, its console recorded in ``console``."""
    context = browser.new_context(viewport=DESKTOP, device_scale_factor=1, locale="en-US", timezone_id="UTC")
    origin = httpx.URL(dashboard_url)
    # Without the permission, the Copy button falls back to selecting the text.
    with suppress(Error):
        context.grant_permissions(
            ["clipboard-read", "clipboard-write"], origin=f"{origin.scheme}://{origin.netloc.decode()}"
        )
    context.add_init_script(CSP_RECORDER)
    context.set_default_timeout(20_000)
    if retry_lost:
        # cargo lambda watch rarely answers a request with a 500 of its own (never a
        # function's problem+json); as the Rust harness does (docs/testing.md), a GET or POST that gets one
        # is sent again (at most twice) before the page sees it, a POST with an
        # Idempotency-Key added on its first try, so that it runs at most once.
        context.route("**/*", _retry_the_emulators_own_500)
    pg = context.new_page()
    pg.on("console", lambda message: console.messages.append(message))
    pg.on("pageerror", lambda error: console.page_errors.append(str(error)))
    yield pg
    # A request still in flight when the test ends would have its handler read an answer
    # that closing the context disposes ("Response has been disposed"): stop routing
    # first, without waiting for such handlers and ignoring what they raise afterwards.
    context.unroute_all(behavior="ignoreErrors")
    context.close()


#: A page of its own context (a second visitor, a shared link opened signed out).
new_page = _new_page


@pytest.fixture
def page(browser: Browser, console: Console, dashboard_url: str) -> Iterator[Page]:
    with _new_page(browser, console, dashboard_url, retry_lost=True) as pg:
        yield pg


@pytest.fixture
def cached_page(browser: Browser, console: Console, dashboard_url: str) -> Iterator[Page]:
    """A page whose HTTP cache works: its requests are not routed (Chromium's cache is off
    while Playwright routes them), so the local gateway's own 500 reaches the page."""
    with _new_page(browser, console, dashboard_url, retry_lost=False) as pg:
        yield pg


EMULATOR_500 = b'{"type":"https://httpstatuses.com/500"'
#: The pauses (seconds) before each sending again of a request the local gateway lost,
#: as the Rust harness's (tests/src/lib.rs): the heavier the machine's load, the likelier
#: a loss, so a request is not sent again at once, while the load that lost it lasts.
EMULATOR_RESENDS = (0.25, 0.5, 1.0, 2.0)


def emulators_own_500(status: int, body: bytes) -> bool:
    """Whether an answer is the local gateway's own 500 (never a function's problem+json)."""
    return status == 500 and body.startswith(EMULATOR_500)


def _retry_the_emulators_own_500(route: Any) -> None:
    request = route.request
    headers = dict(request.headers)
    # The gateway's 500 is the local API's; POSTs elsewhere (localstripe) go as they are.
    resend = request.method == "GET" or (request.method == "POST" and "/api/v1/" in request.url)
    if resend and request.method == "POST" and not any(name.lower() == "idempotency-key" for name in headers):
        headers["idempotency-key"] = f"browser-test-{uuid.uuid4()}"
    # A redirect goes to the page as it came (the browser follows it, its URL changing), not
    # followed here, which would serve the target's answer at the first address.
    response = route.fetch(headers=headers, max_redirects=0)
    for pause in EMULATOR_RESENDS:
        if not resend or not emulators_own_500(response.status, response.body()):
            break
        time.sleep(pause)
        response = route.fetch(headers=headers, max_redirects=0)
    route.fulfill(response=response)


def get_resending(request: APIRequestContext, url: str) -> APIResponse:
    """A GET through Playwright's own client (never routed), sent again as a routed
    request is when the local gateway loses its answer."""
    answer = request.get(url)
    for pause in EMULATOR_RESENDS:
        if not emulators_own_500(answer.status, answer.body()):
            break
        time.sleep(pause)
        answer = request.get(url)
    return answer


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    configured = Path(os.environ.get("CAIRN_SCREENSHOTS", "target/dashboard-screenshots"))
    directory = configured if configured.is_absolute() else REPO / configured
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def screenshot(screenshot_dir: Path) -> Callable[[Page, str], Path]:
    def take(pg: Page, name: str) -> Path:
        path = screenshot_dir / f"{name}.png"
        pg.screenshot(path=str(path), full_page=True)
        return path

    return take


# ---- helpers of the test files


def tid(page: Page | Locator, testid: str, **data: object) -> Locator:
    """The element(s) with data-testid=testid and data-<name>=value for each keyword."""
    selector = f'[data-testid="{testid}"]' + "".join(
        f'[data-{k.replace("_", "-")}="{v}"]' for k, v in data.items()
    )
    return page.locator(selector)


def at(dashboard_url: str, route: str) -> str:
    """The dashboard's URL with a hash route (works for .../dashboard and .../dashboard/)."""
    return dashboard_url.split("#", 1)[0] + "#" + route


def csp_violations(page: Page) -> list[str]:
    return page.evaluate("window.__cspViolations || []")


def no_horizontal_overflow(page: Page) -> None:
    """At phone width the page itself never scrolls sideways (tables scroll in their box)."""
    widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"the page is {widths[0]} px wide at {widths[1]} px"


def sign_in(page: Page, dashboard_url: str, key: str) -> None:
    page.goto(dashboard_url)
    expect(page).to_have_url(re.compile(r"#/signin$"))
    tid(page, "signin-key").fill(key)
    tid(page, "signin-submit").click()
    expect(page).to_have_url(re.compile(r"#/overview$"))
    expect(tid(page, "signout")).to_be_visible()
    # Signed in means the first page has loaded too: a test that changes the key's state
    # next must not race that page's own requests.
    expect(page.locator("[aria-busy=true]")).to_have_count(0)
