"""The run core (``cairn._runs``) without a server: a workflow found by name or made
once, flows run sync and async from one definition, the key rule, the one ended error.
The fake API answers ``GET /workflows`` without its ``name`` filter, as an API from
before it did: the core checks every name itself."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cairn import AsyncCairn, Cairn, _runs, _specs, errors, models

from . import fake_cairn
from .fake_cairn import BASE, FakeCairn

fake = fake_cairn.fake  # the fixture


def made(fake: FakeCairn) -> int:
    return sum(1 for method, path in fake.requests if (method, path) == ("POST", "/workflows"))


def test_a_name_is_found_on_any_page_and_only_exactly(fake: FakeCairn) -> None:
    client = Cairn("k", base_url=BASE)
    wanted = client.workflows.create(name="triage", workflow_type="crewai").id
    for n in range(120):  # newer ones, so that "triage" is on the second page of 100
        client.workflows.create(name=f"other {n}", workflow_type="custom")
    client.workflows.create(name="Triage", workflow_type="custom")
    before = made(fake)
    assert _runs.workflow_id(client, "triage", "langgraph") == wanted
    assert made(fake) == before, "found, not made"
    assert _runs.workflow_id(client, "triage") == wanted, "once per client and name"


def test_a_missing_name_is_made_once_by_threads_at_once(fake: FakeCairn) -> None:
    client = Cairn("k", base_url=BASE)
    found: list[str] = []
    threads = [
        threading.Thread(target=lambda: found.append(_runs.workflow_id(client, "nightly", "autogen")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made(fake) == 1
    assert len(set(found)) == 1
    assert len(found) == 8
    assert fake.workflows[found[0]]["workflow_type"] == "autogen"
    assert _runs.workflow_id(client, found[0]) == found[0], "an id is taken as it is"


def test_async_lookups_share_one_definition_and_cross_event_loops(fake: FakeCairn) -> None:
    client = AsyncCairn("k", base_url=BASE)

    async def many() -> set[str]:
        return set(await asyncio.gather(*(_runs.async_workflow_id(client, "chat") for _ in range(8))))

    first = asyncio.run(many())
    assert len(first) == 1
    assert made(fake) == 1
    fake.requests.clear()
    assert asyncio.run(many()) == first, "a second loop, the same workflow"
    assert fake.requests == [], "remembered for the client"
    # The same flow, run on a sync client, finds what the async one made.
    assert _runs.run(Cairn("k", base_url=BASE), _runs.find_or_create_workflow("chat", "custom")) in first


def test_the_key_rule_is_the_apis() -> None:
    assert _runs.key_ok("ticket-7")
    assert _runs.key_ok("x" * 256)
    assert _runs.key_ok("caf\u00e9 \u00a0\u2028")
    assert not _runs.key_ok("")
    assert not _runs.key_ok("x" * 257)
    assert not _runs.key_ok("a\nb")
    assert not _runs.key_ok("a\x7f")
    assert not _runs.key_ok("a\x85")
    assert not _runs.key_ok("\ud800"), "not UTF-8"


def test_every_integration_ends_with_one_error() -> None:
    ended = errors.ExecutionEnded("execution exec_1 is completed", status=409)
    assert isinstance(ended, errors.InvalidState)
    assert isinstance(ended, RuntimeError)
    assert ended.code == "execution_ended"
    from cairn import _keyed

    assert _keyed.ExecutionEnded is errors.ExecutionEnded
    from cairn.langgraph import ThreadEnded

    assert ThreadEnded is errors.ExecutionEnded


def _ended(execution_id: str, status: str) -> str:
    return f"{execution_id} is {status}"


def test_a_run_is_replayed_before_a_write_and_an_ended_one_refused(fake: FakeCairn) -> None:
    client = Cairn("k", base_url=BASE)
    wf = client.workflows.create(name="w", workflow_type="custom").id
    paused = client.executions.create(workflow_id=wf)
    client.executions.pause(paused.id)
    ran = _runs.run(client, _runs.running(paused.id, "paused", _ended))
    assert ran.replayed
    assert ran.execution is not None
    assert (ran.execution.status, ran.execution.attempt) == ("running", 2)
    no_call = _runs.run(client, _runs.running(paused.id, "running", _ended))
    assert no_call == _runs.Running(None, False)
    # Seen paused, replayed since by another process: the refused replay is read again.
    again = _runs.run(client, _runs.running(paused.id, "paused", _ended))
    assert not again.replayed
    assert again.execution is not None
    assert again.execution.status == "running"
    client.executions.complete(paused.id)
    with pytest.raises(errors.ExecutionEnded, match=f"{paused.id} is completed"):
        _runs.run(client, _runs.running(paused.id, "completed", _ended))
    # Seen failed but completed since: refused, read again, and ended.
    with pytest.raises(errors.ExecutionEnded):
        _runs.run(client, _runs.running(paused.id, "failed", _ended))


def test_a_write_by_key_starts_replays_and_starts_again_as_needed(fake: FakeCairn) -> None:
    client = Cairn("k", base_url=BASE)
    wf = client.workflows.create(name="w", workflow_type="custom").id

    def start() -> _runs.Flow[models.Execution]:
        return _runs.call(_specs.executions_create(None, workflow_id=wf, key="ticket-7"))

    def send(execution_id: str) -> _runs.Flow[str]:
        made: models.Checkpoint = yield _specs.checkpoints_create(None, execution_id=execution_id, state={})
        return made.id

    def write(seen: _runs.Seen) -> str:
        return _runs.run(client, _runs.write_running(seen, start, send, _ended))

    seen = _runs.Seen()
    write(seen)
    assert seen.id is not None
    first = seen.id
    fake.requests.clear()
    write(seen)
    assert [m for m, _ in fake.requests] == ["POST"], "known and running: the write alone"
    assert (seen.replayed, seen.execution) == (False, None), "no call about the execution: nothing new seen"
    client.executions.pause(first)  # a rollback, say, behind this process
    fake.requests.clear()
    write(seen)
    assert [p.rsplit("/", 1)[-1] for _, p in fake.requests] == ["checkpoints", first, "replay", "checkpoints"]
    assert client.executions.get(first).attempt == 2
    assert seen.replayed, "the replay seen"
    assert seen.execution is not None
    assert seen.execution.attempt == 2
    client.executions.delete(first)
    write(seen)
    assert seen.id != first, "deleted: started again by its key"
    client.executions.cancel(seen.id)
    with pytest.raises(errors.ExecutionEnded, match="is cancelled"):
        write(seen)


def test_keyed_runs_start_with_their_objects_tags(fake: FakeCairn) -> None:
    """Agent Framework, AutoGen and Semantic Kernel start their executions here."""
    from cairn._keyed import KeyedExecutions

    client = AsyncCairn("k", base_url=BASE)
    runs = KeyedExecutions(client, "chats", "autogen", "autogen", tags={"team": "support"})
    plain = KeyedExecutions(client, "chats", "autogen", "autogen")

    async def start() -> tuple[str, str]:
        return await runs.execution_id("chat-1"), await plain.execution_id("chat-2")

    tagged, untagged = asyncio.run(start())
    assert fake.executions[tagged]["tags"] == {"team": "support"}
    assert fake.executions[untagged]["tags"] == {}
