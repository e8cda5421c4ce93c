"""Fixtures of the live tests: the stack ``make test`` starts (``CAIRN_API_URL``) and
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own. Live tests are skipped without them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from cairn import Cairn

ADMIN = os.environ.get("CAIRN_TEST_ADMIN")
URL = os.environ.get("CAIRN_API_URL")

# The start of the body of the 500 that `cargo lambda watch` itself sends now and then
# when it loses a function's answer (the local stack only; API Gateway does not). The
# Rust tests and the browser tests send such a request again; so do the live tests, for
# every client they make: every POST the library sends carries an Idempotency-Key, so a
# request sent again runs at most once.
EMULATOR_500 = b'{"type":"https://httpstatuses.com/500"'
RESENDS = 2


def _lost(response: httpx.Response) -> bool:
    """Whether the emulator lost the answer (the body is read only for a 500)."""
    if response.status_code != 500:
        return False
    response.read()
    return response.content.startswith(EMULATOR_500)


async def _lost_async(response: httpx.Response) -> bool:
    if response.status_code != 500:
        return False
    await response.aread()
    return response.content.startswith(EMULATOR_500)


class _ResendingTransport(httpx.HTTPTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(RESENDS):
            response = super().handle_request(request)
            if not _lost(response):
                return response
        return super().handle_request(request)


class _AsyncResendingTransport(httpx.AsyncHTTPTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        for _ in range(RESENDS):
            response = await super().handle_async_request(request)
            if not await _lost_async(response):
                return response
        return await super().handle_async_request(request)


if URL:
    # httpx builds a client's default transport from these names.
    httpx._client.HTTPTransport = _ResendingTransport  # type: ignore[misc]
    httpx._client.AsyncHTTPTransport = _AsyncResendingTransport  # type: ignore[misc]


def admin(*args: str) -> str:
    if not ADMIN or not URL:
        pytest.skip("the live stack is not running (make test starts it)")
    return subprocess.run([ADMIN, *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def key() -> str:
    """The API key of a new tenant with 100 credits."""
    tenant = admin("tenant", "create", "--name", "python client")
    api_key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", "100")
    return api_key


@pytest.fixture
def client(key: str) -> Iterator[Cairn]:
    with Cairn(key, base_url=URL) as c:
        yield c
