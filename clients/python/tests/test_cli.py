"""The ``cairn`` command line without a server: respx mocks the API, click's CliRunner runs it."""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from click.testing import CliRunner, Result
from rich.console import Console

from cairn.cli import cli, parse_minimal_toml, read_profiles, toml_dumps
from cairn.cli import output as cli_output

BASE = "https://cairn.test/api/v1"
KEY = "cairn_" + "k" * 43
T = "2026-11-24T10:00:00.000Z"  # milliseconds, as the API sends them: --json must keep them


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries (connection errors) without waiting."""
    monkeypatch.setattr("time.sleep", lambda _: None)


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    return tmp_path / "xdg"


@pytest.fixture
def run(config_home: Path) -> Any:
    """``run(*args, env=..., input=...)``: cairn with the key and URL in the environment and
    the config file under a temporary XDG_CONFIG_HOME."""

    def invoke(*args: str, env: dict[str, str | None] | None = None, input: str | None = None) -> Result:
        base: dict[str, str | None] = {
            "CAIRN_API_KEY": KEY,
            "CAIRN_API_URL": BASE,
            "XDG_CONFIG_HOME": str(config_home),
        }
        return runner().invoke(cli, list(args), env={**base, **(env or {})}, input=input)

    return invoke


def runner() -> CliRunner:
    """stdout and stderr apart (click 8.2+ always; 8.1 when asked)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def printed(result: Result) -> str:
    return result.stdout + result.stderr


# ---- API answers ----


def problem(status: int, code: str, detail: str = "the reason", **extra: Any) -> httpx.Response:
    body = {"type": "about:blank", "title": "t", "status": status, "detail": detail, "code": code}
    body.update({"request_id": "req-1", **extra})
    headers = {"Content-Type": "application/problem+json", "Retry-After": "0"}
    return httpx.Response(status, json=body, headers=headers)


def page(items: list[dict[str, Any]], total: int | None = None) -> httpx.Response:
    n = len(items) if total is None else total
    return httpx.Response(200, json={"items": items, "total": n, "page": 1, "page_size": 100})


def workflow(n: int = 1, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"wf_{n}",
        "name": f"triage-{n}",
        "description": None,
        "workflow_type": "crewai",
        "status": "published",
        "metadata": {"team": "support"},
        "version": 3,
        "created_at": T,
        "updated_at": T,
        "retention": None,
    }
    return {**body, **fields}


def summary(n: int = 1, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"exec_{n}",
        "workflow_id": "wf_1",
        "status": "running",
        "error": None,
        "cancel_reason": None,
        "key": None,
        "metadata": {},
        "tags": {},
        "attempt": 1,
        "current_checkpoint_id": None,
        "checkpoint_count": 0,
        "created_at": T,
        "updated_at": T,
        "ended_at": None,
        "expires_at": None,
        "checkpoints_expire_at": None,
    }
    return {**body, **fields}


def execution(n: int = 1, **fields: Any) -> dict[str, Any]:
    return {**summary(n), "input": None, "output": None, **fields}


def checkpoint(n: int = 1, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"cp_{n}",
        "execution_id": "exec_1",
        "workflow_id": "wf_1",
        "sequence": n,
        "name": f"step-{n}",
        "key": None,
        "parent_checkpoint_id": None,
        "attempt": 1,
        "metadata": {},
        "state_size_bytes": 42,
        "created_at": T,
    }
    return {**body, **fields}


def failure(**fields: Any) -> dict[str, Any]:
    body = {
        "id": "fail_1",
        "execution_id": "exec_1",
        "workflow_id": "wf_1",
        "error_type": "AGENT_ERROR",
        "message": "bad tool call",
        "status": "open",
        "created_at": T,
        "resolved_at": None,
        "resolved_by": None,
        "group_id": "fgrp_" + "a" * 32,
        "fingerprint": "bad tool call",
        "details": {
            "agent": "writer",
            "traceback": 'Traceback (most recent call last):\n  File "agent.py", line 3\nKeyError: [x]\n',
        },
        "recovery_commands": [{"id": "rc_1", "type": "replay", "status": "pending"}],
    }
    return {**body, **fields}


BALANCE = {"credits_balance": 250, "balance_usd": 2.5}


# ---- lists ----


def test_a_list_as_a_table_and_as_the_apis_json(run: Any) -> None:
    items = [workflow(2), workflow(1, name="[bold]literal[/bold]")]
    with respx.mock:
        route = respx.get(f"{BASE}/workflows").mock(return_value=page(items))
        result = run("workflows", "list", "--status", "published", "--type", "crewai")
        assert result.exit_code == 0, printed(result)
        assert route.calls.last.request.url.params["status"] == "published"
        assert route.calls.last.request.url.params["workflow_type"] == "crewai"
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["id", "name", "type", "status", "version", "updated_at"]
        assert lines[1].split() == ["wf_2", "triage-2", "crewai", "published", "3", "2026-11-24T10:00:00Z"]
        assert "[bold]literal[/bold]" in result.stdout  # data is never rich markup
        assert result.stderr == ""  # the whole list fits in one page

        as_json = run("--json", "workflows", "list")
        after = run("workflows", "list", "--json")  # also accepted after the command
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout) == items  # unchanged: timestamps keep their milliseconds
    assert json.loads(after.stdout) == items


