"""The MCP server through the protocol's official Python SDK (PyPI ``mcp``) as a client:
the handshake, the tools a key's scopes cover, every tool called, another tenant's ids
unknown, and bad arguments answered as MCP errors that change nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest
from conftest import Tenant, own
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

T = TypeVar("T")

READS = [
    "list_workflows",
    "get_workflow",
    "list_executions",
    "get_execution",
    "list_checkpoints",
    "get_checkpoint",
    "diff_checkpoints",
    "list_failures",
    "get_failure",
    "failure_stats",
    "list_failure_groups",
    "get_failure_group",
]
WRITES = ["replay_execution", "rollback_execution", "cancel_execution", "resolve_failure", "ignore_failure"]
EVERY_TOOL = [*READS, *WRITES, "get_balance"]


@asynccontextmanager
async def session(url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized session with `key` sent as a bearer token, as docs/mcp.md configures clients."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write, _),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


def run(url: str, key: str, body: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def go() -> T:
        async with session(url, key) as s:
            return await body(s)

    return asyncio.run(go())


def test_initialize_lists_every_tool_for_a_full_key(mcp_url: str, tenant: Tenant) -> None:
    async def body(s: ClientSession) -> Any:
        return await s.list_tools()

    listed = run(mcp_url, tenant.key, body)
    assert [tool.name for tool in listed.tools] == EVERY_TOOL
    for tool in listed.tools:
        assert tool.inputSchema["type"] == "object"
        assert tool.annotations is not None, tool.name
        assert tool.annotations.readOnlyHint is (tool.name not in WRITES), tool.name
        destructive = tool.annotations.destructiveHint is True
        assert destructive is (tool.name in ("rollback_execution", "cancel_execution")), tool.name
        assert tool.description
        assert len(tool.description) > 20


def test_every_tool_answers_what_its_route_answers(mcp_url: str, tenant: Tenant) -> None:
    o = own(tenant)
    group = tenant.call("GET", f"/failures/{o.failure}")["group_id"]
    calls = [
        ("list_workflows", {}, "/workflows"),
        ("get_workflow", {"workflow_id": o.workflow}, f"/workflows/{o.workflow}"),
        ("list_executions", {"tag": ["team:search"]}, "/executions?tag=team%3Asearch"),
        ("get_execution", {"execution_id": o.execution}, f"/executions/{o.execution}"),
        ("list_checkpoints", {"execution_id": o.execution}, f"/checkpoints?execution_id={o.execution}"),
        (
            "get_checkpoint",
            {"checkpoint_id": o.checkpoint, "include_state": True},
            f"/checkpoints/{o.checkpoint}?include_state=true",
        ),
        ("list_failures", {"status": "open"}, "/failures?status=open"),
        ("get_failure", {"failure_id": o.failure}, f"/failures/{o.failure}"),
        ("failure_stats", {}, "/failures/stats"),
        ("list_failure_groups", {}, "/failures/groups"),
        ("get_failure_group", {"group_id": group}, f"/failures/groups/{group}"),
        ("get_balance", {}, "/billing/balance"),
    ]
    # Every read but the diff, which no single route answers (tests/tests/mcp.rs has it).
    assert sorted(name for name, _, _ in calls) == sorted(
        r for r in [*READS, "get_balance"] if r != "diff_checkpoints"
    )

    async def body(s: ClientSession) -> list[Any]:
        return [await s.call_tool(name, arguments) for name, arguments, _ in calls]

    results = run(mcp_url, tenant.key, body)
    for (name, _, path), result in zip(calls, results, strict=True):
        assert result.isError is False, (name, result)
        assert result.structuredContent == tenant.call("GET", path), name
    state = results[5].structuredContent
    assert state is not None
    assert state["state"] == {"step": 1}
    assert results[2].structuredContent is not None
    assert results[2].structuredContent["total"] == 2


def test_a_restricted_key_lists_and_runs_only_its_tools(mcp_url: str, tenant: Tenant) -> None:
    o = own(tenant)
    agent = tenant.key_with("executions:read")

    async def body(s: ClientSession) -> tuple[list[str], Any, list[McpError]]:
        names = [tool.name for tool in (await s.list_tools()).tools]
        allowed = await s.call_tool("get_execution", {"execution_id": o.execution})
        refused = []
        for name, arguments in [("get_balance", {}), ("get_failure", {"failure_id": o.failure})]:
            with pytest.raises(McpError) as caught:
                await s.call_tool(name, arguments)
            refused.append(caught.value)
        return names, allowed, refused

    names, allowed, refused = run(mcp_url, agent, body)
    assert names == ["list_executions", "get_execution"]
    assert allowed.isError is False
    assert [e.error.code for e in refused] == [-32602, -32602]
    assert "for this key" in refused[0].error.message


def test_another_tenants_ids_are_unknown(mcp_url: str, tenant: Tenant, admin: Callable[..., str]) -> None:
    o = own(tenant)
    other_id = admin("tenant", "create", "--name", "mcp-intruder")
    intruder = admin("key", "create", "--tenant", other_id)
    calls = [
        ("get_workflow", {"workflow_id": o.workflow}),
        ("get_execution", {"execution_id": o.execution}),
        ("get_checkpoint", {"checkpoint_id": o.checkpoint, "include_state": True}),
        ("get_failure", {"failure_id": o.failure}),
        ("list_checkpoints", {"execution_id": o.execution}),
        ("list_executions", {"workflow_id": o.workflow}),
    ]

    async def body(s: ClientSession) -> list[Any]:
        return [await s.call_tool(name, arguments) for name, arguments in calls]

    for (name, _), result in zip(calls, run(mcp_url, intruder, body), strict=True):
        assert result.isError is True, name
        assert result.structuredContent is not None
        problem = result.structuredContent
        assert (problem["status"], problem["code"]) == (404, "not_found"), name
        assert "step" not in str(result.content), name


def test_bad_arguments_are_errors_that_change_nothing(mcp_url: str, tenant: Tenant) -> None:
    own(tenant)
    before = tenant.call("GET", "/executions")["total"], tenant.call("GET", "/billing/balance")

    async def body(s: ClientSession) -> tuple[list[Any], McpError]:
        results = [
            await s.call_tool("list_executions", {"status": "exploded"}),
            await s.call_tool("list_failures", {"limit": 1000}),
            await s.call_tool("get_execution", {}),
            await s.call_tool("list_workflows", {"colour": "red"}),
        ]
        with pytest.raises(McpError) as caught:
            await s.call_tool("replay_everything", {})
        return results, caught.value

    results, unknown = run(mcp_url, tenant.key, body)
    fields = []
    for result in results:
        assert result.isError is True
        assert result.structuredContent is not None
        assert result.structuredContent["status"] == 422
        fields.append([e["field"] for e in result.structuredContent["errors"]])
    assert fields == [["status"], ["limit"], ["execution_id"], ["colour"]]
    assert unknown.error.code == -32602
    assert (tenant.call("GET", "/executions")["total"], tenant.call("GET", "/billing/balance")) == before


def test_the_write_tools_replay_and_resolve(mcp_url: str, tenant: Tenant) -> None:
    o = own(tenant)
    failed = tenant.call("GET", f"/failures/{o.failure}")["execution_id"]
    before = tenant.call("GET", "/billing/balance")["credits_balance"]

    async def body(s: ClientSession) -> list[Any]:
        return [
            await s.call_tool("replay_execution", {"execution_id": failed}),
            await s.call_tool("resolve_failure", {"failure_id": o.failure}),
            await s.call_tool("cancel_execution", {"execution_id": o.workflow}),
        ]

    replayed, resolved, refused = run(mcp_url, tenant.key, body)
    assert replayed.structuredContent == tenant.call("GET", f"/executions/{failed}")
    assert replayed.structuredContent is not None
    assert (replayed.structuredContent["status"], replayed.structuredContent["attempt"]) == ("running", 2)
    assert tenant.call("GET", "/billing/balance")["credits_balance"] == before - 1
    assert resolved.structuredContent is not None
    assert resolved.structuredContent["status"] == "resolved"
    assert tenant.call("GET", f"/failures/{o.failure}")["status"] == "resolved"
    assert refused.isError is True, "a workflow's id is no execution's"
    assert refused.structuredContent is not None
    assert refused.structuredContent["status"] == 404


def test_the_triage_prompt_and_a_timeline_resource(mcp_url: str, tenant: Tenant) -> None:
    o = own(tenant)
    uri = f"cairn://executions/{o.execution}/timeline"

    async def body(s: ClientSession) -> tuple[Any, Any, Any, Any]:
        prompts = await s.list_prompts()
        prompt = await s.get_prompt("triage_open_failures", {"workflow_id": o.workflow})
        templates = await s.list_resource_templates()
        return prompts, prompt, templates, await s.read_resource(AnyUrl(uri))

    prompts, prompt, templates, timeline = run(mcp_url, tenant.key, body)
    assert [p.name for p in prompts.prompts] == ["triage_open_failures"]
    assert o.workflow in prompt.messages[0].content.text
    assert [t.uriTemplate for t in templates.resourceTemplates] == [
        "cairn://executions/{execution_id}/timeline"
    ]
    document = json.loads(timeline.contents[0].text)
    assert document["execution"]["id"] == o.execution
    assert [c["id"] for c in document["checkpoints"]] == [o.checkpoint]
