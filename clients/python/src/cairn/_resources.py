"""The API's resources, one class per area and one method per route, each method made
from its spec in ``_specs`` (sync and async from the same spec), and the pagers of their
lists. :class:`Resources` gathers a client's resources; the clients are in ``_client``."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from . import _bulk as bulk_specs
from . import _exports as export_specs
from . import _groups as group_specs
from . import _settings as settings_specs
from . import _specs as specs
from . import _workflows as workflow_specs
from . import errors, models
from ._api import API, AsyncAPI

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=models.Model)


# ---- pages ----


class Pager(Generic[M]):
    """Every item of a list, page after page (keyset cursor ``starting_after``).

    Iterate it for the items; ``pages()`` for one :class:`~cairn.models.Page` at a time
    (each with the list's ``total``); ``first_page()`` for one page alone.
    """

    def __init__(self, api: API, spec: specs.ListSpec[M]) -> None:
        self._api, self._spec = api, spec

    def first_page(self) -> models.Page[M]:
        return self._page(None)

    def _page(self, after: str | None) -> models.Page[M]:
        return self._api.page(self._spec, after)

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
    """:class:`Pager` for :class:`~cairn.AsyncCairn`: ``async for`` the items."""

    def __init__(self, api: AsyncAPI, spec: specs.ListSpec[M]) -> None:
        self._api, self._spec = api, spec

    async def first_page(self) -> models.Page[M]:
        return await self._page(None)

    async def _page(self, after: str | None) -> models.Page[M]:
        return await self._api.page(self._spec, after)

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
    def __init__(self, api: API) -> None:
        self._api = api


class _Async:
    def __init__(self, api: AsyncAPI) -> None:
        self._api = api


def _sync(spec: Callable[Concatenate[Any, P], specs.Spec[R]]) -> Callable[Concatenate[_Sync, P], R]:
    @functools.wraps(spec)
    def method(self: _Sync, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._api.answer(spec(self, *args, **kwargs))

    return method


def _async(
    spec: Callable[Concatenate[Any, P], specs.Spec[R]],
) -> Callable[Concatenate[_Async, P], Awaitable[R]]:
    @functools.wraps(spec)
    async def method(self: _Async, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._api.answer(spec(self, *args, **kwargs))

    return method


def _sync_list(
    spec: Callable[Concatenate[Any, P], specs.ListSpec[M]],
) -> Callable[Concatenate[_Sync, P], Pager[M]]:
    @functools.wraps(spec)
    def method(self: _Sync, /, *args: P.args, **kwargs: P.kwargs) -> Pager[M]:
        return Pager(self._api, spec(self, *args, **kwargs))

    return method


def _async_list(
    spec: Callable[Concatenate[Any, P], specs.ListSpec[M]],
) -> Callable[Concatenate[_Async, P], AsyncPager[M]]:
    @functools.wraps(spec)
    def method(self: _Async, /, *args: P.args, **kwargs: P.kwargs) -> AsyncPager[M]:
        return AsyncPager(self._api, spec(self, *args, **kwargs))

    return method


class Workflows(_Sync):
    """``/workflows``"""

    create = _sync(workflow_specs.workflows_create)
    get = _sync(workflow_specs.workflows_get)
    update = _sync(workflow_specs.workflows_update)
    delete = _sync(workflow_specs.workflows_delete)
    list = _sync_list(workflow_specs.workflows_list)


class AsyncWorkflows(_Async):
    """``/workflows``"""

    create = _async(workflow_specs.workflows_create)
    get = _async(workflow_specs.workflows_get)
    update = _async(workflow_specs.workflows_update)
    delete = _async(workflow_specs.workflows_delete)
    list = _async_list(workflow_specs.workflows_list)


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
    stats = _sync(specs.executions_stats)
    complete = _sync(specs.executions_complete)
    fail = _sync(specs.executions_fail)
    pause = _sync(specs.executions_pause)
    cancel = _sync(specs.executions_cancel)
    replay = _sync(specs.executions_replay)
    rollback = _sync(specs.executions_rollback)
    replay_preview = _sync(bulk_specs.executions_replay_preview)
    bulk = _sync(bulk_specs.executions_bulk)
    bulk_dry_run = _sync(bulk_specs.executions_bulk_dry_run)
    bulk_job = _sync(bulk_specs.executions_bulk_job)
    bulk_jobs = _sync_list(bulk_specs.executions_bulk_jobs)
    cancel_bulk = _sync(bulk_specs.executions_cancel_bulk)
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
    stats = _async(specs.executions_stats)
    complete = _async(specs.executions_complete)
    fail = _async(specs.executions_fail)
    pause = _async(specs.executions_pause)
    cancel = _async(specs.executions_cancel)
    replay = _async(specs.executions_replay)
    rollback = _async(specs.executions_rollback)
    replay_preview = _async(bulk_specs.executions_replay_preview)
    bulk = _async(bulk_specs.executions_bulk)
    bulk_dry_run = _async(bulk_specs.executions_bulk_dry_run)
    bulk_job = _async(bulk_specs.executions_bulk_job)
    bulk_jobs = _async_list(bulk_specs.executions_bulk_jobs)
    cancel_bulk = _async(bulk_specs.executions_cancel_bulk)
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
    groups = _sync_list(group_specs.failures_groups)
    group = _sync(group_specs.failures_group)
    resolve_group = _sync(group_specs.failures_resolve_group)
    ignore_group = _sync(group_specs.failures_ignore_group)


class AsyncFailures(_Async):
    """``/failures``"""

    get = _async(specs.failures_get)
    list = _async_list(specs.failures_list)
    stats = _async(specs.failures_stats)
    resolve = _async(specs.failures_resolve)
    ignore = _async(specs.failures_ignore)
    groups = _async_list(group_specs.failures_groups)
    group = _async(group_specs.failures_group)
    resolve_group = _async(group_specs.failures_resolve_group)
    ignore_group = _async(group_specs.failures_ignore_group)


class Billing(_Sync):
    """``/billing``"""

    balance = _sync(specs.billing_balance)
    usage = _sync(specs.billing_usage)
    transactions = _sync_list(specs.billing_transactions)
    topup = _sync(specs.billing_topup)
    create_checkout = _sync(specs.billing_create_checkout)
    subscription = _sync(specs.billing_subscription)
    portal = _sync(specs.billing_portal)
    cancel_subscription = _sync(specs.billing_cancel_subscription)


class AsyncBilling(_Async):
    """``/billing``"""

    balance = _async(specs.billing_balance)
    usage = _async(specs.billing_usage)
    transactions = _async_list(specs.billing_transactions)
    topup = _async(specs.billing_topup)
    create_checkout = _async(specs.billing_create_checkout)
    subscription = _async(specs.billing_subscription)
    portal = _async(specs.billing_portal)
    cancel_subscription = _async(specs.billing_cancel_subscription)


class Keys(_Sync):
    """``/keys``: the tenant's API keys."""

    list = _sync(specs.keys_list)
    create = _sync(specs.keys_create)
    revoke = _sync(specs.keys_revoke)


class AsyncKeys(_Async):
    """``/keys``: the tenant's API keys."""

    list = _async(specs.keys_list)
    create = _async(specs.keys_create)
    revoke = _async(specs.keys_revoke)


class WebhookEndpoints(_Sync):
    """``/webhook-endpoints``: where the tenant's events are posted, and their deliveries."""

    list = _sync(specs.webhook_endpoints_list)
    create = _sync(specs.webhook_endpoints_create)
    get = _sync(specs.webhook_endpoints_get)
    update = _sync(specs.webhook_endpoints_update)
    delete = _sync(specs.webhook_endpoints_delete)
    rotate_secret = _sync(specs.webhook_endpoints_rotate_secret)
    test = _sync(specs.webhook_endpoints_test)
    deliveries = _sync(specs.webhook_endpoints_deliveries)
    retry = _sync(specs.webhook_endpoints_retry)


class AsyncWebhookEndpoints(_Async):
    """``/webhook-endpoints``: where the tenant's events are posted, and their deliveries."""

    list = _async(specs.webhook_endpoints_list)
    create = _async(specs.webhook_endpoints_create)
    get = _async(specs.webhook_endpoints_get)
    update = _async(specs.webhook_endpoints_update)
    delete = _async(specs.webhook_endpoints_delete)
    rotate_secret = _async(specs.webhook_endpoints_rotate_secret)
    test = _async(specs.webhook_endpoints_test)
    deliveries = _async(specs.webhook_endpoints_deliveries)
    retry = _async(specs.webhook_endpoints_retry)


class Settings(_Sync):
    """``/settings``: how long ended executions and their checkpoints are kept."""

    retention = _sync(settings_specs.settings_retention)
    set_retention = _sync(settings_specs.settings_set_retention)


class AsyncSettings(_Async):
    """``/settings``: how long ended executions and their checkpoints are kept."""

    retention = _async(settings_specs.settings_retention)
    set_retention = _async(settings_specs.settings_set_retention)


#: Seconds between two looks at an export being waited for.
EXPORT_POLL_SECONDS = 1.0


def _save_parts(export: models.Export, directory: Path, part: Callable[[int], bytes]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    saved = []
    for p in export.parts:
        path = directory / f"{export.id}-{p.number:05d}.jsonl.gz"
        path.write_bytes(part(p.number))
        saved.append(path)
    (directory / f"{export.id}.json").write_text(json.dumps(export.api_json(), indent=2) + "\n")
    return saved


def _ended(export: models.Export) -> models.Export:
    if export.status == "failed":
        raise errors.ExportFailed(f"export {export.id} failed: {export.error}", status=None)
    return export


class Exports(_Sync):
    """``/exports``: the tenant's records as gzip JSON Lines (needs a full key)."""

    create = _sync(export_specs.exports_create)
    get = _sync(export_specs.exports_get)
    part = _sync(export_specs.exports_part)

    def wait(self, export_id: str, *, poll: float = EXPORT_POLL_SECONDS) -> models.Export:
        """The export once it has ended; :class:`~cairn.errors.ExportFailed` if it failed."""
        while (export := self.get(export_id)).status == "running":
            time.sleep(poll)
        return _ended(export)

    def save(self, export: models.Export, directory: str | Path) -> list[Path]:
        """Writes each part of ``export`` to ``directory`` (``<export id>-00001.jsonl.gz``,
        …) beside the export itself (``<export id>.json``); answers the parts' paths."""
        return _save_parts(export, Path(directory), lambda n: self.part(export.id, n))

    def download(
        self, directory: str | Path, *, workflow_id: str | None = None, poll: float = EXPORT_POLL_SECONDS
    ) -> list[Path]:
        """Exports the tenant's records (or ``workflow_id``'s), waits for the export and
        saves it to ``directory`` (:meth:`save`)."""
        return self.save(self.wait(self.create(workflow_id=workflow_id).id, poll=poll), directory)


class AsyncExports(_Async):
    """``/exports``: the tenant's records as gzip JSON Lines (needs a full key)."""

    create = _async(export_specs.exports_create)
    get = _async(export_specs.exports_get)
    part = _async(export_specs.exports_part)

    async def wait(self, export_id: str, *, poll: float = EXPORT_POLL_SECONDS) -> models.Export:
        """The export once it has ended; :class:`~cairn.errors.ExportFailed` if it failed."""
        while True:
            export = await self.get(export_id)
            if export.status != "running":
                return _ended(export)
            await asyncio.sleep(poll)

    async def save(self, export: models.Export, directory: str | Path) -> list[Path]:
        """:meth:`Exports.save`, awaited (each part read, then written)."""
        parts = {p.number: await self.part(export.id, p.number) for p in export.parts}
        return _save_parts(export, Path(directory), parts.__getitem__)

    async def download(
        self, directory: str | Path, *, workflow_id: str | None = None, poll: float = EXPORT_POLL_SECONDS
    ) -> list[Path]:
        """:meth:`Exports.download`, awaited."""
        export = await self.wait((await self.create(workflow_id=workflow_id)).id, poll=poll)
        return await self.save(export, directory)


# ---- every resource of a client ----


class Resources:
    """A sync client's resources, one per API area, over its :class:`~cairn._api.API`."""

    def __init__(self, api: API) -> None:
        self.api = api
        self.workflows = Workflows(api)
        self.executions = Executions(api)
        self.checkpoints = Checkpoints(api)
        self.failures = Failures(api)
        self.billing = Billing(api)
        self.keys = Keys(api)
        self.webhook_endpoints = WebhookEndpoints(api)
        self.settings = Settings(api)
        self.exports = Exports(api)


class AsyncResources:
    """An async client's resources, over its :class:`~cairn._api.AsyncAPI`."""

    def __init__(self, api: AsyncAPI) -> None:
        self.api = api
        self.workflows = AsyncWorkflows(api)
        self.executions = AsyncExecutions(api)
        self.checkpoints = AsyncCheckpoints(api)
        self.failures = AsyncFailures(api)
        self.billing = AsyncBilling(api)
        self.keys = AsyncKeys(api)
        self.webhook_endpoints = AsyncWebhookEndpoints(api)
        self.settings = AsyncSettings(api)
        self.exports = AsyncExports(api)