def test_all_follows_starting_after_across_pages(run: Any) -> None:
    first = [summary(n) for n in range(101, 1, -1)]  # a full page of 100
    with respx.mock:
        route = respx.get(f"{BASE}/executions").mock(side_effect=[page(first, 101), page([summary(1)], 101)])
        result = run("--json", "executions", "list", "--status", "failed", "--all")
        assert result.exit_code == 0, printed(result)
        assert json.loads(result.stdout) == [*first, summary(1)]
        assert route.call_count == 2
        assert "starting_after" not in route.calls[0].request.url.params
        second = route.calls[1].request.url.params
        assert second["starting_after"] == "exec_2"
        assert second["status"] == "failed"
        assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_without_all_only_the_first_page_and_a_line_on_stderr(run: Any) -> None:
    first = [summary(n) for n in range(101, 1, -1)]
    with respx.mock:
        route = respx.get(f"{BASE}/executions").mock(return_value=page(first, 101))
        result = run("--json", "executions", "list", "--workflow", "wf_1")
    assert result.exit_code == 0
    assert route.call_count == 1
    assert route.calls.last.request.url.params["workflow_id"] == "wf_1"
    assert len(json.loads(result.stdout)) == 100
    assert result.stderr.strip() == "showing 100 of 101; --all for every page"


