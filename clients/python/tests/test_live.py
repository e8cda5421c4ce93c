"""The library against the running stack that ``make test`` starts (fixtures in
``conftest.py``: each test gets a tenant of its own)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn import AsyncCairn, Cairn, Run, errors, models
from cairn._keyed import KeyedExecutions

pytestmark = pytest.mark.live

URL = os.environ.get("CAIRN_API_URL")


def test_a_traced_workflow_fails_is_replayed_and_resumes_without_rerunning_steps(client: Cairn) -> None:
    ran: list[str] = []
    broken = [True]

    def plan(ticket: dict[str, Any]) -> dict[str, Any]:
        ran.append("plan")
        return {"steps": ["read", "answer"], "ticket": ticket["id"]}

    def research(p: dict[str, Any]) -> list[str]:
        ran.append("research")
        return [f"note on {s}" for s in p["steps"]]

    def answer(notes: list[str]) -> str:
        ran.append("answer")
        if broken[0]:
            raise TimeoutError("the model timed out")
        return " / ".join(notes)

    @client.workflow("support-triage", workflow_type="crewai")
    def triage(run: Run, ticket: dict[str, Any]) -> dict[str, Any]:
        p = run.step("plan", plan, ticket)
        notes = run.step("research", research, p)
        return {"reply": run.step("answer", answer, notes)}

    with pytest.raises(TimeoutError):
        triage({"id": "T-7"})
    failed = next(iter(client.executions.list(status="failed")))
    assert failed.error is not None
    assert failed.error.error_type == "TIMEOUT_ERROR"
    failure = next(iter(client.failures.list(status="open")))
    assert "TimeoutError" in client.failures.get(failure.id).details["traceback"]

    replayed = client.executions.replay(failed.id)
    assert (replayed.status, replayed.attempt) == ("running", 2)
    broken[0] = False
    ran.clear()
    assert triage.resume(failed.id) == {"reply": "note on read / note on answer"}
    assert ran == ["answer"], "plan and research ran once, in the first attempt"

    done = client.executions.get(failed.id)
    assert done.status == "completed"
    assert done.output == {"reply": "note on read / note on answer"}
    names = [c.name for c in client.checkpoints.list(execution_id=failed.id)]
    assert names == ["plan", "research", "answer"]
    assert client.failures.get(failure.id).status == "resolved", "completing resolves the open failure"
    # The same workflow is found by name the next time, not created again.
    assert [w.name for w in client.workflows.list()] == ["support-triage"]


def test_every_resource_method(client: Cairn) -> None:
    wf = client.workflows.create(name="every", workflow_type="custom", definition={"nodes": []})
    assert client.workflows.get(wf.id).definition == {"nodes": []}
    wf = client.workflows.update(wf.id, description="all methods", if_version=wf.version)
    assert wf.version == 2
    with pytest.raises(errors.VersionMismatch):
        client.workflows.update(wf.id, name="stale", if_version=1)

    e = client.executions.create(workflow_id=wf.id, input={"q": 1}, metadata={"team": "a"})
    cp1 = client.checkpoints.create(execution_id=e.id, state={"step": 1}, name="one")
    cp2 = client.checkpoints.create(execution_id=e.id, state={"step": 2}, name="two")
    assert client.checkpoints.get(cp2.id, include_state=True).state == {"step": 2}
    assert [c.sequence for c in client.checkpoints.list(execution_id=e.id)] == [1, 2]
    assert client.executions.pause(e.id).status == "paused"
    rolled = client.executions.rollback(e.id, checkpoint_id=cp1.id)
    assert (rolled.discarded_checkpoints, rolled.current_checkpoint_id) == (1, cp1.id)
    assert client.executions.replay(e.id, checkpoint_id=None).attempt == 2
    failed = client.executions.fail(e.id, error_type="AGENT_ERROR", message="boom", details={"task_id": "t"})
    assert failed.status == "failed"
    failure = client.failures.list().first_page().items[0]
    assert client.failures.ignore(failure.id).status == "ignored"
    assert client.failures.resolve(failure.id).status == "resolved"
    stats = client.failures.stats()
    assert (stats.total_failures, stats.resolved_failures) == (1, 1)

    other = client.executions.create(workflow_id=wf.id)
    assert client.executions.cancel(other.id, reason="not needed").cancel_reason == "not needed"
    third = client.executions.create(workflow_id=wf.id)
    assert client.executions.complete(third.id, output=[1, 2]).output == [1, 2]
    page = client.executions.list(page_size=2).first_page()
    assert (page.total, len(page.items)) == (3, 2)
    assert {x.id for x in client.executions.list(page_size=2)} == {e.id, other.id, third.id}

    balance = client.billing.balance()
    assert balance.credits_balance == 100 - 4  # three starts and one replay
    ledger = list(client.billing.transactions())
    assert sum(t.amount for t in ledger if t.type == "usage") == -4  # usage is entered in batches
    assert [t.type for t in ledger].count("topup") == 1
    assert ledger[0].credits_after == balance.credits_balance
    with pytest.raises(errors.NotFound):
        client.billing.subscription()
    with pytest.raises(errors.NotFound):
        client.billing.cancel_subscription()
    topup = client.billing.topup(amount_cents=500)  # localstripe plays Stripe
    assert (topup.credits, topup.payment_intent_id.startswith("pi_")) == (500, True)
    checkout = client.billing.create_checkout(plan_id="pro", return_url="https://example.com/billing")
    assert checkout.checkout_url.startswith("http")
    portal = client.billing.portal(return_url="https://example.com/billing")  # the checkout made a customer
    assert portal.portal_url.startswith("http")
    client.workflows.delete(wf.id)  # every execution has ended
    with pytest.raises(errors.NotFound):
        client.workflows.get(wf.id)


def test_errors_are_typed_and_change_nothing(client: Cairn, key: str) -> None:
    with pytest.raises(errors.NotFound):
        client.executions.get("exec_0193a6f21c2b7d3e8f000123456789ab")
    with pytest.raises(errors.ValidationFailed) as caught:
        client.workflows.create(name="", workflow_type="custom")
    assert [e["field"] for e in caught.value.errors] == ["name"]
    with pytest.raises(errors.Unauthorized), Cairn("cairn_" + "x" * 43, base_url=URL) as wrong:
        wrong.billing.balance()
    assert client.workflows.list().first_page().total == 0


async def test_the_async_client_traces_too(key: str) -> None:
    async with AsyncCairn(key, base_url=URL) as client:

        @client.workflow("async-flow")
        async def flow(run: Any, n: int) -> int:
            doubled: int = await run.step("double", lambda: n * 2)
            return doubled + 1

        assert await flow(20) == 41
        executions = [e async for e in client.executions.list()]
        assert [e.status for e in executions] == ["completed"]


def test_an_async_client_made_outside_a_loop_works_in_one_loop_after_another(key: str) -> None:
    client = AsyncCairn(key, base_url=URL)  # no loop runs here: notebooks and CLIs do this

    async def write(name: str) -> str:
        return (await client.workflows.create(name=name, workflow_type="custom")).id

    made = [asyncio.run(write(f"loop {n}")) for n in range(3)]  # each asyncio.run a new loop
    listed = asyncio.run(_names(client))
    assert sorted(listed) == ["loop 0", "loop 1", "loop 2"], made
    asyncio.run(client.close())


def test_a_keyed_run_made_outside_a_loop_is_written_from_one_loop_after_another(key: str) -> None:
    # What the async integrations (Agent Framework, AutoGen, Semantic Kernel) are built on.
    runs = KeyedExecutions(AsyncCairn(key, base_url=URL), "notebook", "custom", "test")

    async def two_at_once(n: int) -> list[int]:
        async def one(i: int) -> int:
            async with runs.lock("cell"):  # both wait on the name's lock of this loop
                return (await runs.write("cell", {"n": n, "i": i})).sequence

        return sorted(await asyncio.gather(one(0), one(1)))

    assert [asyncio.run(two_at_once(n)) for n in range(3)] == [[1, 2], [3, 4], [5, 6]]


async def _names(client: AsyncCairn) -> list[str]:
    return [w.name async for w in client.workflows.list()]


async def test_an_async_client_given_its_own_http_client_says_so_in_another_loop(key: str) -> None:
    http = httpx.AsyncClient()
    client = AsyncCairn(key, base_url=URL, http_client=http)
    assert (await client.billing.balance()).credits_balance == 100

    def elsewhere() -> None:
        asyncio.run(client.billing.balance())

    with pytest.raises(errors.LoopMismatch, match="http_client"):
        await asyncio.to_thread(elsewhere)
    await client.close()


def test_workflows_are_listed_by_exact_name(client: Cairn) -> None:
    first = client.workflows.create(name="support agent", workflow_type="custom")
    client.workflows.create(name="Support agent", workflow_type="custom")
    second = client.workflows.create(name="support agent", workflow_type="crewai")
    page = client.workflows.list(name="support agent").first_page()
    assert [w.id for w in page.items] == [second.id, first.id]
    assert page.total == 2
    assert [w.id for w in client.workflows.list(name="support agent", workflow_type="crewai")] == [second.id]
    assert list(client.workflows.list(name="nobody")) == []


def test_runs_are_tagged_by_the_decorator_and_trace_and_found_by_tag(client: Cairn) -> None:
    @client.workflow("tagged-triage", tags={"team": "search", "model": "offline"})
    def triage(run: Run, ticket: str) -> str:
        return run.step("answer", lambda: f"answered {ticket}")

    triage("T-1")
    triage("T-2")
    wf = triage.workflow_id()
    with client.trace(wf, input={"ticket": "T-3"}, tags={"team": "billing"}) as run:
        run.step("answer", lambda: "ok")
    search = client.executions.list(tags={"team": "search"}).first_page()
    assert search.total == 2
    assert {e.tags["model"] for e in search.items} == {"offline"}
    both = client.executions.list(tags={"team": "search", "model": "offline"}, status="completed")
    assert len(list(both)) == 2
    billing = list(client.executions.list(tags={"team": "billing"}))
    assert [e.tags for e in billing] == [{"team": "billing"}]
    assert client.executions.get(billing[0].id).tags == {"team": "billing"}
    with pytest.raises(errors.ValidationFailed) as refused:
        client.executions.create(workflow_id=wf, tags={"bad:key": "x"})
    assert "tags" in str(refused.value)
    assert client.executions.list(workflow_id=wf).first_page().total == 3, "the refused start made nothing"


def test_failures_of_one_cause_share_a_group_listed_by_its_id(client: Cairn) -> None:
    wf = client.workflows.create(name="grouped", workflow_type="custom").id
    for seconds in (30, 45):
        e = client.executions.create(workflow_id=wf)
        client.executions.fail(e.id, error_type="TOOL_ERROR", message=f"search timed out after {seconds}s")
    other = client.executions.create(workflow_id=wf)
    client.executions.fail(other.id, error_type="TOOL_ERROR", message="connection reset")
    failures = list(client.failures.list())
    groups = {f.message: f.group_id for f in failures}
    assert groups["search timed out after 30s"] == groups["search timed out after 45s"]
    assert groups["connection reset"] != groups["search timed out after 30s"]
    page = client.failures.list(group_id=groups["search timed out after 30s"]).first_page()
    assert (page.total, {f.fingerprint for f in page.items}) == (2, {"search timed out after <n>s"})
    with pytest.raises(errors.NotFound):
        client.failures.list(group_id="fgrp_" + "0" * 32).first_page()


def test_a_groups_open_failures_are_resolved_together(client: Cairn) -> None:
    wf = client.workflows.create(name="incident", workflow_type="custom").id
    for n in range(3):
        e = client.executions.create(workflow_id=wf)
        client.executions.fail(e.id, error_type="LLM_ERROR", message=f"provider returned 503 after {n}s")
    (group,) = list(client.failures.groups(status="open"))
    assert (group.counts.open, group.fingerprint) == (3, "provider returned <n> after <n>s")
    settled = client.failures.resolve_group(group.id)
    assert (settled.settled, settled.remaining, settled.status) == (3, False, "resolved")
    assert client.failures.group(group.id).counts.resolved == 3
    assert list(client.failures.groups(status="open")) == []


def test_keys_are_created_listed_revoked_and_the_last_live_one_stays(client: Cairn, key: str) -> None:
    first = client.keys.list()
    assert [(k.revoked_at, key.startswith(k.prefix)) for k in first] == [(None, True)]
    created = client.keys.create(name="CI deploys")
    assert created.key is not None
    assert (created.name, created.prefix, created.revoked_at) == ("CI deploys", created.key[:10], None)
    with Cairn(created.key, base_url=URL) as other:
        listed = other.keys.list()  # the new key authenticates, for the same tenant
        assert [k.id for k in listed] == [created.id, first[0].id], "newest first"
        assert created.key not in json.dumps([k.api_json() for k in listed])
        client.keys.revoke(created.id)
        with pytest.raises(errors.Unauthorized):
            other.billing.balance()
    revoked = next(k for k in client.keys.list() if k.id == created.id)
    assert revoked.revoked_at is not None
    client.keys.revoke(created.id)  # again: nothing changes
    with pytest.raises(errors.InvalidState) as refused:
        client.keys.revoke(first[0].id)
    assert "last live key" in refused.value.detail
    assert client.billing.balance().credits_balance == 100


def test_a_restricted_key_is_refused_outside_its_scopes_with_a_typed_error(client: Cairn) -> None:
    reader = client.keys.create(name="reader", scopes=["executions:read"])
    assert reader.key is not None
    assert reader.scopes == ["executions:read"]
    with Cairn(reader.key, base_url=URL) as restricted:
        list(restricted.executions.list())  # in scope
        with pytest.raises(errors.InsufficientScope) as refused:
            restricted.workflows.create(name="nope", workflow_type="custom")
        assert refused.value.status == 403
        assert refused.value.required_scope == "workflows:write"
        with pytest.raises(errors.InsufficientScope):
            restricted.keys.create(name="wider", scopes=["*"])
    client.keys.revoke(reader.id)


async def test_the_async_client_manages_keys_too(key: str) -> None:
    async with AsyncCairn(key, base_url=URL) as client:
        created = await client.keys.create(name="async")
        assert (await client.keys.list())[0].id == created.id, "newest first"
        await client.keys.revoke(created.id)
        states = {k.id: k.revoked_at is not None for k in await client.keys.list()}
    assert list(states.values()).count(False) == 1
    assert states[created.id]


def test_stats_and_usage_chart_a_history_across_days() -> None:
    from datetime import datetime, timedelta, timezone

    from .conftest import admin

    tenant = admin("tenant", "create", "--name", "stats")
    key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", "100")
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    two_days_ago = today - timedelta(days=2)
    history = [
        (two_days_ago + timedelta(minutes=5), "completed", 3),
        (two_days_ago, "failed", 1),
        (today, "running", 2),
    ]
    for at, status, count in history:
        stamp = at.isoformat().replace("+00:00", "Z")
        admin("history", "--tenant", tenant, "--at", stamp, "--status", status, "--count", str(count))
    with Cairn(key, base_url=URL) as client:
        stats = client.executions.stats(created_after=two_days_ago, created_before=today + timedelta(days=1))
        assert [b.start for b in stats.buckets] == [two_days_ago + timedelta(days=n) for n in range(3)]
        assert [(b.total, b.by_status.completed, b.by_status.failed, b.failures) for b in stats.buckets] == [
            (4, 3, 1, 1),
            (0, 0, 0, 0),
            (2, 0, 0, 0),
        ]
        assert (stats.total, stats.failures, stats.buckets[2].by_status.running) == (6, 1, 2)
        usage = client.billing.usage(created_after=two_days_ago, created_before=today + timedelta(days=1))
        assert [b.charges for b in usage.buckets] == [4, 0, 2]
        assert usage.credits == sum(b.credits for b in usage.buckets) > 0
        with pytest.raises(errors.ValidationFailed) as refused:
            client.executions.stats(bucket="hour", created_after=today, created_before=two_days_ago)
        assert refused.value.status == 422


def test_retention_is_set_and_fixes_an_ended_executions_lifetimes(client: Cairn) -> None:
    default = client.settings.retention()
    assert (default.executions_days, default.effective_executions_days, default.checkpoints) == (
        None,
        30,
        "all",
    )
    with pytest.raises(errors.ValidationFailed) as refused:
        client.settings.set_retention(executions_days=31)
    assert [e["field"] for e in refused.value.errors] == ["executions_days"]
    assert client.settings.retention() == default, "a refused setting changes nothing"

    r = client.settings.set_retention(executions_days=7, checkpoints="days", checkpoints_days=2)
    assert (r.effective_executions_days, r.checkpoints, r.checkpoints_days) == (7, "days", 2)
    wf = client.workflows.create(name="kept a week", workflow_type="custom")
    e = client.executions.create(workflow_id=wf.id)
    assert e.expires_at is None, "a running execution never expires"
    done = client.executions.complete(e.id, output={"ok": True})
    assert done.ended_at is not None
    assert done.expires_at is not None
    assert done.checkpoints_expire_at is not None
    assert (done.expires_at - done.ended_at).days == 7
    assert (done.checkpoints_expire_at - done.ended_at).days == 2


def test_a_workflows_own_retention_is_set_shown_and_taken_away(client: Cairn) -> None:
    own = {"executions_days": 3, "checkpoints": "keep_latest", "checkpoints_days": None}
    wf = client.workflows.create(name="short-lived", workflow_type="custom", retention=own)
    assert wf.retention == models.WorkflowRetention(**own)
    listed = next(iter(client.workflows.list(name="short-lived")))
    assert listed.retention == wf.retention
    e = client.executions.create(workflow_id=wf.id)
    done = client.executions.cancel(e.id)
    assert done.ended_at is not None
    assert done.expires_at is not None
    assert (done.expires_at - done.ended_at).days == 3
    with pytest.raises(errors.ValidationFailed) as refused:
        client.workflows.update(wf.id, retention={"executions_days": 31})
    assert [e["field"] for e in refused.value.errors] == ["retention.executions_days"]
    assert client.workflows.update(wf.id, retention=None).retention is None


async def test_the_async_client_downloads_an_export_and_a_restricted_key_may_not(
    key: str, tmp_path: Path
) -> None:
    import gzip

    async with AsyncCairn(key, base_url=URL) as client:
        wf = await client.workflows.create(name="exported", workflow_type="custom")
        e = await client.executions.create(workflow_id=wf.id)
        paths = await client.exports.download(tmp_path, workflow_id=wf.id, poll=0.2)
        lines = [json.loads(x) for p in paths for x in gzip.decompress(p.read_bytes()).splitlines()]
        assert [(x["type"], x["data"]["id"]) for x in lines] == [("workflow", wf.id), ("execution", e.id)]
        made = await client.keys.create(name="reader", scopes=["executions:read", "workflows:read"])
    async with AsyncCairn(made.key, base_url=URL) as reader:
        with pytest.raises(errors.InsufficientScope) as refused:
            await reader.exports.create()
        assert refused.value.required_scope == "*"
