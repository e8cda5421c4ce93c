"""A smoke test with the MCP Inspector's command line (npm ``@modelcontextprotocol/inspector``,
``--cli``): it connects over Streamable HTTP with the key as a header, as a user would, lists
the tools and calls one; without a valid key it cannot connect.

(The separate ``@modelcontextprotocol/inspector-cli`` package cannot run on its own as
published: it reads its monorepo's package.json. The full package's ``--cli`` mode is the
same command line. Its 1.x line is the last that runs on Node 20.)
"""

from __future__ import annotations

import json
import subprocess

from conftest import Tenant, env, own


def inspector(mcp_url: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [env("CAIRN_MCP_INSPECTOR"), "--cli", mcp_url, "--transport", "http"]
    command += ["--header", f"Authorization: Bearer {key}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_inspector_lists_the_tools_and_calls_one(mcp_url: str, tenant: Tenant) -> None:
    listed = inspector(mcp_url, tenant.key, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    names = [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
    assert "list_executions" in names
    assert "replay_execution" in names
    assert len(names) == 18

    o = own(tenant)
    called = inspector(
        mcp_url, tenant.key, "--method", "tools/call", "--tool-name", "get_execution",
        "--tool-arg", f"execution_id={o.execution}",
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert result["structuredContent"] == tenant.call("GET", f"/executions/{o.execution}")


def test_the_inspector_cannot_connect_without_a_valid_key(mcp_url: str, tenant: Tenant) -> None:
    refused = inspector(mcp_url, "cairn_not_a_key", "--method", "tools/list")
    assert refused.returncode != 0
    assert "401" in refused.stderr
    assert "unauthorized" in refused.stderr