def test_all_shows_progress_on_a_terminal_only_past_the_first_page(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(
        cli_output, "stderr_console", lambda: Console(file=screen, force_terminal=True, width=80)
    )
    with respx.mock:
        respx.get(f"{BASE}/executions").mock(
            side_effect=[
                page([summary(1)]),
                page([summary(n) for n in range(101, 1, -1)], 101),
                page([summary(1)], 101),
            ]
        )
        single = run("--json", "executions", "list", "--all")
        assert single.exit_code == 0
        assert screen.getvalue() == ""
        several = run("--json", "executions", "list", "--all")
    assert several.exit_code == 0
    assert len(json.loads(several.stdout)) == 101
    assert "reading pages" in screen.getvalue()
    assert "reading pages" not in several.stdout


def test_an_empty_list(run: Any) -> None:
    with respx.mock:
        respx.get(f"{BASE}/failures").mock(return_value=page([]))
        table = run("failures", "list", "--status", "open")
        as_json = run("--json", "failures", "list")
    assert (table.exit_code, table.stdout, table.stderr.strip()) == (0, "", "nothing to show")
    assert json.loads(as_json.stdout) == []


def test_checkpoints_and_transactions_lists(run: Any) -> None:
    tx = {
        "id": "tx_1",
        "type": "usage",
        "amount": -1,
        "currency": "credits",
        "credits_before": 251,
        "credits_after": 250,
        "description": "execution exec_1",
        "payment_status": None,
        "created_at": T,
    }
    with respx.mock:
        cps = respx.get(f"{BASE}/checkpoints").mock(return_value=page([checkpoint(1), checkpoint(2)]))
        txs = respx.get(f"{BASE}/billing/transactions").mock(return_value=page([tx]))
        listed = run("checkpoints", "list", "exec_1")
        ledger = run("billing", "transactions", "--type", "usage")
    assert listed.exit_code == 0
    assert cps.calls.last.request.url.params["execution_id"] == "exec_1"
    assert "cp_1" in listed.stdout
    assert "step-2" in listed.stdout
    assert ledger.exit_code == 0
    assert txs.calls.last.request.url.params["type"] == "usage"
    assert "execution exec_1" in ledger.stdout


# ---- executions ----


def test_executions_show_has_error_input_output_and_checkpoints(run: Any) -> None:
    failed = execution(
        status="failed",
        error={"error_type": "AGENT_ERROR", "message": "bad tool"},
        input={"ticket": 42},
        checkpoint_count=2,
    )
    with respx.mock:
        respx.get(f"{BASE}/executions/exec_1").respond(200, json=failed)
        cps = respx.get(f"{BASE}/checkpoints").mock(
            return_value=page([checkpoint(1, name="plan"), checkpoint(2, name="act", state_size_bytes=2048)])
        )
        result = run("executions", "show", "exec_1")
        as_json = run("--json", "executions", "show", "exec_1")
    assert result.exit_code == 0, printed(result)
    out = result.stdout
    assert "status                 failed" in out
    assert "error: AGENT_ERROR: bad tool" in out
    assert 'input:\n{\n  "ticket": 42\n}' in out
    assert "output:\n(none)" in out
    assert "checkpoints (2):" in out
    header = next(line for line in out.splitlines() if line.startswith("sequence"))
    assert header.split() == ["sequence", "id", "name", "size", "attempt", "created_at"]
    assert any(line.split()[:3] == ["2", "cp_2", "act"] and "2.0 KiB" in line for line in out.splitlines())
    assert cps.calls[0].request.url.params["execution_id"] == "exec_1"
    assert json.loads(as_json.stdout) == failed


def test_start_sends_the_input_as_json_and_omits_it_when_not_given(run: Any) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions").respond(201, json=execution())
        with_input = run("executions", "start", "wf_1", "--input", '{"ticket": 42}')
        without = run("executions", "start", "wf_1")
        assert without.exit_code == 0
        bad = run("executions", "start", "wf_1", "--input", "{nope")
    assert with_input.exit_code == 0
    assert "exec_1 started: running, attempt 1" in with_input.stdout
    assert json.loads(route.calls[0].request.content) == {"workflow_id": "wf_1", "input": {"ticket": 42}}
    assert json.loads(route.calls[1].request.content) == {"workflow_id": "wf_1"}
    assert route.calls[0].request.headers["Idempotency-Key"]
    assert bad.exit_code == 2
    assert "not JSON" in bad.stderr
    assert route.call_count == 2


def test_executions_are_started_and_listed_with_tags(run: Any) -> None:
    tagged = summary(tags={"team": "search", "url": "https://x"})
    with respx.mock:
        started = respx.post(f"{BASE}/executions").respond(201, json=execution())
        listed = respx.get(f"{BASE}/executions").mock(return_value=page([tagged]))
        start = run("executions", "start", "wf_1", "--tag", "team:search", "--tag", "url:https://x")
        shown = run("executions", "list", "--tag", "team:search", "--status", "running")
        bad = run("executions", "start", "wf_1", "--tag", "team")
        twice = run("executions", "list", "--tag", "team:a", "--tag", "team:b")
    assert start.exit_code == 0, printed(start)
    body = json.loads(started.calls[0].request.content)
    assert body == {"workflow_id": "wf_1", "tags": {"team": "search", "url": "https://x"}}
    assert shown.exit_code == 0, printed(shown)
    assert listed.calls[0].request.url.params.get_list("tag") == ["team:search"]
    assert "team:search url:https://x" in shown.stdout
    assert (bad.exit_code, twice.exit_code) == (2, 2)
    assert "KEY:VALUE" in bad.stderr
    assert (started.call_count, listed.call_count) == (1, 1), "a bad --tag sends nothing"


def test_replay_from_the_current_checkpoint_a_given_one_or_the_start(run: Any) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/replay").respond(200, json=execution(attempt=2))
        assert run("executions", "replay", "exec_1").exit_code == 0
        assert run("executions", "replay", "exec_1", "--from", "cp_1").exit_code == 0
        assert run("executions", "replay", "exec_1", "--from-start").exit_code == 0
        both = run("executions", "replay", "exec_1", "--from", "cp_1", "--from-start")
    bodies = [json.loads(c.request.content) for c in route.calls]
    assert bodies == [{}, {"checkpoint_id": "cp_1"}, {"checkpoint_id": None}]
    assert both.exit_code == 2
    assert "exclude each other" in both.stderr


def test_rollback_asks_and_aborts_on_no_without_calling_the_api(run: Any) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/rollback").respond(
            200, json=execution(status="paused", discarded_checkpoints=2)
        )
        refused = run("executions", "rollback", "exec_1", "--to", "cp_1", input="n\n")
        assert refused.exit_code == 1
        assert "Roll exec_1 back to cp_1?" in refused.stderr
        assert not route.called
        accepted = run("executions", "rollback", "exec_1", "--to", "cp_1", input="y\n")
        assert accepted.exit_code == 0
        assert route.call_count == 1
        unasked = run("executions", "rollback", "exec_1", "--to", "cp_1", "--yes")
    assert unasked.exit_code == 0
    assert "Roll" not in unasked.stderr
    assert unasked.stdout.strip() == "exec_1 rolled back to cp_1: paused; 2 checkpoints discarded"
    assert json.loads(route.calls.last.request.content) == {"checkpoint_id": "cp_1"}


def test_pause_and_cancel(run: Any) -> None:
    with respx.mock:
        paused = respx.post(f"{BASE}/executions/exec_1/pause").respond(200, json=execution(status="paused"))
        cancel = respx.post(f"{BASE}/executions/exec_1/cancel").respond(
            200, json=execution(status="cancelled", cancel_reason="stuck")
        )
        assert run("executions", "pause", "exec_1").stdout.strip() == "exec_1 paused: paused, attempt 1"
        assert run("executions", "cancel", "exec_1", "--reason", "stuck").exit_code == 0
        assert run("executions", "cancel", "exec_1").exit_code == 0
    assert json.loads(paused.calls.last.request.content) == {}
    assert [json.loads(c.request.content) for c in cancel.calls] == [{"reason": "stuck"}, {}]


# ---- checkpoints ----


