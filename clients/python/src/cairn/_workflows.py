"""The Cairn workflow a framework integration writes into (``cairn.openai_agents``,
``cairn.agent_framework``), found by name (else created) once per client and name."""

from __future__ import annotations

import asyncio
import re
import threading
import weakref

from ._client import AsyncCairn, Cairn
from .models import WorkflowType

#: A workflow id as the API makes them (``wf_`` and 32 hex digits); anything else is a name.
_WORKFLOW_ID = re.compile(r"wf_[0-9a-f]{32}")

_lock = threading.Lock()
_found: weakref.WeakKeyDictionary[Cairn | AsyncCairn, dict[str, str]] = weakref.WeakKeyDictionary()
# One lookup at a time per client and name, so sessions used at once for the first time
# make one workflow, not one each (an AsyncCairn lives on one event loop: an asyncio lock).
_looking: weakref.WeakKeyDictionary[Cairn, dict[str, threading.Lock]] = weakref.WeakKeyDictionary()
_async_looking: weakref.WeakKeyDictionary[AsyncCairn, dict[str, asyncio.Lock]] = weakref.WeakKeyDictionary()


def check_workflow(workflow: str) -> None:
    if not workflow or len(workflow) > 200:
        raise ValueError("workflow must be a workflow id (wf_...) or a name of 1 to 200 characters")


def _cached(client: Cairn | AsyncCairn, workflow: str) -> str | None:
    if _WORKFLOW_ID.fullmatch(workflow):
        return workflow
    with _lock:
        return _found.get(client, {}).get(workflow)


def _remember(client: Cairn | AsyncCairn, workflow: str, workflow_id: str) -> str:
    with _lock:
        _found.setdefault(client, {})[workflow] = workflow_id
    return workflow_id


def workflow_id(client: Cairn, workflow: str, workflow_type: WorkflowType = "custom") -> str:
    """The id of ``workflow`` (an id, or a name: the newest workflow of that name, else a
    new workflow of ``workflow_type``)."""
    if (cached := _cached(client, workflow)) is not None:
        return cached
    with _lock:
        looking = _looking.setdefault(client, {}).setdefault(workflow, threading.Lock())
    with looking:
        if (cached := _cached(client, workflow)) is not None:
            return cached  # found by the lookup this one waited for
        found = next((w.id for w in client.workflows.list() if w.name == workflow), None)
        if found is None:
            found = client.workflows.create(name=workflow, workflow_type=workflow_type).id
        return _remember(client, workflow, found)


async def async_workflow_id(client: AsyncCairn, workflow: str, workflow_type: WorkflowType = "custom") -> str:
    """:func:`workflow_id` with an :class:`~cairn.AsyncCairn`."""
    if (cached := _cached(client, workflow)) is not None:
        return cached
    with _lock:
        looking = _async_looking.setdefault(client, {}).setdefault(workflow, asyncio.Lock())
    async with looking:
        if (cached := _cached(client, workflow)) is not None:
            return cached  # found by the lookup this one waited for
        found: str | None = None
        async for w in client.workflows.list():
            if w.name == workflow:
                found = w.id
                break
        if found is None:
            found = (await client.workflows.create(name=workflow, workflow_type=workflow_type)).id
        return _remember(client, workflow, found)
