"""Fixtures of cairn.semantic_kernel's suite, run by ``make test`` in
.local/semantic-kernel-venv against the stack it starts (``CAIRN_API_URL``;
``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary that makes each test a tenant of its
own). Tests that need Cairn are skipped without them.

No model is called: the process steps are plain functions. The behaviour suite runs
against two references, a dict of JSON states and Semantic Kernel's own file form
(``KernelProcessStateMetadata.load_from_file``), and ``ProcessCheckpointer`` alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import pytest
from semantic_kernel.processes.kernel_process.kernel_process_step_state_metadata import (
    KernelProcessStateMetadata,
)

from cairn import AsyncCairn
from cairn.semantic_kernel import ProcessCheckpointer

# The client's live tests' helpers: cairn-admin, and (with a stack) every httpx client made
# from now on sends the local gateway's own 500s again; the fixtures every async
# framework suite has.
from tests.conftest import URL, Requests, async_client, requests_sent, tenant_key, workflow_name


class Checkpointer(Protocol):
    async def save(
        self, metadata: KernelProcessStateMetadata[Any], key: str, *, name: str | None = None
    ) -> Any: ...
    async def load(self, key: str) -> KernelProcessStateMetadata[Any] | None: ...


class DictCheckpointer:
    """A reference: each key's latest state, kept as JSON."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}

    async def save(
        self, metadata: KernelProcessStateMetadata[Any], key: str, *, name: str | None = None
    ) -> None:
        self.states[key] = metadata.model_dump_json(by_alias=True)

    async def load(self, key: str) -> KernelProcessStateMetadata[Any] | None:
        found = self.states.get(key)
        return None if found is None else KernelProcessStateMetadata.model_validate_json(found)


class FileCheckpointer:
    """A reference: Semantic Kernel's own file form, a JSON file per key read back with
    ``KernelProcessStateMetadata.load_from_file``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def save(
        self, metadata: KernelProcessStateMetadata[Any], key: str, *, name: str | None = None
    ) -> None:
        document = metadata.model_dump(mode="json", by_alias=True)
        (self.directory / f"{key}.json").write_text(json.dumps(document))

    async def load(self, key: str) -> KernelProcessStateMetadata[Any] | None:
        loaded: KernelProcessStateMetadata[Any] | None = KernelProcessStateMetadata.load_from_file(
            f"{key}.json", self.directory
        )
        return loaded


@pytest.fixture
def key() -> str:
    return tenant_key(1_000, name="semantic-kernel suite")


@pytest.fixture(params=["dict", "file", "cairn"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path, workflow_name: str) -> Checkpointer:
    if request.param == "dict":
        return DictCheckpointer()
    if request.param == "file":
        return FileCheckpointer(tmp_path)
    client: AsyncCairn = request.getfixturevalue("async_client")
    return ProcessCheckpointer(client, workflow=workflow_name)


__all__ = ["URL", "Requests", "async_client", "requests_sent", "workflow_name"]