def test_checkpoint_state_to_a_file_or_stdout(run: Any, tmp_path: Path) -> None:
    state = {"messages": ["hi", "[red]x[/red]"], "step": 3}
    with respx.mock:
        route = respx.get(f"{BASE}/checkpoints/cp_1").respond(200, json=checkpoint(1, state=state))
        target = tmp_path / "state.json"
        written = run("checkpoints", "show", "cp_1", "--state", "--output", str(target))
        printed = run("checkpoints", "show", "cp_1", "--state")
        plain = run("checkpoints", "show", "cp_1")
    assert written.exit_code == 0, printed(written)
    assert json.loads(target.read_text()) == state
    assert written.stdout == ""
    assert str(target) in written.stderr
    assert route.calls[0].request.url.params["include_state"] == "true"
    assert json.loads(printed.stdout) == state
    assert "include_state" not in route.calls[2].request.url.params
    assert "sequence              1" in plain.stdout


# ---- failures ----


def test_failure_show_prints_the_traceback_as_is_and_the_recovery_commands(run: Any) -> None:
    with respx.mock:
        respx.get(f"{BASE}/failures/fail_1").respond(200, json=failure())
        result = run("failures", "show", "fail_1")
    assert result.exit_code == 0, printed(result)
    assert 'traceback:\nTraceback (most recent call last):\n  File "agent.py", line 3\nKeyError: [x]\n' in (
        result.stdout
    )
    assert '"agent": "writer"' in result.stdout
    lines = result.stdout.splitlines()
    assert ["rc_1", "replay", "pending"] in [line.split() for line in lines]
    assert "Traceback" not in result.stderr


def test_failures_are_listed_by_group_and_name_theirs(run: Any) -> None:
    group = "fgrp_" + "a" * 32
    item = {k: v for k, v in failure().items() if k not in ("details", "recovery_commands")}
    with respx.mock:
        route = respx.get(f"{BASE}/failures").respond(
            200, json={"items": [item], "total": 1, "limit": 200, "offset": 0}
        )
        result = run("failures", "list", "--group", group, "--status", "open")
    assert result.exit_code == 0, printed(result)
    params = route.calls.last.request.url.params
    assert (params["group_id"], params["status"]) == (group, "open")
    assert group in result.stdout


def group_body(**fields: Any) -> dict[str, Any]:
    counts = {"total": 3, "open": 3, "resolved": 0, "ignored": 0}
    body = {"id": "fgrp_" + "a" * 32, "status": "open", "workflow_id": "wf_1", "error_type": "TOOL_ERROR"}
    body |= {
        "agent_name": None,
        "fingerprint": "timed out after <n>s",
        "sample_message": "timed out after 30s",
    }
    body |= {"counts": counts, "resolved_by": None, "first_seen": T, "last_seen": T}
    body |= {"failures_per_hour": [0] * 22 + [1, 2]}
    return {**body, **fields}


def test_failure_groups_are_listed_and_a_group_resolved_until_nothing_remains(run: Any) -> None:
    group = "fgrp_" + "a" * 32
    done = {"total": 3, "open": 0, "resolved": 3, "ignored": 0}
    with respx.mock:
        listed = respx.get(f"{BASE}/failures/groups").respond(
            200, json={"items": [group_body()], "total": 1, "limit": 200, "offset": 0}
        )
        resolve = respx.post(f"{BASE}/failures/groups/{group}/resolve").mock(
            side_effect=[
                httpx.Response(200, json=group_body(settled=2, remaining=True)),
                httpx.Response(
                    200, json=group_body(status="resolved", counts=done, settled=1, remaining=False)
                ),
            ]
        )
        respx.get(f"{BASE}/failures/groups/{group}").respond(200, json=group_body())
        shown = run("failures", "groups", "--status", "open")
        detail = run("failures", "group", "show", group)
        resolved = run("failures", "group", "resolve", group)
    assert shown.exit_code == 0, printed(shown)
    assert listed.calls.last.request.url.params["status"] == "open"
    assert group in shown.stdout
    assert "timed out after <n>s" in shown.stdout
    assert detail.exit_code == 0, printed(detail)
    assert "failures_per_hour" in detail.stdout
    assert ",1,2]" in detail.stdout.replace(" ", ""), "the last 24 hours, oldest first"
    assert resolved.exit_code == 0, printed(resolved)
    assert resolve.call_count == 2, "sent again while failures remain"
    assert f"{group}: 3 failures resolved; the group is resolved" in resolved.stdout


def test_failures_resolve_ignore_and_stats(run: Any) -> None:
    stats = {
        "total_failures": 5,
        "open_failures": 2,
        "resolved_failures": 2,
        "ignored_failures": 1,
        "failure_rate_last_30_days": 0.125,
    }
    with respx.mock:
        respx.post(f"{BASE}/failures/fail_1/resolve").respond(
            200, json={"id": "fail_1", "status": "resolved", "resolved_at": T, "message": "ok"}
        )
        respx.post(f"{BASE}/failures/fail_1/ignore").respond(
            200, json={"id": "fail_1", "status": "ignored", "message": "ok"}
        )
        respx.get(f"{BASE}/failures/stats").respond(200, json=stats)
        assert run("failures", "resolve", "fail_1").stdout.strip() == "fail_1: resolved"
        assert run("failures", "ignore", "fail_1").stdout.strip() == "fail_1: ignored"
        shown = run("failures", "stats")
        as_json = run("--json", "failures", "stats")
    assert "open_failures              2" in shown.stdout
    assert json.loads(as_json.stdout) == stats


