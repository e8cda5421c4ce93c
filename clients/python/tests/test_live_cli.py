"""The cairn command line as a subprocess against the running stack (see test_live)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def test_executions_stats_draws_a_chart_and_billing_usage_answers_json(client: Cairn, key: str) -> None:
    wf = client.workflows.create(name="chart", workflow_type="custom")
    failed = client.executions.create(workflow_id=wf.id)
    client.executions.fail(failed.id, error_type="AGENT_ERROR", message="m")
    client.executions.create(workflow_id=wf.id)

    drawn = cli(key, "executions", "stats", "--bucket", "hour")
    assert drawn.returncode == 0, drawn.stderr
    # Rows with a bar (the hours that hold them): total, running, completed, failed,
    # cancelled, paused, failures.
    rows = [line.split()[-7:] for line in drawn.stdout.splitlines() if "█" in line]
    assert rows, drawn.stdout
    assert [sum(int(row[i]) for row in rows) for i in range(7)] == [2, 1, 0, 1, 0, 0, 1], drawn.stdout
    assert "2 executions, 1 failures" in drawn.stderr

    usage = cli(
        key,
        "--json",
        "billing",
        "usage",
        "--after",
        "2026-01-01T00:00:00Z",
        "--before",
        "2026-01-03T00:00:00Z",
    )
    assert usage.returncode == 0, usage.stderr
    answered = json.loads(usage.stdout)
    assert (answered["bucket"], len(answered["buckets"]), answered["credits"]) == ("day", 2, 0)

    refused = cli(key, "executions", "stats", "--after", "yesterday")
    assert (refused.returncode, "ISO 8601" in refused.stderr) == (2, True), refused.stderr


def test_an_incident_is_replayed_in_bulk_from_the_cli(client: Cairn, key: str) -> None:
    wf = client.workflows.create(name="incident", workflow_type="custom")
    failed = []
    for n in range(6):
        e = client.executions.create(workflow_id=wf.id, tags={"incident": "7"})
        client.executions.fail(e.id, error_type="RATE_LIMIT", message=f"429 from the provider (request {n})")
        failed.append(e.id)
    other = client.executions.create(workflow_id=wf.id)
    client.executions.fail(other.id, error_type="TIMEOUT", message="timed out")
    group = next(g for g in client.failures.groups() if g.error_type == "RATE_LIMIT")

    by_group = ("--failure-group", group.id)
    dry = cli(key, "executions", "bulk", "replay", *by_group, "--status", "failed", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "6 executions match; replaying them costs 6 credits" in dry.stdout
    assert failed[0] in dry.stdout
    assert other.id not in dry.stdout
    as_json = cli(key, "--json", "executions", "bulk", "replay", "--tag", "incident:7", "--dry-run")
    assert json.loads(as_json.stdout)["matched"] == 6
    assert all(client.executions.get(e).status == "failed" for e in failed), "a dry run changes nothing"

    started = cli(key, "executions", "bulk", "replay", "--failure-group", group.id, "--yes", "--wait")
    assert started.returncode == 0, started.stderr
    assert "6/6 reached: 6 done, 0 skipped, 0 failed (completed)" in started.stdout, started.stdout
    assert all(client.executions.get(e).attempt == 2 for e in failed)
    assert client.executions.get(other.id).status == "failed"
    job_id = started.stdout.split()[0]
    shown = cli(key, "--json", "executions", "bulk", "show", job_id)
    assert json.loads(shown.stdout)["done"] == 6
    listed = cli(key, "executions", "bulk", "list")
    assert job_id in listed.stdout

    # Nothing left to replay: a second job skips each, saying why.
    again = client.executions.bulk("replay", failure_group=group.id)
    while (job := client.executions.bulk_job(again.id)).status == "running":
        time.sleep(0.2)
    assert (job.done, job.skipped_by_reason) == (0, {"not_allowed": 6})
    bad = cli(key, "executions", "bulk", "replay", "--status", "broken", "--yes")
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr


def test_cairn_settings_shows_and_sets_retention(client: Cairn, key: str) -> None:
    shown = cli(key, "settings", "retention")
    assert shown.returncode == 0, shown.stderr
    assert "effective_executions_days" in shown.stdout
    assert "30" in shown.stdout

    set_ = cli(
        key, "--json", "settings", "set-retention", "--executions-days", "10", "--checkpoints", "keep_latest"
    )
    assert set_.returncode == 0, set_.stderr
    body = json.loads(set_.stdout)
    assert (body["executions_days"], body["checkpoints"]) == (10, "keep_latest")
    assert client.settings.retention().executions_days == 10

    refused = cli(key, "settings", "set-retention", "--checkpoints", "days")
    assert refused.returncode == 6, refused.stderr
    assert "checkpoints_days" in refused.stderr
    assert client.settings.retention().checkpoints == "keep_latest", "nothing changed"


def test_cairn_export_writes_every_record_into_a_directory(client: Cairn, key: str, tmp_path: Path) -> None:
    import gzip

    wf = client.workflows.create(name="exported", workflow_type="custom")
    e = client.executions.create(workflow_id=wf.id, input={"q": "why"})
    cp = client.checkpoints.create(execution_id=e.id, state={"messages": ["hi", "there"]}, name="agent")
    client.executions.fail(e.id, error_type="AGENT_ERROR", message="bad tool call")

    out = tmp_path / "export"
    done = cli(key, "export", str(out))
    assert done.returncode == 0, done.stderr
    parts = sorted(out.glob("export_*.jsonl.gz"))
    assert [str(p) for p in parts] == done.stdout.split(), done.stdout
    records = [json.loads(line) for p in parts for line in gzip.decompress(p.read_bytes()).splitlines()]
    by_id = {r["data"]["id"]: r for r in records}
    assert by_id[wf.id]["type"] == "workflow"
    assert by_id[e.id]["data"]["input"] == {"q": "why"}
    assert by_id[cp.id]["data"]["state"] == {"messages": ["hi", "there"]}
    assert [r["type"] for r in records if r["data"].get("execution_id") == e.id] == ["checkpoint", "failure"]
    manifest = json.loads(next(out.glob("export_*.json")).read_text())
    assert (manifest["status"], manifest["counts"]["checkpoints"]) == ("completed", 1)
    assert "1 workflows, 1 executions, 1 checkpoints, 1 failures" in done.stderr

    missing = cli(key, "export", str(tmp_path / "none"), "--workflow", "wf_0193a6f21c2b7d3e8f000123456789ab")
    assert (missing.returncode, "not_found" in missing.stderr) == (3, True), missing.stderr
    assert not (tmp_path / "none").exists()
