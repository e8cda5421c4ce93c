"""Fixtures of the live tests: the stack ``make test`` starts (``CAIRN_API_URL``) and
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own. Live tests are skipped without them."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from cairn import AsyncCairn, Cairn

from . import resending

ADMIN = os.environ.get("CAIRN_TEST_ADMIN")
URL = os.environ.get("CAIRN_API_URL")

if URL:
    resending.install()


def admin(*args: str) -> str:
    if not ADMIN or not URL:
        pytest.skip("the live stack is not running (make test starts it)")
    return subprocess.run([ADMIN, *args], check=True, capture_output=True, text=True).stdout.strip()


def tenant_key(credits: int = 100, *, name: str = "python client") -> str:
    """The API key of a new tenant with ``credits`` (the framework suites use it too)."""
    tenant = admin("tenant", "create", "--name", name)
    api_key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", str(credits))
    return api_key


class Requests:
    """The HTTP requests a client sent (its httpx ``request`` hook; the local gateway's
    lost answers sent again below it are not counted)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def hook(self, request: httpx.Request) -> None:
        self.sent.append(f"{request.method} {request.url.path}")

    async def async_hook(self, request: httpx.Request) -> None:
        self.hook(request)

    def __len__(self) -> int:
        return len(self.sent)

    def clear(self) -> None:
        self.sent.clear()


@pytest.fixture
def key() -> str:
    """The API key of a new tenant with 100 credits."""
    return tenant_key()


@pytest.fixture
def client(key: str) -> Iterator[Cairn]:
    with Cairn(key, base_url=URL) as c:
        yield c


# ---- shared by the async framework suites (tests_agent_framework, tests_autogen, ...),
# which import them into their conftest ----


@pytest.fixture
def requests_sent() -> Requests:
    return Requests()


@pytest.fixture
async def async_client(key: str, requests_sent: Requests) -> AsyncIterator[AsyncCairn]:
    """An ``AsyncCairn`` with ``key``, counting its requests in ``requests_sent``."""
    http = httpx.AsyncClient(timeout=60, event_hooks={"request": [requests_sent.async_hook]})
    async with AsyncCairn(key, base_url=URL, http_client=http) as c:
        yield c


@pytest.fixture
def workflow_name() -> str:
    """A Cairn workflow of the test's own."""
    return f"suite-{uuid.uuid4().hex[:12]}"


async def run_cairn(api_key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``cairn`` command line of this venv with ``api_key`` against the stack (the
    framework suites roll back with it, as an operator would), in a worker thread."""
    env = {**os.environ, "CAIRN_API_URL": URL or "", "CAIRN_API_KEY": api_key}
    command = [str(Path(sys.executable).parent / "cairn"), *args]
    return await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, check=False
    )


REPO = Path(__file__).resolve().parents[3]


def examples(module: str) -> list[pytest.param]:
    """The complete scripts (a ``python`` block that ends in ``asyncio.run(main())``) of the
    docs and of this README that import ``module``: each framework suite runs its own."""
    found = []
    for doc in [REPO / "clients/python/README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for n, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            if f"from {module} import" in block and block.rstrip().endswith("asyncio.run(main())"):
                found.append(pytest.param(block, id=f"{doc.name}-{n}"))
    return found


def example_tests(module: str) -> tuple[Callable[[], None], Callable[[str], Awaitable[None]]]:
    """A framework suite's two tests of the scripts that use ``module`` (bind them to
    ``test_…`` names in its ``test_examples.py``): the docs have them, and each runs."""
    found = examples(module)

    def have_examples() -> None:
        assert len(found) >= 2, "a script in docs/ and one in the client's README"

    @pytest.mark.parametrize("code", found)
    async def example_runs(code: str) -> None:
        done = await run_example(code, tenant_key(100, name="docs example"))
        assert done.returncode == 0, done.stderr[-3000:]

    return have_examples, example_runs


async def run_example(code: str, api_key: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this venv's Python with ``api_key`` against the stack."""
    env = {**os.environ, "CAIRN_API_URL": URL or "", "CAIRN_API_KEY": api_key}
    command = [sys.executable, "-W", "ignore", "-c", code]
    return await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, check=False, timeout=300
    )