# ---- billing and workflows ----


def test_billing_balance_and_topup(run: Any) -> None:
    with respx.mock:
        respx.get(f"{BASE}/billing/balance").respond(200, json=BALANCE)
        topup = respx.post(f"{BASE}/billing/topup").respond(
            200,
            json={
                "client_secret": "pi_1_secret_2",
                "payment_intent_id": "pi_1",
                "amount_cents": 2000,
                "credits": 2000,
            },
        )
        assert run("billing", "balance").stdout.strip() == "250 credits (US$2.50)"
        result = run("billing", "topup", "2000")
        too_small = run("billing", "topup", "5")
    assert result.exit_code == 0
    assert "payment_intent_id  pi_1" in result.stdout
    assert "client_secret      pi_1_secret_2" in result.stdout
    assert json.loads(topup.calls.last.request.content) == {"amount_cents": 2000}
    assert too_small.exit_code == 2
    assert topup.call_count == 1


def test_workflows_create_and_show(run: Any) -> None:
    created = workflow(1, status="draft", version=1, description="d", definition={"agents": ["a"]})
    with respx.mock:
        route = respx.post(f"{BASE}/workflows").respond(201, json=created)
        respx.get(f"{BASE}/workflows/wf_1").respond(200, json=created)
        result = run("workflows", "create", "--name", "triage-1", "--type", "crewai", "--description", "d")
        run("workflows", "create", "--name", "x", "--type", "custom", "--definition", '{"agents": ["a"]}')
        shown = run("workflows", "show", "wf_1")
        bad_type = run("workflows", "create", "--name", "x", "--type", "nope")
    assert result.exit_code == 0
    assert result.stdout.strip() == "wf_1 created (draft, version 1)"
    bodies = [json.loads(c.request.content) for c in route.calls]
    assert bodies == [
        {"name": "triage-1", "workflow_type": "crewai", "description": "d"},
        {"name": "x", "workflow_type": "custom", "definition": {"agents": ["a"]}},
    ]
    assert 'definition     {"agents": ["a"]}' in shown.stdout
    assert bad_type.exit_code == 2


# ---- errors ----


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [
        (404, "not_found", 3),
        (401, "unauthorized", 4),
        (409, "invalid_state", 5),
        (412, "version_mismatch", 5),
        (409, "idempotency_in_progress", 5),
        (422, "validation_failed", 6),
        (413, "payload_too_large", 6),
        (400, "malformed_request", 6),
        (402, "insufficient_credits", 7),
        (500, "internal", 1),
        (422, "idempotency_key_reused", 1),
    ],
)
def test_errors_exit_with_their_code_and_no_traceback(
    run: Any, status: int, code: str, exit_code: int
) -> None:
    with respx.mock:
        respx.post(f"{BASE}/executions/exec_1/pause").mock(return_value=problem(status, code))
        result = run("executions", "pause", "exec_1")
    assert result.exit_code == exit_code
    assert result.stderr.splitlines()[0] == f"error: {code}: the reason"
    assert "request id: req-1" in result.stderr
    assert "Traceback" not in printed(result)
    assert result.stdout == ""
    assert isinstance(result.exception, SystemExit)  # an exit code, not an exception


def test_field_errors_are_listed(run: Any) -> None:
    errors = [{"field": "name", "message": "must not be empty"}]
    with respx.mock:
        respx.post(f"{BASE}/workflows").mock(
            return_value=problem(422, "validation_failed", "invalid fields", errors=errors)
        )
        result = run("workflows", "create", "--name", "", "--type", "custom")
    assert result.exit_code == 6
    assert result.stderr.splitlines() == [
        "error: validation_failed: invalid fields",
        "  name: must not be empty",
        "request id: req-1",
    ]


def test_a_connection_error_is_exit_1(run: Any) -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/billing/balance").mock(side_effect=httpx.ConnectError("refused"))
        result = run("billing", "balance")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: connection_error: ")
    assert route.call_count == 4  # tried again, as the library does


def test_an_answer_the_models_do_not_know_is_an_error_not_a_traceback(run: Any) -> None:
    with respx.mock:
        respx.get(f"{BASE}/billing/balance").respond(200, json={"credits": "lots"})
        result = run("billing", "balance")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: unexpected_response: ")
    assert "Traceback" not in printed(result)


def test_without_a_key_it_says_how_to_get_one(run: Any) -> None:
    result = run("billing", "balance", env={"CAIRN_API_KEY": None})
    assert result.exit_code == 4
    assert result.stderr.startswith("error: unauthorized: no API key: run `cairn login`")


def test_a_broken_config_file_is_an_error_line(run: Any, config_home: Path) -> None:
    (config_home / "cairn").mkdir(parents=True)
    (config_home / "cairn" / "config.toml").write_text("[default\napi_key = \n")
    result = run("billing", "balance", env={"CAIRN_API_KEY": None})
    assert result.exit_code == 1
    assert result.stderr.startswith("error: config: ")
    assert "Traceback" not in printed(result)


