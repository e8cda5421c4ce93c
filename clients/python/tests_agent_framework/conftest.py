"""Fixtures of cairn.agent_framework's suite, run by ``make test`` in
.local/agent-framework-venv against the stack it starts (``CAIRN_API_URL``;
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own). Tests that need Cairn are skipped without them.

The behaviour suite runs against the framework's own storages (``InMemoryCheckpointStorage``
and ``FileCheckpointStorage``, the references) and ``CairnCheckpointStorage`` alike. No
model is called: the workflows are plain function executors.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from agent_framework import CheckpointStorage, FileCheckpointStorage, InMemoryCheckpointStorage

from cairn import AsyncCairn
from cairn.agent_framework import CairnCheckpointStorage

# The client's live tests' helpers: cairn-admin, and (with a stack) every httpx client made
# from now on sends the local gateway's own 500s again.
from tests.conftest import URL, Requests, tenant_key


@pytest.fixture
def key() -> str:
    return tenant_key(1_000, name="agent-framework suite")


@pytest.fixture
def requests_sent() -> Requests:
    return Requests()


@pytest.fixture
async def async_client(key: str, requests_sent: Requests) -> AsyncIterator[AsyncCairn]:
    http = httpx.AsyncClient(timeout=60, event_hooks={"request": [requests_sent.async_hook]})
    async with AsyncCairn(key, base_url=URL, http_client=http) as c:
        yield c


@pytest.fixture
def workflow_name() -> str:
    """A Cairn workflow of the test's own."""
    return f"agent-framework-{uuid.uuid4().hex[:8]}"


MakeStorage = Callable[[], CheckpointStorage]


@pytest.fixture(params=["memory", "file", "cairn"])
def make_storage(request: pytest.FixtureRequest, tmp_path: Path, workflow_name: str) -> MakeStorage:
    """Makes storages of one backend, every one over the same data (the same dict, the
    same directory, the same Cairn workflow), as two processes would share them."""
    if request.param == "memory":
        shared = InMemoryCheckpointStorage()
        return lambda: shared
    if request.param == "file":
        return lambda: FileCheckpointStorage(tmp_path / "checkpoints")
    client: AsyncCairn = request.getfixturevalue("async_client")
    return lambda: CairnCheckpointStorage(client, workflow=workflow_name)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend ``make_storage`` makes, for the few differences the tests allow."""
    return str(request.node.callspec.params.get("make_storage", ""))
