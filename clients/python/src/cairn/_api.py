"""The clients' internal interface: an :class:`API` (and :class:`AsyncAPI`) sends one call
with the retry policy of ``_transport``, answers a spec of ``_specs`` with its parsed
result, and reads one page of a list.

It is what the resources, their pagers and the LangGraph saver build on: a client owns
one (``Cairn.api``), and nothing reaches into a client's private parts. Not a public API
for applications (the resources are), but a supported surface inside the package.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, TypeVar

import httpx

from . import errors, models
from ._specs import ListSpec, Spec, read_page
from ._transport import Call, Clock, Settings, connection_error, encode, outcome, pause, retryable

R = TypeVar("R")
M = TypeVar("M", bound=models.Model)


class _Tries:
    """The tries of one logical call: how long to wait before the next one."""

    def __init__(self, s: Settings) -> None:
        self.settings, self.clock, self.count = s, Clock(), 1

    def pause(self, error: errors.CairnError) -> float:
        """The wait before another try; ``error`` itself when it is final (not
        retryable, or past ``max_retries`` or ``max_elapsed``)."""
        wait = pause(error, self.count)
        s = self.settings
        if not retryable(error) or self.count > s.max_retries or self.clock.elapsed() + wait > s.max_elapsed:
            raise error
        self.count += 1
        return wait


class API:
    """Calls to Cairn over one ``httpx.Client``, with retries."""

    def __init__(self, settings: Settings, http: httpx.Client) -> None:
        self.settings, self.http = settings, http

    def send(self, c: Call) -> Any:
        """The JSON answer of a call (``None`` for 204), tried again as the retry policy
        says; the typed error of the last try otherwise."""
        url, headers, content, params = encode(c, self.settings)
        tries = _Tries(self.settings)
        while True:
            try:
                try:
                    response = self.http.request(
                        c.method, url, params=params, content=content, headers=headers
                    )
                except httpx.HTTPError as e:
                    raise connection_error(e) from e
                return outcome(response)
            except errors.CairnError as error:
                time.sleep(tries.pause(error))

    def answer(self, spec: Spec[R]) -> R:
        """The parsed answer of a spec's call."""
        return spec.parse(self.send(spec.call))

    def page(self, spec: ListSpec[M], after: str | None = None) -> models.Page[M]:
        """One page of a list: the first, or the one after the item ``after``."""
        return read_page(spec.item, self.send(spec.page_call(after)))

    def close(self) -> None:
        self.http.close()


class AsyncAPI:
    """:class:`API` over ``httpx.AsyncClient``: each method awaited.

    An ``httpx.AsyncClient`` holds connections of the event loop that opened them, so
    this keeps one of its own per event loop: an :class:`~cairn.AsyncCairn` (and every
    integration object on one) made outside a loop, or used by one ``asyncio.run`` after
    another, works in each. A client given by the caller (``http_client=``) is used in
    the first loop only; another loop gets :class:`~cairn.errors.LoopMismatch`."""

    def __init__(self, settings: Settings, http: httpx.AsyncClient | None, timeout: float) -> None:
        self.settings, self._given, self._timeout = settings, http, timeout
        self._given_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client of the running event loop."""
        loop = asyncio.get_running_loop()
        if self._given is not None:
            bound = self._given_loop() if self._given_loop is not None else None
            if bound is None or bound.is_closed():
                self._given_loop = weakref.ref(loop)
            elif bound is not loop:
                raise errors.LoopMismatch(
                    "this AsyncCairn was given its own http_client, which works in the event loop that "
                    "first used it only; make the AsyncCairn without http_client to use it in any loop"
                )
            return self._given
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient(timeout=self._timeout)
        return client

    async def send(self, c: Call) -> Any:
        url, headers, content, params = encode(c, self.settings)
        tries = _Tries(self.settings)
        while True:
            try:
                try:
                    response = await self.http.request(
                        c.method, url, params=params, content=content, headers=headers
                    )
                except httpx.HTTPError as e:
                    raise connection_error(e) from e
                return outcome(response)
            except errors.CairnError as error:
                await asyncio.sleep(tries.pause(error))

    async def answer(self, spec: Spec[R]) -> R:
        return spec.parse(await self.send(spec.call))

    async def page(self, spec: ListSpec[M], after: str | None = None) -> models.Page[M]:
        return read_page(spec.item, await self.send(spec.page_call(after)))

    async def close(self) -> None:
        """Closes the client of the running loop (or the given one) and lets go of those
        of loops closed already; a loop still running elsewhere keeps its own."""
        if self._given is not None:
            await self._given.aclose()
            return
        loop = asyncio.get_running_loop()
        for owner, client in list(self._clients.items()):
            if owner is loop:
                del self._clients[owner]
                await client.aclose()
            elif owner.is_closed():
                del self._clients[owner]