def test_help_documents_the_exit_codes(run: Any) -> None:
    result = run("--help")
    assert result.exit_code == 0
    for line in [
        "0  ok",
        "2  usage",
        "3  not found",
        "4  unauthorized",
        "5  invalid state",
        "7  insufficient",
    ]:
        assert line in result.stdout
    assert run("executions", "nope").exit_code == 2


# ---- login and profiles ----


def test_login_verifies_and_writes_the_profile_0600_without_printing_the_key(
    run: Any, config_home: Path
) -> None:
    path = config_home / "cairn" / "config.toml"
    with respx.mock:
        route = respx.get(f"{BASE}/billing/balance").respond(200, json=BALANCE)
        result = run("login", env={"CAIRN_API_KEY": None}, input=f"{KEY}\n")
        assert result.exit_code == 0, printed(result)
        assert route.calls.last.request.headers["X-API-Key"] == KEY
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert read_profiles(path) == {"default": {"api_key": KEY, "api_url": BASE}}
        assert KEY not in printed(result)
        assert str(path) in result.stdout
        assert list(path.parent.iterdir()) == [path]  # no temporary file left

        # A second profile keeps the first; --api-key does not prompt.
        other = run("login", "--profile", "staging", "--api-key", "other_key", "--api-url", f"{BASE}/")
        assert other.exit_code == 0, printed(other)
        assert "other_key" not in printed(other)
    profiles = read_profiles(path)
    assert profiles["default"]["api_key"] == KEY
    assert profiles["staging"] == {"api_key": "other_key", "api_url": f"{BASE}/"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_key_on_the_command_line_is_warned_about_and_stdin_is_read_without_a_prompt(
    run: Any, config_home: Path
) -> None:
    with respx.mock:
        respx.get(f"{BASE}/billing/balance").respond(200, json=BALANCE)
        flagged = run("--api-key", KEY, "billing", "balance")
        assert flagged.exit_code == 0, printed(flagged)
        assert "shell history" in flagged.stderr
        piped = run("login", env={"CAIRN_API_KEY": None}, input=f"  {KEY}  \nignored\n")
        assert piped.exit_code == 0, printed(piped)
        assert "shell history" not in piped.stderr
        assert "API key:" not in printed(piped), "no prompt when the key comes from a pipe"
    assert read_profiles(config_home / "cairn" / "config.toml")["default"]["api_key"] == KEY


def test_plain_http_to_another_machine_needs_insecure_which_login_keeps(run: Any, config_home: Path) -> None:
    plain = "http://cairn.internal/api/v1"
    with respx.mock:
        balance = respx.get(f"{plain}/billing/balance").respond(200, json=BALANCE)
        refused = run("billing", "balance", env={"CAIRN_API_URL": plain})
        assert refused.exit_code == 1
        assert "error: insecure_url:" in refused.stderr
        assert "--insecure" in refused.stderr
        assert not balance.called
        allowed = run("--insecure", "billing", "balance", env={"CAIRN_API_URL": plain})
        assert allowed.exit_code == 0, printed(allowed)
        # Login with --insecure keeps the choice in the profile, for later commands.
        login = run(
            "--insecure",
            "login",
            "--api-url",
            plain,
            env={"CAIRN_API_KEY": None, "CAIRN_API_URL": None},
            input=f"{KEY}\n",
        )
        assert login.exit_code == 0, printed(login)
        later = run("billing", "balance", env={"CAIRN_API_KEY": None, "CAIRN_API_URL": None})
        assert later.exit_code == 0, printed(later)
    assert read_profiles(config_home / "cairn" / "config.toml")["default"]["allow_insecure"] == "true"


def test_login_with_a_refused_key_writes_nothing(run: Any, config_home: Path) -> None:
    with respx.mock:
        respx.get(f"{BASE}/billing/balance").mock(return_value=problem(401, "unauthorized", "unknown key"))
        result = run("login", "--api-key", "bad_key")
    assert result.exit_code == 4
    assert "error: unauthorized: unknown key" in result.stderr
    assert "bad_key" not in printed(result)
    assert not (config_home / "cairn" / "config.toml").exists()


def test_precedence_flag_then_environment_then_profile(run: Any, config_home: Path) -> None:
    path = config_home / "cairn" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        '# written by hand\n[default]\napi_key = "file_key"\napi_url = "https://file.test/api/v1"\n\n'
        "[other]\napi_key = 'other_file_key'  # a literal string\n"
    )
    no_env: dict[str, str | None] = {"CAIRN_API_KEY": None, "CAIRN_API_URL": None}
    with respx.mock:
        file_host = respx.get("https://file.test/api/v1/billing/balance").respond(200, json=BALANCE)
        env_host = respx.get(f"{BASE}/billing/balance").respond(200, json=BALANCE)
        flag_host = respx.get("https://flag.test/api/v1/billing/balance").respond(200, json=BALANCE)

        assert run("billing", "balance", env=no_env).exit_code == 0
        assert file_host.calls.last.request.headers["X-API-Key"] == "file_key"

        assert (
            run("billing", "balance", env={"CAIRN_API_KEY": "env_key", "CAIRN_API_URL": None}).exit_code == 0
        )
        assert file_host.calls.last.request.headers["X-API-Key"] == "env_key"  # the URL still from the file

        assert run("billing", "balance", env={"CAIRN_API_KEY": "env_key"}).exit_code == 0
        assert env_host.calls.last.request.headers["X-API-Key"] == "env_key"

        flags = ["--api-key", "flag_key", "--api-url", "https://flag.test/api/v1"]
        assert run(*flags, "billing", "balance", env={"CAIRN_API_KEY": "env_key"}).exit_code == 0
        assert flag_host.calls.last.request.headers["X-API-Key"] == "flag_key"

        assert run("--profile", "other", "billing", "balance", env={"CAIRN_API_KEY": None}).exit_code == 0
        assert env_host.calls.last.request.headers["X-API-Key"] == "other_file_key"
    missing = run("--profile", "nope", "billing", "balance", env=no_env)
    assert missing.exit_code == 4
    assert "profile 'nope'" in missing.stderr


