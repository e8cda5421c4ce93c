"""Tracing without a server: steps, failures, resume (respx mocks the API)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from cairn import Cairn, Run
from cairn.tracing import error_type

from .test_client import BASE, execution


class Api:
    """A tiny in-memory Cairn behind respx: one workflow, executions and checkpoints."""

    def __init__(self) -> None:
        self.executions: dict[str, dict[str, Any]] = {}
        self.checkpoints: list[dict[str, Any]] = []
        self.failed: list[dict[str, Any]] = []

    def install(self, router: respx.MockRouter) -> None:
        workflow = {
            "id": "wf_1",
            "name": "triage",
            "description": None,
            "workflow_type": "crewai",
            "status": "draft",
            "metadata": {},
            "retention": None,
            "version": 1,
            "created_at": "2026-11-24T10:00:00Z",
            "updated_at": "2026-11-24T10:00:00Z",
        }
        router.get(f"{BASE}/workflows").respond(
            200, json={"items": [workflow], "total": 1, "page": 1, "page_size": 100}
        )
        router.post(f"{BASE}/executions").mock(side_effect=self.start)
        router.post(url__regex=rf"{BASE}/executions/(?P<id>[^/]+)/(?P<action>\w+)").mock(side_effect=self.act)
        router.get(url__regex=rf"{BASE}/executions/(?P<id>[^/]+)$").mock(side_effect=self.get)
        router.post(f"{BASE}/checkpoints").mock(side_effect=self.checkpoint)
        router.get(f"{BASE}/checkpoints").mock(side_effect=self.list_checkpoints)
        router.get(url__regex=rf"{BASE}/checkpoints/(?P<id>[^/?]+)").mock(side_effect=self.get_checkpoint)

    def start(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        e = execution(f"exec_{len(self.executions) + 1}", input=body.get("input"))
        self.executions[e["id"]] = e
        return httpx.Response(201, json=e)

    def get(self, request: httpx.Request, id: str) -> httpx.Response:
        return httpx.Response(200, json=self.executions[id])

    def act(self, request: httpx.Request, id: str, action: str) -> httpx.Response:
        e = self.executions[id]
        body = json.loads(request.content or b"{}")
        if action == "fail":
            e["status"] = "failed"
            self.failed.append(body)
        elif action == "complete":
            e["status"], e["output"] = "completed", body.get("output")
        elif action == "replay":
            e["status"], e["attempt"] = "running", e["attempt"] + 1
        return httpx.Response(200, json=e)

    def checkpoint(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        e = self.executions[body["execution_id"]]
        assert e["status"] == "running", "checkpoints only while running"
        c = {
            "id": f"cp_{len(self.checkpoints) + 1}",
            "execution_id": e["id"],
            "workflow_id": "wf_1",
            "sequence": len(self.checkpoints) + 1,
            "name": body.get("name"),
            "key": body.get("key"),
            "parent_checkpoint_id": e["current_checkpoint_id"],
            "attempt": e["attempt"],
            "metadata": {},
            "state_size_bytes": 1,
            "created_at": "2026-11-24T10:00:00Z",
            "state": body["state"],
        }
        self.checkpoints.append(c)
        e["current_checkpoint_id"] = c["id"]
        return httpx.Response(201, json={k: v for k, v in c.items() if k != "state"})

    def list_checkpoints(self, request: httpx.Request) -> httpx.Response:
        items = [{k: v for k, v in c.items() if k != "state"} for c in self.checkpoints]
        return httpx.Response(200, json={"items": items, "total": len(items), "limit": 200, "offset": 0})

    def get_checkpoint(self, request: httpx.Request, id: str) -> httpx.Response:
        c = next(c for c in self.checkpoints if c["id"] == id)
        return httpx.Response(200, json=c)


@pytest.fixture
def api() -> Any:
    state = Api()
    with respx.mock(assert_all_called=False) as router:
        state.install(router)
        yield state


class Flaky(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.agent_name = "writer"


def test_a_traced_workflow_fails_then_resumes_without_rerunning_recorded_steps(api: Api) -> None:
    client = Cairn("k", base_url=BASE)
    calls: list[str] = []
    broken = [True]

    @client.workflow("triage", workflow_type="crewai")
    def triage(run: Run, ticket: str) -> dict[str, Any]:
        plan = run.step("plan", lambda t: calls.append("plan") or {"plan": t}, ticket)
        draft = run.step("draft", lambda p: calls.append("draft") or f"draft of {p['plan']}", plan)
        calls.append("publish")
        if broken[0]:
            raise Flaky("the writer crashed")
        return {"reply": run.step("reply", lambda d: d.upper(), draft)}

    with pytest.raises(Flaky):
        triage("T-1")
    assert calls == ["plan", "draft", "publish"]
    failure = api.failed[0]
    assert (failure["error_type"], failure["message"]) == ("FLAKY", "the writer crashed")
    assert failure["details"]["agent_name"] == "writer"
    assert "Traceback" in failure["details"]["traceback"]
    assert api.executions["exec_1"]["input"] == {"args": ["T-1"], "kwargs": {}}

    client.executions.replay("exec_1")
    broken[0] = False
    calls.clear()
    assert triage.resume("exec_1") == {"reply": "DRAFT OF T-1"}
    assert calls == ["publish"], "plan and draft returned their recorded results"
    assert api.executions["exec_1"]["status"] == "completed"
    assert [c["name"] for c in api.checkpoints] == ["plan", "draft", "reply"]


@dataclass
class Plan:
    steps: list[str]


class Reply(BaseModel):
    text: str


def test_step_results_must_be_json(api: Api) -> None:
    client = Cairn("k", base_url=BASE)
    with client.trace("wf_1", input={"q": 1}) as run:
        assert run.step("plan", lambda: Plan(["a"])) == {"steps": ["a"]}
        assert run.step("reply", lambda: Reply(text="hi")) == {"text": "hi"}
        run.output = "done"
    assert api.executions["exec_1"]["output"] == "done"
    with pytest.raises(TypeError, match="'embed'"), client.trace("wf_1") as run:
        run.step("embed", lambda: object())
    assert len(api.checkpoints) == 2, "nothing was sent for the bad step"
    assert api.failed[-1]["error_type"] == "TYPE_ERROR"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("ValueError", "VALUE_ERROR"), ("HTTPTimeout", "HTTP_TIMEOUT"), ("_Private", "PRIVATE"), ("E", "E")],
)
def test_error_types_are_upper_snake_case(name: str, expected: str) -> None:
    assert error_type(type(name, (Exception,), {})()) == expected
