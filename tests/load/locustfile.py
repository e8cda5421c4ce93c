"""Cairn's load test: many concurrent writers of one busy tenant, and many tenants at once.

Run by ``infra/scripts/load.sh`` (``make bench`` runs it against its local stack), or by
hand against any deployment::

    CAIRN_API_URL=https://…/api/v1 CAIRN_LOAD_KEYS=cairn_a,cairn_b,… \\
      .local/load-venv/bin/locust -f tests/load/locustfile.py --headless -u 32 -r 8 -t 60s

The first key of ``CAIRN_LOAD_KEYS`` is the busy tenant's: ``BusyTenant`` users (three
of four) all write as it. ``OtherTenant`` users write as the other keys, one each in
turn. A user's round is what an agent run does: start an execution, record
``CAIRN_LOAD_STEPS`` checkpoints of about 1 KiB (default 3), complete it; now and then
it reads the execution back. Every POST carries an ``Idempotency-Key`` and is sent
again with it after a 503 or a connection error (as the Python client does), so each
logical write counts once whatever the answers were; a 429 is waited out as
``Retry-After`` says, and counted.

When the run ends, each tenant is checked against what the users saw answered: its
executions (all, and completed) and their checkpoints, its balance against the credits
it had before the run (a start costs one credit, as `make dev` and `make bench` set it),
and its ledger (its usage entries, which gather the charges in batches, adding up to one
credit per start; every entry chaining to the one before; the newest at the balance).
Anything lost, or any 5xx but 503, makes locust exit non-zero.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import threading
import time
import uuid
from typing import Any

from locust import HttpUser, between, events, task

API = os.environ.get("CAIRN_API_URL", "http://127.0.0.1:3000/api/v1").rstrip("/")
KEYS = [k for k in os.environ.get("CAIRN_LOAD_KEYS", "").split(",") if k]
STEPS = int(os.environ.get("CAIRN_LOAD_STEPS", "3"))
STATE = {"notes": "x" * 1000}

_lock = threading.Lock()
_tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
_statuses: collections.Counter[int] = collections.Counter()
_before: dict[str, int] = {}
_workflows: dict[str, str] = {}
_next_other = 0


def _count(key: str, what: str) -> None:
    with _lock:
        _tally[key][what] += 1


def _headers(key: str) -> dict[str, str]:
    return {"X-API-Key": key, "Content-Type": "application/json"}


class _Writer(HttpUser):
    """One agent process writing runs as one tenant."""

    abstract = True
    host = API.rsplit("/api/v1", 1)[0]
    wait_time = between(0, 0.05)
    key = ""

    def post(self, path: str, body: dict[str, Any], name: str) -> dict[str, Any] | None:
        """POSTs until a definite answer: the same Idempotency-Key after a 503 or a lost
        connection, after Retry-After on a 429. None when refused for good."""
        headers = _headers(self.key) | {"Idempotency-Key": str(uuid.uuid4())}
        for _ in range(20):
            with self.client.post(
                f"/api/v1{path}", data=json.dumps(body), headers=headers, name=name, catch_response=True
            ) as response:
                status = response.status_code
                with _lock:
                    _statuses[status] += 1
                if status in (200, 201):
                    response.success()
                    return dict(response.json())
                # 409 idempotency_in_progress: an earlier try of this key is still running.
                in_progress = status == 409 and "idempotency_in_progress" in response.text
                if status in (429, 503) or status == 0 or in_progress:
                    response.success() if status == 429 else response.failure(f"{status}, sent again")
                    time.sleep(float(response.headers.get("Retry-After", "1") or 1) if status == 429 else 0.2)
                    continue
                response.failure(f"{status}: {response.text[:200]}")
                return None
        return None

    def workflow(self) -> str | None:
        with _lock:
            known = _workflows.get(self.key)
        if known:
            return known
        made = self.post("/workflows", {"name": "load test", "workflow_type": "custom"}, "POST /workflows")
        if made is None:
            return None
        with _lock:
            return _workflows.setdefault(self.key, str(made["id"]))

    @task
    def agent_run(self) -> None:
        workflow = self.workflow()
        if workflow is None:
            return
        started = self.post("/executions", {"workflow_id": workflow}, "POST /executions")
        if started is None:
            return
        _count(self.key, "starts")
        execution = started["id"]
        for step in range(STEPS):
            body = {"execution_id": execution, "name": f"step {step}", "state": STATE}
            if self.post("/checkpoints", body, "POST /checkpoints") is not None:
                _count(self.key, "checkpoints")
        if self.post(f"/executions/{execution}/complete", {"output": {"ok": True}}, "POST /complete"):
            _count(self.key, "completed")
        path, name = f"/api/v1/executions/{execution}", "GET /executions/{id}"
        read = self.client.get(path, headers=_headers(self.key), name=name)
        with _lock:
            _statuses[read.status_code] += 1


class BusyTenant(_Writer):
    """Writers of the first key's tenant, all at once."""

    weight = 3

    def on_start(self) -> None:
        self.key = KEYS[0]


