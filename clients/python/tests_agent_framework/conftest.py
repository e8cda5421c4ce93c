"""Fixtures of cairn.agent_framework's suite, run by ``make test`` in
.local/agent-framework-venv against the stack it starts (``CAIRN_API_URL``;
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own). Tests that need Cairn are skipped without them.

The behaviour suite runs against the framework's own storages (``InMemoryCheckpointStorage``
and ``FileCheckpointStorage``, the references) and ``CairnCheckpointStorage`` alike. No
model is called: the workflows are plain function executors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from agent_framework import CheckpointStorage, FileCheckpointStorage, InMemoryCheckpointStorage

from cairn import AsyncCairn
from cairn.agent_framework import CairnCheckpointStorage

# The client's live tests' helpers: cairn-admin, and (with a stack) every httpx client made
# from now on sends the local gateway's own 500s again; the fixtures every async
# framework suite has.
from tests.conftest import URL, Requests, async_client, requests_sent, tenant_key, workflow_name


@pytest.fixture
def key() -> str:
    return tenant_key(1_000, name="agent-framework suite")


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


__all__ = ["URL", "Requests", "async_client", "requests_sent", "workflow_name"]
