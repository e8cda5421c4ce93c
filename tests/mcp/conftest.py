"""Fixtures of the MCP server's tests.

Environment:

- ``CAIRN_API_URL``: the API's base URL, e.g. ``http://127.0.0.1:3000/api/v1``; the MCP
  endpoint is ``$CAIRN_API_URL/mcp``.
- ``CAIRN_TEST_ADMIN``: the ``cairn-admin`` binary, run with this process's environment
  (``TABLE_PREFIX``, ``AWS_*`` pointing at the stack's tables), to make tenants and keys.
- ``CAIRN_MCP_CONFORMANCE``: the conformance suite's ``conformance`` command
  (``.local/mcp-conformance/node_modules/.bin/conformance``, installed by ``make test``).
- ``CAIRN_MCP_INSPECTOR``: the MCP Inspector's command
  (``.local/mcp-inspector/node_modules/.bin/mcp-inspector``).

Without them the tests are skipped, unless ``CAIRN_MCP_REQUIRED=1`` (CI), which fails.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest


def env(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        reason = f"{name} is not set: the MCP tests need the running stack (see tests/mcp/conftest.py)"
        if os.environ.get("CAIRN_MCP_REQUIRED") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return value


@pytest.fixture(scope="session")
def api_url() -> str:
    return env("CAIRN_API_URL").rstrip("/")


@pytest.fixture(scope="session")
def mcp_url(api_url: str) -> str:
    return f"{api_url}/mcp"


@pytest.fixture(scope="session")
def admin() -> Callable[..., str]:
    binary = env("CAIRN_TEST_ADMIN")

    def run(*args: str) -> str:
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise AssertionError(
                f"cairn-admin {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
            )
        return done.stdout.strip().splitlines()[-1]

    return run


@dataclass
class Tenant:
    """A tenant of its own, its full key, and the API as that key sees it."""

    id: str
    key: str
    api_url: str

    def call(
        self, method: str, path: str, *, key: str | None = None, expect: int = 200, **kwargs: Any
    ) -> Any:
        headers = {"X-API-Key": key or self.key}
        reply = httpx.request(method, f"{self.api_url}{path}", headers=headers, timeout=60, **kwargs)
        assert reply.status_code == expect, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply.json() if reply.content else None

    def key_with(self, *scopes: str) -> str:
        made = self.call("POST", "/keys", json={"name": "agent", "scopes": list(scopes)}, expect=201)
        return str(made["key"])


@pytest.fixture
def tenant(admin: Callable[..., str], api_url: str) -> Tenant:
    tenant_id = admin("tenant", "create", "--name", f"mcp-test-{uuid.uuid4().hex[:8]}")
    key = admin("key", "create", "--tenant", tenant_id)
    admin("credits", "grant", "--tenant", tenant_id, "--credits", "100")
    return Tenant(tenant_id, key, api_url)


@dataclass
class Owned:
    """What a tenant made: a workflow, an execution with a checkpoint, a failure."""

    workflow: str
    execution: str
    checkpoint: str
    failure: str


def own(t: Tenant) -> Owned:
    workflow = t.call(
        "POST", "/workflows", json={"name": "triage", "workflow_type": "langgraph"}, expect=201
    )["id"]
    start = {"workflow_id": workflow, "input": {"ticket": 7}, "tags": {"team": "search"}}
    execution = t.call("POST", "/executions", json=start, expect=201)["id"]
    checkpoint = {"execution_id": execution, "name": "plan", "state": {"step": 1}}
    checkpoint_id = t.call("POST", "/checkpoints", json=checkpoint, expect=201)["id"]
    failed = t.call("POST", "/executions", json=start, expect=201)["id"]
    t.call("POST", f"/executions/{failed}/fail", json={"error_type": "TOOL_ERROR", "message": "timed out"})
    failure = t.call("GET", "/failures?status=open")["items"][0]["id"]
    return Owned(workflow, execution, checkpoint_id, failure)
