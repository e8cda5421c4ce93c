"""``Cairn`` and ``AsyncCairn``: one resource per API area, one method per route."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx

from . import _specs as specs
from . import errors, models
from ._transport import (
    Call,
    Clock,
    Settings,
    connection_error,
    encode,
    outcome,
    pause,
    retryable,
    settings,
)

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=models.Model)


# ---- pages ----


def _page(item: type[M], raw: Any) -> models.Page[M]:
    """A page whose items keep the API's own JSON."""
    page: models.Page[M] = models.Page[item].model_validate(raw)  # type: ignore[valid-type]
    for parsed, original in zip(page.items, raw.get("items", []), strict=False):
        if isinstance(original, dict):
            parsed._raw = original
    return page


class Pager(Generic[M]):
    """Every item of a list, page after page (keyset cursor ``starting_after``).

    Iterate it for the items; ``pages()`` for one :class:`~cairn.models.Page` at a time
    (each with the list's ``total``); ``first_page()`` for one page alone.
    """

    def __init__(self, client: Cairn, spec: specs.ListSpec[M]) -> None:
        self._client, self._spec = client, spec

    def first_page(self) -> models.Page[M]:
        return self._page(None)

    def _page(self, after: str | None) -> models.Page[M]:
        raw = self._client._send(self._spec.page_call(after))
        return _page(self._spec.item, raw)

    def pages(self) -> Iterator[models.Page[M]]:
        after: str | None = None
        while True:
            page = self._page(after)
            yield page
            after = page.after(self._spec.size)
            if after is None:
                return

    def __iter__(self) -> Iterator[M]:
        for page in self.pages():
            yield from page.items


class AsyncPager(Generic[M]):
    """:class:`Pager` for :class:`AsyncCairn`: ``async for`` the items."""

    def __init__(self, client: AsyncCairn, spec: specs.ListSpec[M]) -> None:
        self._client, self._spec = client, spec

    async def first_page(self) -> models.Page[M]:
        return await self._page(None)

    async def _page(self, after: str | None) -> models.Page[M]:
        raw = await self._client._send(self._spec.page_call(after))
        return _page(self._spec.item, raw)

    async def pages(self) -> AsyncIterator[models.Page[M]]:
        after: str | None = None
        while True:
            page = await self._page(after)
            yield page
            after = page.after(self._spec.size)
            if after is None:
                return

    async def __aiter__(self) -> AsyncIterator[M]:
        async for page in self.pages():
            for item in page.items:
                yield item


# ---- resource methods from specs ----


class _Sync:
    def __init__(self, client: Cairn) -> None:
        self._client = client


class _Async:
    def __init__(self, client: AsyncCairn) -> None:
        self._client = client


def _sync(spec: Callable[Concatenate[Any, P], specs.Spec[R]]) -> Callable[Concatenate[_Sync, P], R]:
    @functools.wraps(spec)
    def method(self: _Sync, /, *args: P.args, **kwargs: P.kwargs) -> R:
        s = spec(self, *args, **kwargs)
        return s.parse(self._client._send(s.call))

    return method


def _async(
    spec: Callable[Concatenate[Any, P], specs.Spec[R]],
) -> Callable[Concatenate[_Async, P], Awaitable[R]]:
    @functools.wraps(spec)
    async def method(self: _Async, /, *args: P.args, **kwargs: P.kwargs) -> R:
        s = spec(self, *args, **kwargs)
        return s.parse(await self._client._send(s.call))

    return method


def _sync_list(
    spec: Callable[Concatenate[Any, P], specs.ListSpec[M]],
) -> Callable[Concatenate[_Sync, P], Pager[M]]:
    @functools.wraps(spec)
    def method(self: _Sync, /, *args: P.args, **kwargs: P.kwargs) -> Pager[M]:
        return Pager(self._client, spec(self, *args, **kwargs))

    return method


def _async_list(
    spec: Callable[Concatenate[Any, P], specs.ListSpec[M]],
) -> Callable[Concatenate[_Async, P], AsyncPager[M]]:
    @functools.wraps(spec)
    def method(self: _Async, /, *args: P.args, **kwargs: P.kwargs) -> AsyncPager[M]:
        return AsyncPager(self._client, spec(self, *args, **kwargs))

    return method


class Workflows(_Sync):
    """``/workflows``"""

    create = _sync(specs.workflows_create)
    get = _sync(specs.workflows_get)
    update = _sync(specs.workflows_update)
    delete = _sync(specs.workflows_delete)
    list = _sync_list(specs.workflows_list)


