"""The Cairn workflow an integration writes into, found by name (else created) once per
client and name."""

from __future__ import annotations

import re
import threading
import weakref

from cairn import AsyncCairn, Cairn

#: A workflow id as the API makes them (``wf_`` and 32 hex digits); anything else is a name.
_WORKFLOW_ID = re.compile(r"wf_[0-9a-f]{32}")

_lock = threading.Lock()
_found: weakref.WeakKeyDictionary[Cairn | AsyncCairn, dict[str, str]] = weakref.WeakKeyDictionary()


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


def workflow_id(client: Cairn, workflow: str) -> str:
    """The id of ``workflow`` (an id, or a name: the newest workflow of that name, else a
    new ``custom`` workflow)."""
    if (cached := _cached(client, workflow)) is not None:
        return cached
    found = next((w.id for w in client.workflows.list() if w.name == workflow), None)
    if found is None:
        found = client.workflows.create(name=workflow, workflow_type="custom").id
    return _remember(client, workflow, found)


async def async_workflow_id(client: AsyncCairn, workflow: str) -> str:
    """:func:`workflow_id` with an :class:`~cairn.AsyncCairn`."""
    if (cached := _cached(client, workflow)) is not None:
        return cached
    found: str | None = None
    async for w in client.workflows.list():
        if w.name == workflow:
            found = w.id
            break
    if found is None:
        found = (await client.workflows.create(name=workflow, workflow_type="custom")).id
    return _remember(client, workflow, found)