# ---- the profile file format ----


TOML = """\
# cairn profiles
[default]
api_key = "cairn_abc"   # trailing comment
api_url = "https://x.test/api/v1"

["with.dot"]
api_key = 'C:\\raw'
note = "tab\\tquote\\" unicode \\u00e9"
"""


def test_the_minimal_toml_parser_reads_what_tomllib_reads() -> None:
    expected = {
        "default": {"api_key": "cairn_abc", "api_url": "https://x.test/api/v1"},
        "with.dot": {"api_key": "C:\\raw", "note": 'tab\tquote" unicode é'},
    }
    assert parse_minimal_toml(TOML) == expected
    if sys.version_info >= (3, 11):
        import tomllib

        assert tomllib.loads(TOML) == expected


@pytest.mark.parametrize(
    "text", ["[default]\napi_key = 3\n", 'api_key = "top level"\n', '[a]\nx = "1" y\n', "[a\n"]
)
def test_the_minimal_toml_parser_refuses_what_it_does_not_know(text: str) -> None:
    with pytest.raises(ValueError, match="line"):
        parse_minimal_toml(text)


def test_what_login_writes_reads_back_with_either_parser() -> None:
    profiles = {"default": {"api_key": 'k"\\é', "api_url": "http://x"}, "a b": {"api_key": "k2"}}
    text = toml_dumps(profiles)
    assert parse_minimal_toml(text) == profiles
    if sys.version_info >= (3, 11):
        import tomllib

        assert tomllib.loads(text) == profiles


# ---- keys ----

SECRET = "cairn_" + "s" * 43


def api_key(n: int, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"key_{n}",
        "name": f"key {n}",
        "prefix": "cairn_abcd",
        "created_at": T,
        "revoked_at": None,
        "scopes": ["*"],
        "expires_at": None,
    }
    return {**body, **fields}


def test_keys_list_as_a_table_and_as_the_apis_json(run: Any) -> None:
    keys = [
        api_key(2, name="CI deploys", scopes=["executions:read", "keys:write"], expires_at=T),
        api_key(1, revoked_at=T),
    ]
    with respx.mock:
        respx.get(f"{BASE}/keys").respond(
            200, json={"items": keys, "total": 2, "limit": 100, "has_more": False}
        )
        table = run("keys", "list")
        as_json = run("keys", "list", "--json")
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "prefix", "scopes", "created_at", "expires_at", "revoked_at"]
    assert lines[1].split() == [
        "key_2",
        "CI",
        "deploys",
        "cairn_abcd",
        "executions:read",
        "keys:write",
        "2026-11-24T10:00:00Z",
        "2026-11-24T10:00:00Z",
    ]
    assert lines[2].split() == [
        "key_1",
        "key",
        "1",
        "cairn_abcd",
        "*",
        "2026-11-24T10:00:00Z",
        "2026-11-24T10:00:00Z",
    ]
    assert json.loads(as_json.stdout) == keys


def test_keys_create_sends_scopes_and_expiry_and_refuses_a_bad_time(run: Any) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/keys").respond(201, json={**api_key(3, name="CI"), "key": SECRET})
        made = run(
            "keys",
            "create",
            "--name",
            "CI",
            "--scope",
            "executions:read",
            "--scope",
            "checkpoints:write",
            "--expires-at",
            "2027-01-01T00:00:00Z",
        )
        assert made.exit_code == 0, printed(made)
        sent = json.loads(route.calls.last.request.content)
        assert sent == {
            "name": "CI",
            "scopes": ["executions:read", "checkpoints:write"],
            "expires_at": "2027-01-01T00:00:00Z",
        }
        plain = run("keys", "create", "--name", "all")
        assert json.loads(route.calls.last.request.content) == {"name": "all"}, "no scopes: the API decides"
        assert plain.exit_code == 0
        for bad in ["tomorrow", "2027-01-01T00:00:00"]:
            refused = run("keys", "create", "--name", "x", "--expires-at", bad)
            assert refused.exit_code == 2, printed(refused)
        assert route.call_count == 2, "nothing sent for a bad time"


