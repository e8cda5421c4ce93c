"""``Cairn`` and ``AsyncCairn``: one resource per API area (``_resources``), one method
per route, over the client's :class:`~cairn._api.API`; and tracing (``tracing``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from . import models, tracing
from ._api import API, AsyncAPI
from ._resources import AsyncResources, Resources
from ._transport import Settings, settings


class Cairn(Resources):
    """The Cairn API.

    ``Cairn()`` reads ``CAIRN_API_KEY`` and ``CAIRN_API_URL`` (default the local stack,
    ``http://127.0.0.1:3000/api/v1``); arguments override them. The key is sent as
    ``X-API-Key`` and never shown in reprs or logs. A plain ``http://`` URL to another
    machine is refused (:class:`~cairn.errors.InsecureURL`) unless ``allow_insecure=True``.
    Use it as a context manager, or call ``close()``, to release its connections.
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
        allow_insecure: bool = False,
    ) -> None:
        self._settings: Settings = settings(
            api_key, base_url, timeout, max_retries, max_elapsed, allow_insecure
        )
        super().__init__(API(self._settings, http_client or httpx.Client(timeout=timeout)))

    def __repr__(self) -> str:
        return f"Cairn(base_url={self._settings.base_url!r})"

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.api.close()

    def workflow(
        self,
        name: str,
        *,
        workflow_type: models.WorkflowType = "custom",
        tags: Mapping[str, str] | None = None,
    ) -> Callable[[Any], Any]:
        """Decorates ``fn(run, *args, **kwargs)`` as a traced workflow whose executions get
        ``tags``: see :mod:`cairn.tracing`."""
        return tracing.workflow(self, name, workflow_type, tags)

    def trace(
        self,
        workflow_id: str,
        *,
        input: Any = None,
        metadata: dict[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Any:
        """A context manager around one execution of ``workflow_id``: see :mod:`cairn.tracing`."""
        return tracing.Trace(self, workflow_id, input, metadata, tags)


class AsyncCairn(AsyncResources):
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
        allow_insecure: bool = False,
    ) -> None:
        self._settings: Settings = settings(
            api_key, base_url, timeout, max_retries, max_elapsed, allow_insecure
        )
        super().__init__(AsyncAPI(self._settings, http_client, timeout))

    def __repr__(self) -> str:
        return f"AsyncCairn(base_url={self._settings.base_url!r})"

    async def __aenter__(self) -> AsyncCairn:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.api.close()

    def workflow(
        self,
        name: str,
        *,
        workflow_type: models.WorkflowType = "custom",
        tags: Mapping[str, str] | None = None,
    ) -> Callable[[Any], Any]:
        """Decorates ``async def fn(run, *args, **kwargs)`` as a traced workflow."""
        return tracing.async_workflow(self, name, workflow_type, tags)

    def trace(
        self,
        workflow_id: str,
        *,
        input: Any = None,
        metadata: dict[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> Any:
        """An async context manager around one execution of ``workflow_id``."""
        return tracing.AsyncTrace(self, workflow_id, input, metadata, tags)
