"""The cairn command line as a subprocess against the running stack (see test_live)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import Cairn

from .conftest import URL

pytestmark = pytest.mark.live


# The command's process resends the local gateway's own 500s like this one (resending.py).
SITE = str(Path(__file__).parent / "sitecustomize")


def cli(key: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAIRN_API_KEY": key, "CAIRN_API_URL": URL or "", "XDG_CONFIG_HOME": "/nonexistent"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "cairn.cli", *args], capture_output=True, text=True, env=env, input=input
    )


def test_the_cli_shows_replays_and_reports(client: Cairn, key: str, tmp_path: Path) -> None:
    wf = client.workflows.create(name="cli", workflow_type="langgraph")
    e = client.executions.create(workflow_id=wf.id)
    cp = client.checkpoints.create(execution_id=e.id, state={"messages": ["hi"]}, name="agent")
    client.executions.fail(e.id, error_type="AGENT_ERROR", message="bad tool call")

    shown = cli(key, "executions", "show", e.id)
    assert shown.returncode == 0, shown.stderr
    assert e.id in shown.stdout
    assert "agent" in shown.stdout
    assert "bad tool call" in shown.stdout

    listed = cli(key, "--json", "executions", "list", "--status", "failed")
    assert listed.returncode == 0, listed.stderr
    assert [x["id"] for x in json.loads(listed.stdout)] == [e.id]

    replayed = cli(key, "executions", "replay", e.id)
    assert replayed.returncode == 0, replayed.stderr
    assert client.executions.get(e.id).status == "running"

    out = tmp_path / "state.json"
    saved = cli(key, "checkpoints", "show", cp.id, "--state", "--output", str(out))
    assert saved.returncode == 0, saved.stderr
    assert json.loads(out.read_text()) == {"messages": ["hi"]}

    missing = cli(key, "executions", "show", "exec_0193a6f21c2b7d3e8f000123456789ab")
    assert missing.returncode == 3
    assert "not_found" in missing.stderr
    assert "Traceback" not in missing.stderr
    refused = cli("cairn_" + "y" * 43, "billing", "balance")
    assert refused.returncode == 4
    assert key not in shown.stdout + shown.stderr + listed.stderr


def test_cairn_keys_creates_lists_and_revokes(client: Cairn, key: str) -> None:
    created = cli(key, "keys", "create", "--name", "deploys")
    assert created.returncode == 0, created.stderr
    first, second = created.stdout.splitlines()
    key_id, secret = first.split()[0], second.removeprefix("secret: ")
    assert (secret[:6], len(secret)) == ("cairn_", 49)
    assert "shown this once" in created.stderr

    listed = cli(secret, "--json", "keys", "list")  # the new key authenticates
    assert listed.returncode == 0, listed.stderr
    ids = [k["id"] for k in json.loads(listed.stdout)]
    assert (len(ids), ids[0]) == (2, key_id)
    assert secret not in listed.stdout
    table = cli(key, "keys", "list")
    assert key_id in table.stdout

    revoked = cli(key, "keys", "revoke", key_id)
    assert (revoked.returncode, revoked.stdout) == (0, f"{key_id} revoked\n"), revoked.stderr
    refused = cli(secret, "billing", "balance")
    assert (refused.returncode, refused.stderr.startswith("error: unauthorized: ")) == (4, True)

    own = next(k.id for k in client.keys.list() if k.revoked_at is None)
    last = cli(key, "keys", "revoke", own)
    assert last.returncode == 5
    assert last.stderr.startswith("error: invalid_state: ")
    assert f"key {own} is the tenant's last live key; create another before revoking it" in last.stderr
    assert "Traceback" not in last.stderr
    assert client.billing.balance().credits_balance == 100
