"""MCP's own conformance suite (npm ``@modelcontextprotocol/conformance``) against the
running server: every server scenario runs; those listed in conformance-baseline.yaml do
not apply (each with its reason there), every other one must pass, and a listed one that
passes fails the run too (the list stays true).

The suite connects without credentials, as an unconfigured client would; a proxy on
127.0.0.1 (auth_proxy.py) adds the key, as an agent's configured header does.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from auth_proxy import proxy
from conftest import Tenant, env

HERE = Path(__file__).resolve().parent


@pytest.fixture
def proxied(mcp_url: str, tenant: Tenant) -> Iterator[str]:
    server = proxy(0, mcp_url, tenant.key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def test_the_conformance_suite_passes_every_server_scenario_that_applies(proxied: str) -> None:
    suite = env("CAIRN_MCP_CONFORMANCE")
    baseline = HERE / "conformance-baseline.yaml"
    done = subprocess.run(
        [suite, "server", "--url", proxied, "--expected-failures", str(baseline)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    for applies in [
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "prompts-list",
        "dns-rebinding-protection",
    ]:
        assert f"✓ {applies}" in report, f"{applies} did not run and pass:\n{report}"
