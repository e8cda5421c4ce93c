"""The live tests' answer to the local gateway's own 500s, for clients in this process
(``install``, from conftest) and in the ``cairn`` subprocesses of test_live_cli
(``sitecustomize/``, on their ``PYTHONPATH``).

``cargo lambda watch`` now and then answers with a 500 of its own when it loses a
function's answer (the local stack only; API Gateway does not). The Rust tests and the
browser tests send such a request again after a growing pause (the heavier the
machine's load, the likelier a loss); so do the live tests, for every client they make:
every POST the library sends carries an Idempotency-Key, so a request sent again runs at
most once.
"""

from __future__ import annotations

import asyncio
import time

import httpx

EMULATOR_500 = b'{"type":"https://httpstatuses.com/500"'
#: The pauses (seconds) before each sending again, as the Rust harness's.
RESENDS = (0.25, 0.5, 1.0, 2.0)


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
        response = super().handle_request(request)
        for pause in RESENDS:
            if not _lost(response):
                break
            time.sleep(pause)
            response = super().handle_request(request)
        return response


class _AsyncResendingTransport(httpx.AsyncHTTPTransport):
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        for pause in RESENDS:
            if not await _lost_async(response):
                break
            await asyncio.sleep(pause)
            response = await super().handle_async_request(request)
        return response


def install() -> None:
    """Makes every httpx client made from now on resend such an answer."""
    # httpx builds a client's default transport from these names.
    httpx._client.HTTPTransport = _ResendingTransport  # type: ignore[misc]
    httpx._client.AsyncHTTPTransport = _AsyncResendingTransport  # type: ignore[misc]