class AsyncWorkflows(_Async):
    """``/workflows``"""

    create = _async(specs.workflows_create)
    get = _async(specs.workflows_get)
    update = _async(specs.workflows_update)
    delete = _async(specs.workflows_delete)
    list = _async_list(specs.workflows_list)


#: The most DELETE requests ``executions.delete`` sends for one execution.
DELETE_MAX_REQUESTS = 1000


def _deletion_incomplete(execution_id: str, requests: int) -> errors.DeletionIncomplete:
    return errors.DeletionIncomplete(
        f"execution {execution_id} is deleted but its checkpoints were still being purged after "
        f"{requests} requests; call delete again to finish",
        status=202,
    )


class Executions(_Sync):
    """``/executions``"""

    create = _sync(specs.executions_create)
    get = _sync(specs.executions_get)
    list = _sync_list(specs.executions_list)
    complete = _sync(specs.executions_complete)
    fail = _sync(specs.executions_fail)
    pause = _sync(specs.executions_pause)
    cancel = _sync(specs.executions_cancel)
    replay = _sync(specs.executions_replay)
    rollback = _sync(specs.executions_rollback)
    _delete_once = _sync(specs.executions_delete)

    def delete(self, execution_id: str, *, max_requests: int = DELETE_MAX_REQUESTS) -> None:
        """Deletes an execution, in any status, with its checkpoints, their states and
        their writes (``DELETE /executions/{id}``). The API purges a bounded amount per
        request and answers 202 while more remains: the request is sent again until it
        answers 204, at most ``max_requests`` times (then ``DeletionIncomplete``).
        Failures recorded on the execution stay."""
        for sent in range(max_requests):
            try:
                if self._delete_once(execution_id) is None:
                    return
            except errors.NotFound:
                if sent == 0:
                    raise
                return  # a retried request whose 204 was lost
        raise _deletion_incomplete(execution_id, max_requests)


class AsyncExecutions(_Async):
    """``/executions``"""

    create = _async(specs.executions_create)
    get = _async(specs.executions_get)
    list = _async_list(specs.executions_list)
    complete = _async(specs.executions_complete)
    fail = _async(specs.executions_fail)
    pause = _async(specs.executions_pause)
    cancel = _async(specs.executions_cancel)
    replay = _async(specs.executions_replay)
    rollback = _async(specs.executions_rollback)
    _delete_once = _async(specs.executions_delete)

    async def delete(self, execution_id: str, *, max_requests: int = DELETE_MAX_REQUESTS) -> None:
        """:meth:`Executions.delete`, awaited."""
        for sent in range(max_requests):
            try:
                if await self._delete_once(execution_id) is None:
                    return
            except errors.NotFound:
                if sent == 0:
                    raise
                return
        raise _deletion_incomplete(execution_id, max_requests)


class Checkpoints(_Sync):
    """``/checkpoints``"""

    create = _sync(specs.checkpoints_create)
    get = _sync(specs.checkpoints_get)
    delete = _sync(specs.checkpoints_delete)
    list = _sync_list(specs.checkpoints_list)
    put_writes = _sync(specs.checkpoints_put_writes)
    list_writes = _sync(specs.checkpoints_list_writes)


class AsyncCheckpoints(_Async):
    """``/checkpoints``"""

    create = _async(specs.checkpoints_create)
    get = _async(specs.checkpoints_get)
    delete = _async(specs.checkpoints_delete)
    list = _async_list(specs.checkpoints_list)
    put_writes = _async(specs.checkpoints_put_writes)
    list_writes = _async(specs.checkpoints_list_writes)


class Failures(_Sync):
    """``/failures``"""

    get = _sync(specs.failures_get)
    list = _sync_list(specs.failures_list)
    stats = _sync(specs.failures_stats)
    resolve = _sync(specs.failures_resolve)
    ignore = _sync(specs.failures_ignore)


class AsyncFailures(_Async):
    """``/failures``"""

    get = _async(specs.failures_get)
    list = _async_list(specs.failures_list)
    stats = _async(specs.failures_stats)
    resolve = _async(specs.failures_resolve)
    ignore = _async(specs.failures_ignore)


class Billing(_Sync):
    """``/billing``"""

    balance = _sync(specs.billing_balance)
    transactions = _sync_list(specs.billing_transactions)
    topup = _sync(specs.billing_topup)
    create_checkout = _sync(specs.billing_create_checkout)
    subscription = _sync(specs.billing_subscription)
    portal = _sync(specs.billing_portal)
    cancel_subscription = _sync(specs.billing_cancel_subscription)


