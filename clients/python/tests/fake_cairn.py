"""An in-memory Cairn behind respx, for tests without a server: workflows, executions
(with keys, statuses, replays, rollbacks, DELETE that takes several requests),
checkpoints (keys, newest-first lists, metadata filters), writes and failures, as
``docs/api.md`` and ``infra/openapi.yaml`` describe them. It checks requests
as the API does (metadata bounds, keys, write indexes), so a client that breaks a rule
gets the API's 422 here too."""

from __future__ import annotations

import gzip
import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
import respx

BASE = "https://cairn.test/api/v1"
IDS = itertools.count(1)
NOW = "2026-11-24T10:00:00.000Z"


@pytest.fixture
def fake() -> Iterator[FakeCairn]:
    """A test's own in-memory Cairn, answering every request to :data:`BASE`."""
    api = FakeCairn()
    with respx.mock(assert_all_called=False) as router:
        api.install(router)
        yield api


class Problem(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        detail: str = "",
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status, self.code, self.detail, self.errors = status, code, detail or code, errors or []
        self.headers = headers or {}

    def response(self) -> httpx.Response:
        body = {"type": "about:blank", "title": self.code, "status": self.status, "detail": self.detail}
        body |= {"code": self.code, "request_id": "req-fake", "errors": self.errors}
        headers = {"Content-Type": "application/problem+json", **self.headers}
        return httpx.Response(self.status, json=body, headers=headers)


def invalid(field: str, message: str) -> Problem:
    return Problem(422, "validation_failed", f"{field} {message}", [{"field": field, "message": message}])


def control(s: str, allow_text: bool = False) -> bool:
    """Whether ``s`` holds a control character the API refuses."""
    if allow_text:
        return any(c < " " and c not in "\t\n\r" for c in s)
    return any(c < " " or "\x7f" <= c <= "\x9f" for c in s)


def check_key(field: str, value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 256 or control(value):
        raise invalid(field, "must be 1 to 256 characters without control characters")
    return value


def check_metadata(field: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > 50:
        raise invalid(field, "must be an object of at most 50 string values")
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > 16 * 1024:
        raise invalid(field, "must be at most 16384 bytes as JSON")
    for k, v in value.items():
        if not 1 <= len(k) <= 40 or not isinstance(v, str) or len(v) > 500:
            raise invalid(field, f"key {k!r} must be 1 to 40 characters, its value a string of at most 500")
        if control(k, True) or control(v, True):
            raise invalid(field, "no control characters")
    return dict(value)


class FakeCairn:
    """The API's state and its routes. ``delete_rounds``: how many 202s a DELETE of an
    execution with checkpoints answers before its 204."""

    def __init__(self, delete_rounds: int = 0) -> None:
        self.ids = IDS  # ids are unique across instances (tenants), as the API's are
        self.workflows: dict[str, dict[str, Any]] = {}
        self.executions: dict[str, dict[str, Any]] = {}
        self.checkpoints: dict[str, dict[str, Any]] = {}  # id -> body with "state"
        self.writes: dict[str, list[dict[str, Any]]] = {}
        #: Checkpoints recorded with ``pending_writes``.
        self.pending_writes_sent = 0
        #: A checkpoint with pending writes larger than this is 413 (DynamoDB's 4 MB).
        self.one_transaction_bytes: int | None = None
        self.failures: list[dict[str, Any]] = []
        self.purging: dict[str, int] = {}  # deleted execution -> 202s left
        self.last_sequence: dict[str, int] = {}  # execution -> highest sequence given (never reused)
        self.delete_rounds = delete_rounds
        self.requests: list[tuple[str, str]] = []
        #: Called before each request is answered (a test changes the state behind the client).
        self.before: Callable[[str, str], None] | None = None

    def install(self, router: respx.MockRouter) -> None:
        router.route(url__startswith=BASE).mock(side_effect=self.handle)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids):032x}"

    # ---- dispatch ----

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = urlsplit(str(request.url))
        path = url.path[len(urlsplit(BASE).path) :]
        query = parse_qsl(url.query, keep_blank_values=True)
        body: Any = None
        if request.content:
            raw = request.content
            if request.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            body = json.loads(raw)
        self.requests.append((request.method, path))
        try:
            if self.before is not None:
                self.before(request.method, path)
            status, answer = self.route(request.method, path, query, body)
        except Problem as p:
            return p.response()
        if status == 204:
            return httpx.Response(204)
        return httpx.Response(status, json=answer)

    def route(self, method: str, path: str, query: list[tuple[str, str]], body: Any) -> tuple[int, Any]:
        routes: list[tuple[str, str, Callable[..., tuple[int, Any]]]] = [
            ("GET", r"/workflows", self.list_workflows),
            ("POST", r"/workflows", self.create_workflow),
            ("GET", r"/executions", self.list_executions),
            ("POST", r"/executions", self.start),
            ("GET", r"/executions/([^/]+)", self.get_execution),
            ("DELETE", r"/executions/([^/]+)", self.delete_execution),
            ("POST", r"/executions/([^/]+)/(\w+)", self.act),
            ("GET", r"/checkpoints", self.list_checkpoints),
            ("POST", r"/checkpoints", self.create_checkpoint),
            ("GET", r"/checkpoints/([^/]+)/writes", self.list_writes),
            ("POST", r"/checkpoints/([^/]+)/writes", self.put_writes),
            ("GET", r"/checkpoints/([^/]+)", self.get_checkpoint),
            ("DELETE", r"/checkpoints/([^/]+)", self.delete_checkpoint),
            ("GET", r"/failures", self.list_failures),
            ("GET", r"/failures/([^/]+)", self.get_failure),
        ]
        for m, pattern, fn in routes:
            found = re.fullmatch(pattern, path)
            if m == method and found:
                return fn(dict(query), query, body, *found.groups())
        raise Problem(404, "not_found", f"no route {method} {path}")

    # ---- workflows ----

    def create_workflow(self, params: dict[str, str], _q: Any, body: Any) -> tuple[int, Any]:
        w = {
            "id": self.next_id("wf"),
            "name": body["name"],
            "description": None,
            "workflow_type": body["workflow_type"],
            "status": "draft",
            "metadata": {},
            "version": 1,
            "created_at": NOW,
            "updated_at": NOW,
            "definition": None,
            "retention": None,
        }
        self.workflows[w["id"]] = w
        return 201, w

    def list_workflows(self, params: dict[str, str], _q: Any, _b: Any) -> tuple[int, Any]:
        items = sorted(self.workflows.values(), key=lambda w: w["id"], reverse=True)
        return 200, self.page(items, params, "page_size", 20)

    def page(self, items: list[dict[str, Any]], params: dict[str, str], size: str, default: int) -> Any:
        n = int(params.get(size, default))
        if "starting_after" in params:
            ids = [i["id"] for i in items]
            if params["starting_after"] not in ids:
                raise Problem(404, "not_found", "cursor")
            items = items[ids.index(params["starting_after"]) + 1 :]
        shown = [
            {k: v for k, v in i.items() if k not in ("definition", "state", "input", "output")} for i in items
        ]
        answer: dict[str, Any] = {"items": shown[:n], "total": len(items)}
        return answer | ({"page": 1, "page_size": n} if size == "page_size" else {"limit": n, "offset": 0})

    # ---- executions ----

    def start(self, _p: Any, _q: Any, body: Any) -> tuple[int, Any]:
        if body["workflow_id"] not in self.workflows:
            raise Problem(404, "not_found", "workflow")
        key = body.get("key")
        if key is not None:
            check_key("key", key)
            for e in self.executions.values():
                if e["workflow_id"] == body["workflow_id"] and e["key"] == key:
                    return 200, e
        e = {
            "id": self.next_id("exec"),
            "workflow_id": body["workflow_id"],
            "status": "running",
            "input": body.get("input"),
            "output": None,
            "error": None,
            "cancel_reason": None,
            "key": key,
            "metadata": check_metadata("metadata", body.get("metadata", {})),
            "tags": body.get("tags", {}),
            "attempt": 1,
            "current_checkpoint_id": None,
            "checkpoint_count": 0,
            "created_at": NOW,
            "updated_at": NOW,
            "ended_at": None,
            "expires_at": None,
            "checkpoints_expire_at": None,
        }
        self.executions[e["id"]] = e
        return 201, e

    def execution(self, id: str) -> dict[str, Any]:
        if id not in self.executions:
            raise Problem(404, "not_found", f"execution {id}")
        return self.executions[id]

    def get_execution(self, _p: Any, _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        return 200, self.execution(id)

    def list_executions(self, params: dict[str, str], _q: Any, _b: Any) -> tuple[int, Any]:
        if "key" in params and "workflow_id" not in params:
            raise invalid("key", "needs workflow_id")
        items = sorted(self.executions.values(), key=lambda e: e["id"], reverse=True)
        for name in ("workflow_id", "status", "key"):
            if name in params:
                items = [e for e in items if e[name] == params[name]]
        return 200, self.page(items, params, "page_size", 20)

    def delete_execution(self, _p: Any, _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        if id in self.purging:
            left = self.purging[id]
            if left == 0:
                del self.purging[id]
                return 204, None
            self.purging[id] = left - 1
            return 202, {"id": id, "deleted": True, "remaining": True}
        e = self.execution(id)
        del self.executions[e["id"]]
        for cid in [c for c, cp in self.checkpoints.items() if cp["execution_id"] == id]:
            del self.checkpoints[cid]
            self.writes.pop(cid, None)
        if self.delete_rounds:
            self.purging[id] = self.delete_rounds - 1
            return 202, {"id": id, "deleted": True, "remaining": True}
        return 204, None

    def act(self, _p: Any, _q: Any, body: Any, id: str, action: str) -> tuple[int, Any]:
        e = self.execution(id)
        allowed = {
            "complete": ["running"],
            "fail": ["running"],
            "pause": ["running"],
            "cancel": ["running", "paused"],
            "replay": ["failed", "paused"],
            "rollback": ["running", "paused", "failed"],
        }[action]
        if e["status"] not in allowed:
            raise Problem(409, "invalid_state", f"execution {id} is {e['status']}; {action} is not allowed")
        body = body or {}
        if action == "complete":
            e |= {"status": "completed", "output": body.get("output"), "ended_at": NOW}
        elif action == "fail":
            if not re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", body.get("error_type", "")):
                raise invalid("error_type", "must match ^[A-Z][A-Z0-9_]{0,63}$")
            message = body.get("message", "")
            if not 1 <= len(message) <= 4096 or control(message, True):
                raise invalid("message", "must be 1 to 4096 characters")
            e |= {"status": "failed", "error": {"error_type": body["error_type"], "message": message}}
            e["ended_at"] = NOW
            self.failures.append(
                {
                    "id": self.next_id("fail"),
                    "execution_id": id,
                    "workflow_id": e["workflow_id"],
                    "error_type": body["error_type"],
                    "message": message,
                    "status": "open",
                    "created_at": NOW,
                    "resolved_at": None,
                    "resolved_by": None,
                    "group_id": "fgrp_" + "0" * 32,
                    "fingerprint": message,
                    "details": body.get("details", {}),
                    "recovery_commands": [],
                }
            )
        elif action == "pause":
            e["status"] = "paused"
        elif action == "cancel":
            e |= {"status": "cancelled", "cancel_reason": body.get("reason"), "ended_at": NOW}
        elif action == "replay":
            point = body.get("checkpoint_id", e["current_checkpoint_id"])
            if point is not None:
                self.own_checkpoint(e, point)
            e |= {"status": "running", "attempt": e["attempt"] + 1, "error": None, "ended_at": None}
            e["current_checkpoint_id"] = point
        elif action == "rollback":
            target = self.own_checkpoint(e, body["checkpoint_id"])
            later = [c for c in self.checkpoints.values() if c["execution_id"] == id]
            later = [c for c in later if c["sequence"] > target["sequence"]]
            for c in later:
                del self.checkpoints[c["id"]]
                self.writes.pop(c["id"], None)
            e |= {"status": "paused", "current_checkpoint_id": target["id"], "error": None}
            e["checkpoint_count"] -= len(later)
            return 200, e | {"discarded_checkpoints": len(later)}
        return 200, e

    def own_checkpoint(self, e: dict[str, Any], id: str) -> dict[str, Any]:
        c = self.checkpoints.get(id)
        if c is None or c["execution_id"] != e["id"]:
            raise Problem(404, "not_found", f"checkpoint {id}")
        return c

    # ---- checkpoints ----

    def create_checkpoint(self, _p: Any, _q: Any, body: Any) -> tuple[int, Any]:
        e = self.execution(body["execution_id"])
        if not isinstance(body.get("state"), dict):
            raise invalid("state", "must be a JSON object")
        name = body.get("name")
        if name is not None and (not 1 <= len(name) <= 200 or control(name, True)):
            raise invalid("name", "must be 1 to 200 characters")
        metadata = check_metadata("metadata", body.get("metadata", {}))
        pending = body.get("pending_writes")
        if pending is not None:  # stored first here; the API stores both in one transaction
            self.own_checkpoint(e, pending["checkpoint_id"])
            if self.one_transaction_bytes is not None and len(json.dumps(body)) > self.one_transaction_bytes:
                raise Problem(
                    413, "payload_too_large", "the state and the pending writes pass one transaction"
                )
            self.pending_writes_sent += 1
        key = body.get("key")
        if key is not None:
            check_key("key", key)
            for c in self.checkpoints.values():
                if c["execution_id"] == e["id"] and c["key"] == key:
                    for task in pending["tasks"] if pending else []:
                        self.put_writes(None, None, task, pending["checkpoint_id"])
                    return 200, {k: v for k, v in c.items() if k != "state"}
        if e["status"] != "running":
            raise Problem(409, "invalid_state", f"execution {e['id']} is {e['status']}")
        size = len(json.dumps(body["state"], separators=(",", ":"), ensure_ascii=False).encode())
        if size > 4 * 1024 * 1024:
            raise Problem(413, "payload_too_large", "state")
        for task in pending["tasks"] if pending else []:
            self.put_writes(None, None, task, pending["checkpoint_id"])
        sequence = self.last_sequence.get(e["id"], 0)
        self.last_sequence[e["id"]] = sequence + 1
        c = {
            "id": self.next_id("cp"),
            "execution_id": e["id"],
            "workflow_id": e["workflow_id"],
            "sequence": sequence + 1,
            "name": name,
            "key": key,
            "parent_checkpoint_id": e["current_checkpoint_id"],
            "attempt": e["attempt"],
            "metadata": metadata,
            "state_size_bytes": size,
            "created_at": NOW,
            "state": json.loads(json.dumps(body["state"])),
        }
        self.checkpoints[c["id"]] = c
        e["current_checkpoint_id"] = c["id"]
        e["checkpoint_count"] += 1
        return 201, {k: v for k, v in c.items() if k != "state"}

    def list_checkpoints(
        self, params: dict[str, str], query: list[tuple[str, str]], _b: Any
    ) -> tuple[int, Any]:
        e = self.execution(params["execution_id"])
        items = sorted(
            (c for c in self.checkpoints.values() if c["execution_id"] == e["id"]),
            key=lambda c: c["sequence"],
        )
        order = params.get("order", "asc")
        if order not in ("asc", "desc"):
            raise invalid("order", "must be one of asc, desc")
        if order == "desc":
            items.reverse()
        if "key" in params:
            check_key("key", params["key"])
            items = [c for c in items if c["key"] == params["key"]]
        filters = {
            k[len("metadata[") : -1]: v for k, v in query if k.startswith("metadata[") and k.endswith("]")
        }
        for k, v in filters.items():
            if not 1 <= len(k) <= 40 or len(v) > 500:
                raise invalid(f"metadata[{k}]", "keys must be 1 to 40 characters and values at most 500")
        items = [c for c in items if all(c["metadata"].get(k) == v for k, v in filters.items())]
        if "starting_after" in params:
            cursor = self.own_checkpoint(e, params["starting_after"])
            if order == "desc":
                items = [c for c in items if c["sequence"] < cursor["sequence"]]
            else:
                items = [c for c in items if c["sequence"] > cursor["sequence"]]
            params = {k: v for k, v in params.items() if k != "starting_after"}
        limit = int(params.get("limit", 50))
        if not 1 <= limit <= 200:
            raise invalid("limit", "must be an integer from 1 to 200")
        return 200, self.page(items, params, "limit", 50)

    def get_checkpoint(self, params: dict[str, str], _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        if id not in self.checkpoints:
            raise Problem(404, "not_found", f"checkpoint {id}")
        c = self.checkpoints[id]
        if params.get("include_state") == "true":
            return 200, json.loads(json.dumps(c))
        return 200, {k: v for k, v in c.items() if k != "state"}

    def put_writes(self, _p: Any, _q: Any, body: Any, id: str) -> tuple[int, Any]:
        if id not in self.checkpoints:
            raise Problem(404, "not_found", f"checkpoint {id}")
        if set(body) - {"task_id", "task_path", "writes"}:
            raise invalid("body", "unknown fields")
        check_key("task_id", body["task_id"])
        task_path = body.get("task_path", "")
        if len(task_path) > 1024 or control(task_path):
            raise invalid("task_path", "must be at most 1024 characters")
        writes = body["writes"]
        if not 1 <= len(writes) <= 1000:
            raise invalid("writes", "must hold 1 to 1000 writes")
        for i, w in enumerate(writes):
            if set(w) != {"index", "channel", "value"}:
                raise invalid(f"writes[{i}]", "must be {index, channel, value}")
            if type(w["index"]) is not int or not -1000 <= w["index"] <= 1_000_000:
                raise invalid(f"writes[{i}].index", "must be an integer from -1000 to 1000000")
            check_key(f"writes[{i}].channel", w["channel"])
        e = self.execution(self.checkpoints[id]["execution_id"])
        if e["status"] != "running":
            raise Problem(409, "invalid_state", f"execution {e['id']} is {e['status']}")
        stored = self.writes.setdefault(id, [])
        for w in writes:
            item = {"task_id": body["task_id"], "task_path": task_path, **json.loads(json.dumps(w))}
            old = next(
                (
                    i
                    for i, s in enumerate(stored)
                    if (s["task_id"], s["index"]) == (body["task_id"], w["index"])
                ),
                None,
            )
            if old is None:
                stored.append(item)
            else:
                stored[old] = item
        return 200, {"checkpoint_id": id, "total": len(stored)}

    def delete_checkpoint(self, _p: Any, _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        c = self.checkpoints.get(id)
        if c is None or c["execution_id"] not in self.executions:
            raise Problem(404, "not_found", f"checkpoint {id}")
        e = self.executions[c["execution_id"]]
        del self.checkpoints[id]
        self.writes.pop(id, None)
        e["checkpoint_count"] -= 1
        if e["current_checkpoint_id"] == id:
            before = [x for x in self.checkpoints_of(e["id"]) if x["sequence"] < c["sequence"]]
            e["current_checkpoint_id"] = before[-1]["id"] if before else None
        return 204, None

    def list_writes(self, _p: Any, _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        if id not in self.checkpoints:
            raise Problem(404, "not_found", f"checkpoint {id}")
        items = self.writes.get(id, [])
        return 200, {"checkpoint_id": id, "items": items, "total": len(items)}

    def list_failures(self, _p: Any, _q: Any, _b: Any) -> tuple[int, Any]:
        items = [
            {k: v for k, v in f.items() if k not in ("details", "recovery_commands")} for f in self.failures
        ]
        return 200, {"items": items[::-1], "total": len(items), "limit": 200, "offset": 0}

    def get_failure(self, _p: Any, _q: Any, _b: Any, id: str) -> tuple[int, Any]:
        for f in self.failures:
            if f["id"] == id:
                return 200, f
        raise Problem(404, "not_found", f"failure {id}")

    # ---- for tests ----

    def only_execution(self) -> dict[str, Any]:
        (e,) = self.executions.values()
        return e

    def checkpoints_of(self, execution_id: str) -> list[dict[str, Any]]:
        return sorted(
            (c for c in self.checkpoints.values() if c["execution_id"] == execution_id),
            key=lambda c: c["sequence"],
        )

    def calls(self, method: str, pattern: str) -> int:
        return sum(1 for m, p in self.requests if m == method and re.fullmatch(pattern, p))
