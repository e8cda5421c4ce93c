"""The command line without a server (respx mocks the API; click's runner drives it)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from click.testing import CliRunner

from cairn.cli import cli, main

from .test_client import BASE, checkpoint_json, execution, problem, summary

KEY = "cairn_" + "k" * 43


def run(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    """Runs ``cairn`` as its entry point does; returns (exit code, stdout, stderr)."""
    runner = CliRunner()
    base = {"CAIRN_API_KEY": KEY, "CAIRN_API_URL": BASE, "XDG_CONFIG_HOME": "/nonexistent"}

    def entry() -> None:
        main(list(args))

    result = runner.invoke(
        _Entry(entry), [], env={**base, **(env or {})}, input=input, catch_exceptions=False
    )
    return result.exit_code, result.stdout, result.stderr


class _Entry:
    """Lets CliRunner run ``main`` (which exits with our codes) like a click command."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.name = "cairn"

    def main(self, args: Any = None, prog_name: Any = None, **_: Any) -> None:
        self.fn()


def page(items: list[dict[str, Any]], total: int) -> httpx.Response:
    return httpx.Response(200, json={"items": items, "total": total, "page": 1, "page_size": 100})


def test_a_list_as_a_table_and_as_the_apis_json() -> None:
    with respx.mock:
        respx.get(f"{BASE}/executions").mock(return_value=page([summary(2), summary(1)], 2))
        code, text, _ = run("executions", "list", "--status", "failed")
        assert code == 0
        assert "exec_2" in text
        assert "exec_1" in text
        code, text, _ = run("--json", "executions", "list")
    assert code == 0
    assert json.loads(text) == [summary(2), summary(1)]


def test_all_follows_the_cursor_and_without_it_says_what_is_left() -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/executions").mock(
            side_effect=[
                page([summary(3)] * 100, 101),
                page([summary(1)], 101),
                page([summary(3)] * 100, 101),
            ]
        )
        code, text, _ = run("--json", "executions", "list", "--all")
        assert code == 0
        assert len(json.loads(text)) == 101
        assert route.calls[1].request.url.params["starting_after"] == "exec_3"
        code, _, err = run("executions", "list")
    assert code == 0
    assert "showing 100 of 101" in err


def test_show_has_the_checkpoint_timeline() -> None:
    cp = checkpoint_json(name="plan", state_size_bytes=42)
    failed = execution(status="failed", error={"error_type": "AGENT_ERROR", "message": "bad tool"})
    with respx.mock:
        respx.get(f"{BASE}/executions/exec_1").respond(200, json=failed)
        respx.get(f"{BASE}/checkpoints").respond(
            200, json={"items": [cp], "total": 1, "limit": 200, "offset": 0}
        )
        code, text, _ = run("executions", "show", "exec_1")
    assert code == 0
    assert "AGENT_ERROR: bad tool" in text
    assert "cp_1" in text
    assert "plan" in text


def test_rollback_asks_first() -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/rollback").respond(
            200, json=execution(status="paused", discarded_checkpoints=2)
        )
        code, _, _ = run("executions", "rollback", "exec_1", "--to", "cp_1", input="n\n")
        assert code == 1
        assert not route.called
        code, text, _ = run("executions", "rollback", "exec_1", "--to", "cp_1", "--yes")
    assert code == 0
    assert "2 checkpoints discarded" in text


def test_a_state_to_a_file(tmp_path: Path) -> None:
    cp = checkpoint_json(state={"messages": ["hi"]})
    with respx.mock:
        route = respx.get(f"{BASE}/checkpoints/cp_1").respond(200, json=cp)
        code, _, _ = run("checkpoints", "show", "cp_1", "--output", str(tmp_path / "s.json"))
    assert code == 0
    assert route.calls.last.request.url.params["include_state"] == "true"
    assert json.loads((tmp_path / "s.json").read_text()) == {"messages": ["hi"]}


@pytest.mark.parametrize(
    ("status", "code_name", "exit_code"),
    [
        (404, "not_found", 3),
        (401, "unauthorized", 4),
        (409, "invalid_state", 5),
        (422, "validation_failed", 6),
        (402, "insufficient_credits", 7),
        (500, "internal", 1),
    ],
)
def test_errors_exit_with_their_code_and_no_traceback(status: int, code_name: str, exit_code: int) -> None:
    with respx.mock:
        respx.post(f"{BASE}/executions/exec_1/pause").mock(
            return_value=problem(status, code_name, "the reason")
        )
        code, _, err = run("executions", "pause", "exec_1")
    assert code == exit_code
    assert f"error: {code_name}: the reason" in err
    assert "request id: req-1" in err
    assert "Traceback" not in err


def test_login_keeps_the_key_readable_by_its_owner_only_and_never_prints_it(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), "CAIRN_API_KEY": ""}
    with respx.mock:
        respx.get(f"{BASE}/billing/balance").respond(200, json={"credits_balance": 1, "balance_usd": 0.01})
        code, text, err = run("login", env=env, input=f"{KEY}\n")
        assert code == 0, err
        path = tmp_path / "cairn" / "config.toml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert KEY not in text + err
        route = respx.get(f"{BASE}/billing/balance").respond(
            200, json={"credits_balance": 1, "balance_usd": 0.01}
        )
        # The profile is used when nothing else says otherwise; the environment wins over it,
        # and a flag over both.
        assert run("billing", "balance", env=env)[0] == 0
        assert route.calls.last.request.headers["X-API-Key"] == KEY
        run("billing", "balance", env={**env, "CAIRN_API_KEY": "from_env"})
        assert route.calls.last.request.headers["X-API-Key"] == "from_env"
        run("--api-key", "from_flag", "billing", "balance", env={**env, "CAIRN_API_KEY": "from_env"})
        assert route.calls.last.request.headers["X-API-Key"] == "from_flag"


def test_without_any_key_it_says_how_to_get_one() -> None:
    code, _, err = run("billing", "balance", env={"CAIRN_API_KEY": ""})
    assert code == 4
    assert "cairn login" in err


def test_help_documents_the_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "3 not found" in result.output


def test_all_shows_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr("cairn.cli.err", Console(file=screen, force_terminal=True, width=80))
    with respx.mock:
        respx.get(f"{BASE}/executions").mock(
            side_effect=[page([summary(3)] * 100, 101), page([summary(1)], 101)]
        )
        code, text, _ = run("--json", "executions", "list", "--all")
    assert code == 0
    assert len(json.loads(text)) == 101
    assert "reading pages" in screen.getvalue()


def test_workflows_create_sends_the_definition_as_json() -> None:
    created = {
        "id": "wf_1",
        "name": "triage",
        "description": None,
        "workflow_type": "crewai",
        "status": "draft",
        "definition": {"agents": ["a"]},
        "metadata": {},
        "version": 1,
        "created_at": "2026-11-24T10:00:00Z",
        "updated_at": "2026-11-24T10:00:00Z",
    }
    with respx.mock:
        route = respx.post(f"{BASE}/workflows").respond(201, json=created)
        code, text, _ = run(
            "workflows", "create", "--name", "triage", "--type", "crewai", "--definition", '{"agents": ["a"]}'
        )
        assert code == 0
        assert "wf_1 created (draft)" in text
        body = json.loads(route.calls.last.request.content)
        assert body == {"name": "triage", "workflow_type": "crewai", "definition": {"agents": ["a"]}}
        code, _, err = run("workflows", "create", "--name", "x", "--type", "crewai", "--definition", "{nope")
    assert code == 2
    assert "not JSON" in err