class AsyncBilling(_Async):
    """``/billing``"""

    balance = _async(specs.billing_balance)
    transactions = _async_list(specs.billing_transactions)
    topup = _async(specs.billing_topup)
    create_checkout = _async(specs.billing_create_checkout)
    subscription = _async(specs.billing_subscription)
    portal = _async(specs.billing_portal)
    cancel_subscription = _async(specs.billing_cancel_subscription)


# ---- clients ----


class Cairn:
    """The Cairn API.

    ``Cairn()`` reads ``CAIRN_API_KEY`` and ``CAIRN_API_URL`` (default the local stack,
    ``http://127.0.0.1:3000/api/v1``); arguments override them. The key is sent as
    ``X-API-Key`` and never shown in reprs or logs. Use it as a context manager, or call
    ``close()``, to release its connections.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_elapsed: float = 60.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._settings: Settings = settings(api_key, base_url, timeout, max_retries, max_elapsed)
        self._http = http_client or httpx.Client(timeout=timeout)
        self.workflows = Workflows(self)
        self.executions = Executions(self)
        self.checkpoints = Checkpoints(self)
        self.failures = Failures(self)
        self.billing = Billing(self)

    def __repr__(self) -> str:
        return f"Cairn(base_url={self._settings.base_url!r})"

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, c: Call) -> Any:
        url, headers, content, params = encode(c, self._settings)
        clock, tries = Clock(), 0
        while True:
            tries += 1
            try:
                try:
                    response = self._http.request(
                        c.method, url, params=params, content=content, headers=headers
                    )
                except httpx.HTTPError as e:
                    raise connection_error(e) from e
                return outcome(response)
            except errors.CairnError as error:
                wait = pause(error, tries)
                if not retryable(error) or tries > self._settings.max_retries:
                    raise
                if clock.elapsed() + wait > self._settings.max_elapsed:
                    raise
                time.sleep(wait)

    def workflow(self, name: str, *, workflow_type: models.WorkflowType = "custom") -> Callable[[Any], Any]:
        """Decorates ``fn(run, *args, **kwargs)`` as a traced workflow: see :mod:`cairn.tracing`."""
        from .tracing import workflow

        return workflow(self, name, workflow_type)

    def trace(self, workflow_id: str, *, input: Any = None, metadata: dict[str, str] | None = None) -> Any:
        """A context manager around one execution of ``workflow_id``: see :mod:`cairn.tracing`."""
        from .tracing import Trace

        return Trace(self, workflow_id, input, metadata)


class AsyncCairn:
    """:class:`Cairn` for asyncio: the same resources, each method awaited."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_elapsed: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings: Settings = settings(api_key, base_url, timeout, max_retries, max_elapsed)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self.workflows = AsyncWorkflows(self)
        self.executions = AsyncExecutions(self)
        self.checkpoints = AsyncCheckpoints(self)
        self.failures = AsyncFailures(self)
        self.billing = AsyncBilling(self)

    def __repr__(self) -> str:
        return f"AsyncCairn(base_url={self._settings.base_url!r})"

    async def __aenter__(self) -> AsyncCairn:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, c: Call) -> Any:
        url, headers, content, params = encode(c, self._settings)
        clock, tries = Clock(), 0
        while True:
            tries += 1
            try:
                try:
                    response = await self._http.request(
                        c.method, url, params=params, content=content, headers=headers
                    )
                except httpx.HTTPError as e:
                    raise connection_error(e) from e
                return outcome(response)
            except errors.CairnError as error:
                wait = pause(error, tries)
                if not retryable(error) or tries > self._settings.max_retries:
                    raise
                if clock.elapsed() + wait > self._settings.max_elapsed:
                    raise
                await asyncio.sleep(wait)

    def workflow(self, name: str, *, workflow_type: models.WorkflowType = "custom") -> Callable[[Any], Any]:
        """Decorates ``async def fn(run, *args, **kwargs)`` as a traced workflow."""
        from .tracing import async_workflow

        return async_workflow(self, name, workflow_type)

    def trace(self, workflow_id: str, *, input: Any = None, metadata: dict[str, str] | None = None) -> Any:
        """An async context manager around one execution of ``workflow_id``."""
        from .tracing import AsyncTrace

        return AsyncTrace(self, workflow_id, input, metadata)