def test_keys_create_prints_the_secret_once_with_a_note(run: Any) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/keys").respond(201, json={**api_key(3, name="CI"), "key": SECRET})
        shown = run("keys", "create", "--name", "CI")
        as_json = run("--json", "keys", "create", "--name", "CI")
        nameless = run("keys", "create")
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.splitlines() == ["key_3 created (CI, prefix cairn_abcd)", f"secret: {SECRET}"]
    assert "shown this once" in shown.stderr
    assert json.loads(as_json.stdout)["key"] == SECRET
    assert "shown this once" in as_json.stderr
    assert json.loads(route.calls.last.request.content) == {"name": "CI"}
    assert (nameless.exit_code, route.call_count) == (2, 2)


def test_keys_create_without_the_secret_in_the_answer_says_what_to_do(run: Any) -> None:
    with respx.mock:
        respx.post(f"{BASE}/keys").mock(
            side_effect=[httpx.ConnectError("reset"), httpx.Response(201, json={**api_key(3), "key": None})]
        )
        result = run("keys", "create", "--name", "CI")
    assert result.exit_code == 1
    assert "secret" not in result.stdout
    assert result.stderr.startswith("error: no_secret: key_3 was made by an earlier try")
    assert "cairn keys revoke key_3" in result.stderr


def test_keys_revoke_and_the_last_live_key_refused(run: Any) -> None:
    last = "invalid state: key key_1 is the tenant's last live key; create another before revoking it"
    with respx.mock:
        revoked = respx.delete(f"{BASE}/keys/key_2").respond(204)
        respx.delete(f"{BASE}/keys/key_1").mock(return_value=problem(409, "invalid_state", last))
        respx.delete(f"{BASE}/keys/key_9").mock(return_value=problem(401, "unauthorized", "revoked"))
        done = run("keys", "revoke", "key_2")
        quiet = run("--json", "keys", "revoke", "key_2")
        refused = run("keys", "revoke", "key_1")
        unauthorized = run("keys", "revoke", "key_9")
    assert (done.exit_code, done.stdout) == (0, "key_2 revoked\n")
    assert (quiet.exit_code, quiet.stdout) == (0, "")
    assert revoked.call_count == 2
    assert refused.exit_code == 5
    assert refused.stderr.splitlines()[0] == f"error: invalid_state: {last}"
    assert unauthorized.exit_code == 4


@pytest.mark.parametrize("client", ["claude-code", "claude-desktop", "cursor", "vscode"])
def test_mcp_config_points_each_client_at_the_profiles_api_and_leaves_the_key_out(
    run: Any, client: str
) -> None:
    result = run("mcp", "config", "--client", client)
    assert result.exit_code == 0, printed(result)
    assert KEY not in printed(result)
    assert f"{BASE}/mcp" in result.stdout
    if client == "claude-code":
        header = '"Authorization: Bearer $CAIRN_API_KEY"'
        assert result.stdout.strip() == f"claude mcp add --transport http cairn {BASE}/mcp --header {header}"
        return
    config = json.loads(result.stdout)
    if client == "claude-desktop":
        server = config["mcpServers"]["cairn"]
        assert server["args"] == [
            "-y",
            "mcp-remote",
            f"{BASE}/mcp",
            "--header",
            "Authorization:${CAIRN_AUTH}",
        ]
        assert server["env"] == {"CAIRN_AUTH": "Bearer YOUR_CAIRN_API_KEY"}
    elif client == "cursor":
        assert config == {
            "mcpServers": {
                "cairn": {"url": f"{BASE}/mcp", "headers": {"Authorization": "Bearer ${env:CAIRN_API_KEY}"}}
            }
        }
    else:
        assert config["servers"]["cairn"]["headers"] == {"Authorization": "Bearer ${input:cairn-api-key}"}
        assert config["inputs"][0]["password"] is True


def test_mcp_config_writes_the_key_in_only_when_asked(run: Any, config_home: Path) -> None:
    shown = run("mcp", "config", "--client", "cursor", "--show-key")
    assert shown.exit_code == 0, printed(shown)
    assert json.loads(shown.stdout)["mcpServers"]["cairn"]["headers"]["Authorization"] == f"Bearer {KEY}"
    # The profile's URL and key when the environment has none.
    path = config_home / "cairn" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        toml_dumps({"default": {"api_key": "cairn_saved", "api_url": "https://eu.cairn.test/api/v1/"}})
    )
    saved = run("mcp", "config", "--show-key", env={"CAIRN_API_KEY": None, "CAIRN_API_URL": None})
    assert "https://eu.cairn.test/api/v1/mcp" in saved.stdout
    assert "'Authorization: Bearer cairn_saved'" in saved.stdout
    missing = run("--profile", "none", "mcp", "config", "--show-key", env={"CAIRN_API_KEY": None})
    assert missing.exit_code != 0
    assert "no API key" in missing.stderr