class OtherTenant(_Writer):
    """Writers of the other tenants, one key each in turn."""

    weight = 1

    def on_start(self) -> None:
        global _next_other
        others = KEYS[1:] or KEYS
        with _lock:
            self.key = others[_next_other % len(others)]
            _next_other += 1


def _get(key: str, path: str) -> dict[str, Any]:
    import requests

    for _ in range(10):
        response = requests.get(f"{API}{path}", headers=_headers(key), timeout=30)
        if response.status_code == 200:
            return dict(response.json())
        time.sleep(float(response.headers.get("Retry-After", "1") or 1))
    raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:200]}")


def _balance(key: str) -> int:
    return int(_get(key, "/billing/balance")["credits_balance"])


@events.test_start.add_listener
def _remember_balances(environment: Any, **_: Any) -> None:
    if not KEYS:
        raise SystemExit("CAIRN_LOAD_KEYS is empty: give the keys of the tenants to load")
    for key in KEYS:
        _before[key] = _balance(key)


def _check(key: str) -> list[str]:
    """What the tenant's data says against what was answered: the problems found."""
    seen = _tally[key]
    problems = []
    workflow = _workflows.get(key)
    if workflow is None:
        return [] if not seen["starts"] else [f"{key[:12]}…: starts without a workflow"]
    executions = _get(key, f"/executions?workflow_id={workflow}&page_size=1")["total"]
    completed = _get(key, f"/executions?workflow_id={workflow}&status=completed&page_size=1")["total"]
    checkpoints = 0
    after = ""
    while True:
        page = _get(key, f"/executions?workflow_id={workflow}&page_size=100{after}")["items"]
        checkpoints += sum(int(item["checkpoint_count"]) for item in page)
        if len(page) < 100:
            break
        after = f"&starting_after={page[-1]['id']}"
    entries: list[dict[str, Any]] = []
    while True:
        after = f"&starting_after={entries[-1]['id']}" if entries else ""
        page = _get(key, f"/billing/transactions?page_size=100{after}")["items"]
        entries += page
        if len(page) < 100:
            break
    balance = _balance(key)
    charged = -sum(int(entry["amount"]) for entry in entries if entry["type"] == "usage")
    newest = int(entries[0]["credits_after"]) if entries else 0
    for name, found, expected in [
        ("executions", executions, seen["starts"]),
        ("completed executions", completed, seen["completed"]),
        ("checkpoints", checkpoints, seen["checkpoints"]),
        ("credits charged in usage entries", charged, seen["starts"]),
        ("balance", balance, _before[key] - seen["starts"]),
        ("the newest entry's balance", newest, balance),
    ]:
        if found != expected:
            problems.append(f"{key[:12]}…: {name} {found}, expected {expected}")
    for newer, older in itertools.pairwise(entries):
        if newer["credits_before"] != older["credits_after"]:
            problems.append(f"{key[:12]}…: the ledger does not chain at {newer['id']}")
    return problems


@events.quitting.add_listener
def _verify(environment: Any, **_: Any) -> None:
    stats = environment.stats.total
    seconds = max(stats.last_request_timestamp - stats.start_time, 1e-9) if stats.num_requests else 1.0
    p50, p99 = stats.get_response_time_percentile(0.5), stats.get_response_time_percentile(0.99)
    print(
        f"\nload: {stats.num_requests} requests in {seconds:.0f} s, {stats.num_requests / seconds:.1f}/s; "
        f"p50 {p50:.0f} ms, p99 {p99:.0f} ms; "
        f"429: {_statuses[429]}, 503: {_statuses[503]}, other 5xx: "
        f"{sum(n for s, n in _statuses.items() if s >= 500 and s != 503)}"
    )
    problems: list[str] = []
    for key in KEYS:
        problems += _check(key)
        seen = _tally[key]
        print(
            f"load: tenant {key[:12]}…: {seen['starts']} starts, {seen['checkpoints']} checkpoints, "
            f"{seen['completed']} completed"
        )
    if any(s >= 500 and s != 503 for s in _statuses):
        problems.append("answers of 5xx other than 503")
    if problems:
        print("load: LOST OR WRONG:\n  " + "\n  ".join(problems))
        environment.process_exit_code = 1
    else:
        print("load: nothing lost: executions, checkpoints, balances and ledgers agree with every answer")
        environment.process_exit_code = 0
