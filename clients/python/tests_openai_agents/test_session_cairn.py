"""What a ``CairnSession`` is in Cairn, what each call costs, and how it follows what
Cairn's own tools (rollback, replay, complete) do to its execution."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
from agents import Agent, RunContextWrapper, Runner
from agents.testing import ScriptedModel, assistant_message

from cairn import AsyncCairn, Cairn, errors, models
from cairn.openai_agents import FORMAT, STATE_MAX_BYTES, CairnSession, SessionEnded, SessionTooLarge

from .conftest import URL, Requests


def message(n: int, size: int = 0) -> Any:
    return {"role": "user", "content": f"message {n} " + "x" * size}


async def execution_of(client: AsyncCairn, session_id: str) -> models.Execution:
    workflows = [w async for w in client.workflows.list() if w.name == "openai-agents-sessions"]
    assert len(workflows) == 1
    assert workflows[0].workflow_type == "custom"
    page = await client.executions.list(workflow_id=workflows[0].id, key=session_id).first_page()
    assert len(page.items) == 1
    return await client.executions.get(page.items[0].id)


async def checkpoints_of(client: AsyncCairn, execution_id: str) -> list[models.Checkpoint]:
    return [c async for c in client.checkpoints.list(execution_id=execution_id)]


async def test_a_session_is_an_execution_with_a_checkpoint_per_write(async_client: AsyncCairn) -> None:
    session = CairnSession("ticket-7", async_client)
    await session.add_items([message(0), message(1)])
    await session.add_items([message(2)])
    assert await session.pop_item() == message(2)

    execution = await execution_of(async_client, "ticket-7")
    assert (execution.status, execution.key, execution.attempt) == ("running", "ticket-7", 1)
    checkpoints = await checkpoints_of(async_client, execution.id)
    assert [(c.name, c.metadata["items"], c.metadata["change"]) for c in checkpoints] == [
        ("add_items", "2", "2"),
        ("add_items", "3", "1"),
        ("pop_item", "2", "-1"),
    ]
    # each write's key: the attempt and the checkpoint it follows (one writer per state)
    assert [c.key for c in checkpoints] == ["1:start", f"1:{checkpoints[0].id}", f"1:{checkpoints[1].id}"]
    assert execution.current_checkpoint_id == checkpoints[-1].id
    newest = await async_client.checkpoints.get(checkpoints[-1].id, include_state=True)
    assert newest.state == {"format": FORMAT, "items": [message(0), message(1)]}


async def test_a_sessions_execution_starts_with_its_tags(async_client: AsyncCairn) -> None:
    session = CairnSession("tagged", async_client, tags={"channel": "web"})
    await session.add_items([message(0)])
    assert (await execution_of(async_client, "tagged")).tags == {"channel": "web"}
    found = await async_client.executions.list(tags={"channel": "web"}).first_page()
    assert [e.key for e in found.items] == ["tagged"]


async def test_the_run_context_keyword_is_taken_on_every_method(async_client: AsyncCairn) -> None:
    session = CairnSession("with-context", async_client)
    wrapper = RunContextWrapper(context={"user": "ada"})
    await session.add_items([message(0), message(1)], wrapper=wrapper)
    assert await session.get_items(wrapper=wrapper) == [message(0), message(1)]
    assert await session.pop_item(wrapper=wrapper) == message(1)
    await session.clear_session(wrapper=wrapper)
    assert await session.get_items() == []
    # and the SDK passes it: a run with a context goes through
    agent = Agent(name="a", model=ScriptedModel([[assistant_message("hi ada")]]))
    result = await Runner.run(agent, "hello", session=session, context={"user": "ada"})
    assert result.final_output == "hi ada"
    assert len(await session.get_items()) == 2


async def fill(session: CairnSession, calls: int, per_call: int, size: int) -> None:
    for n in range(calls):
        await session.add_items([message(n * per_call + i, size) for i in range(per_call)])


async def costs(async_client: AsyncCairn, requests_sent: Requests, session_id: str) -> dict[str, int]:
    """The requests each session call sends, on a session that exists."""
    counted: dict[str, int] = {}
    session = CairnSession(session_id, async_client)  # a new object: it knows nothing yet
    requests_sent.clear()
    items = await session.get_items()
    counted["get_items, first read"] = len(requests_sent)
    requests_sent.clear()
    assert await session.get_items(limit=2) == items[-2:]
    counted["get_items, unchanged since"] = len(requests_sent)
    requests_sent.clear()
    await session.add_items([message(-1)])
    counted["add_items"] = len(requests_sent)
    requests_sent.clear()
    assert await session.pop_item() == message(-1)
    counted["pop_item"] = len(requests_sent)
    other = CairnSession(session_id, async_client)
    await other.add_items([message(-2)])
    requests_sent.clear()
    assert (await session.get_items())[-1] == message(-2)
    counted["get_items, changed by another writer"] = len(requests_sent)
    requests_sent.clear()
    await CairnSession(session_id, async_client).add_items([message(-3)])
    counted["add_items of a new object"] = len(requests_sent)
    return counted


async def test_what_a_call_costs_does_not_grow_with_the_session(
    async_client: AsyncCairn, requests_sent: Requests
) -> None:
    await fill(CairnSession("short", async_client), calls=1, per_call=2, size=0)
    await fill(CairnSession("long", async_client), calls=60, per_call=10, size=1000)  # 600 items, 0.6 MB
    assert len(await CairnSession("long", async_client).get_items()) == 600
    expected = {
        "get_items, first read": 2,  # the execution (by key), then its current checkpoint's state
        "get_items, unchanged since": 1,  # the execution: the checkpoint is the one it knows
        "add_items": 1,  # one checkpoint
        "pop_item": 1,
        "get_items, changed by another writer": 2,
        "add_items of a new object": 3,  # the execution (start: 200, existing), its state, the checkpoint
    }
    assert await costs(async_client, requests_sent, "short") == expected
    assert await costs(async_client, requests_sent, "long") == expected


async def test_a_new_session_costs_a_start_and_a_checkpoint(
    async_client: AsyncCairn, requests_sent: Requests
) -> None:
    session = CairnSession("new", async_client)
    await session.get_items()  # the workflow is looked up (and created) once per client
    requests_sent.clear()
    assert await session.get_items() == []
    assert len(requests_sent) == 1  # no execution yet
    requests_sent.clear()
    await session.add_items([message(0)])
    assert requests_sent.sent == ["POST /api/v1/executions", "POST /api/v1/checkpoints"]


async def three_writes(client: AsyncCairn, session_id: str) -> tuple[CairnSession, str, str]:
    """A session written three times: the object, its execution's id, the first checkpoint's."""
    session = CairnSession(session_id, client)
    for n in range(3):
        await session.add_items([message(n)])
    execution = await execution_of(client, session_id)
    first, *_ = await checkpoints_of(client, execution.id)
    return session, execution.id, first.id


async def test_after_a_rollback_the_session_goes_on_from_the_rolled_back_items(
    async_client: AsyncCairn,
) -> None:
    session, execution_id, first = await three_writes(async_client, "rolled-back")
    rolled = await async_client.executions.rollback(execution_id, checkpoint_id=first)
    assert (rolled.status, rolled.discarded_checkpoints) == ("paused", 2)
    assert await session.get_items() == [message(0)]  # what the agent sees next

    await session.add_items([message(3)])  # replays the execution from the rollback point
    assert await session.get_items() == [message(0), message(3)]
    assert await CairnSession("rolled-back", async_client).get_items() == [message(0), message(3)]
    execution = await async_client.executions.get(execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)
    checkpoints = await checkpoints_of(async_client, execution_id)
    assert [c.id for c in checkpoints][:1] == [first]
    assert len(checkpoints) == 2
    assert checkpoints[1].parent_checkpoint_id == first


async def test_a_rollback_and_replay_behind_a_session_object_is_not_undone_by_its_next_write(
    async_client: AsyncCairn,
) -> None:
    session, execution_id, first = await three_writes(async_client, "replayed")
    await async_client.executions.rollback(execution_id, checkpoint_id=first)
    await async_client.executions.replay(execution_id)  # running again, at the first checkpoint

    await session.add_items([message(3)])  # this object last wrote message(2): it learns otherwise
    assert await session.get_items() == [message(0), message(3)]
    assert await CairnSession("replayed", async_client).get_items() == [message(0), message(3)]
    # The write that landed on the first checkpoint with the wrong items stays in the
    # history, superseded at once by the right ones.
    _, stray, right = await checkpoints_of(async_client, execution_id)
    assert (stray.parent_checkpoint_id, right.parent_checkpoint_id) == (first, stray.id)
    execution = await async_client.executions.get(execution_id)
    assert execution.current_checkpoint_id == right.id


async def test_a_replay_from_an_earlier_checkpoint_behind_a_session_object_is_kept(
    async_client: AsyncCairn,
) -> None:
    # No rollback: the later checkpoints stay, and the replay makes the first current.
    session, execution_id, first = await three_writes(async_client, "replayed-from")
    await async_client.executions.pause(execution_id)
    await async_client.executions.replay(execution_id, checkpoint_id=first)

    await session.add_items([message(3)])
    assert await session.get_items() == [message(0), message(3)]
    assert await CairnSession("replayed-from", async_client).get_items() == [message(0), message(3)]
    assert await session.pop_item() == message(3)
    assert await CairnSession("replayed-from", async_client).get_items() == [message(0)]


async def test_a_session_that_saw_a_rollback_writes_after_another_replayed_it(
    async_client: AsyncCairn,
) -> None:
    one = CairnSession("stale", async_client)
    for n in range(2):
        await one.add_items([message(n)])
    execution = await execution_of(async_client, "stale")
    first, _ = await checkpoints_of(async_client, execution.id)
    await async_client.executions.rollback(execution.id, checkpoint_id=first.id)
    two = CairnSession("stale", async_client)
    assert await two.get_items() == [message(0)]  # it sees the execution paused
    await one.add_items([message(2)])  # replays it
    await two.add_items([message(3)])  # its replay is refused (running again): it reads and goes on
    assert await CairnSession("stale", async_client).get_items() == [message(0), message(2), message(3)]
    assert (await async_client.executions.get(execution.id)).attempt == 2


async def test_sessions_used_at_once_for_the_first_time_make_one_workflow(
    client: Cairn, async_client: AsyncCairn
) -> None:
    await asyncio.gather(
        *(CairnSession(f"first-{n}", async_client).add_items([message(n)]) for n in range(4))
    )

    def first_write(n: int) -> None:
        asyncio.run(CairnSession(f"sync-{n}", client).add_items([message(n)]))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(first_write, range(4)))
    names = [w.name async for w in async_client.workflows.list()]
    assert names == ["openai-agents-sessions"]
    for n in range(4):
        assert await CairnSession(f"first-{n}", async_client).get_items() == [message(n)]
        assert await CairnSession(f"sync-{n}", async_client).get_items() == [message(n)]


async def test_popping_a_session_that_has_no_execution_starts_none(async_client: AsyncCairn) -> None:
    session = CairnSession("popped", async_client)
    await session.add_items([message(0)])
    execution = await execution_of(async_client, "popped")
    await async_client.executions.delete(execution.id)  # behind the object
    assert await session.pop_item() is None
    (workflow,) = [w async for w in async_client.workflows.list()]
    page = await async_client.executions.list(workflow_id=workflow.id).first_page()
    assert page.items == []


async def test_two_writers_of_one_session_lose_nothing(async_client: AsyncCairn) -> None:
    one, two = CairnSession("shared", async_client), CairnSession("shared", async_client)
    await one.add_items([message(0)])
    assert await two.get_items() == [message(0)]
    await one.add_items([message(1)])
    await two.add_items([message(2)])  # written on message(0) alone: redone on the session as it is
    assert await one.get_items() == [message(0), message(1), message(2)]
    assert await one.pop_item() == message(2)
    assert await two.pop_item() == message(1)  # it knew message(2) newest: redone too
    assert await CairnSession("shared", async_client).get_items() == [message(0)]


async def test_one_object_written_from_many_tasks_and_threads_loses_nothing(
    client: Cairn, async_client: AsyncCairn, requests_sent: Requests
) -> None:
    on_loop = CairnSession("gathered", async_client)
    await asyncio.gather(*(on_loop.add_items([message(n)]) for n in range(8)))
    assert sorted(i["content"] for i in await on_loop.get_items()) == sorted(
        message(n)["content"] for n in range(8)
    )

    threaded = CairnSession("threaded", client)
    await threaded.add_items([message(-1)])
    requests_sent.clear()

    def add(n: int) -> None:
        asyncio.run(threaded.add_items([message(n)]))  # each thread its own event loop

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(add, range(8)))
    assert requests_sent.sent == ["POST /api/v1/checkpoints"] * 8  # one at a time: none redone
    items = await CairnSession("threaded", async_client).get_items()
    assert sorted(i["content"] for i in items) == sorted(message(n)["content"] for n in range(-1, 8))


async def test_items_that_outgrow_a_checkpoint_raise_and_leave_the_session_as_it_was(
    async_client: AsyncCairn, requests_sent: Requests
) -> None:
    session = CairnSession("large", async_client)
    big = message(0, size=3 * 1024 * 1024)
    await session.add_items([big])
    requests_sent.clear()
    with pytest.raises(SessionTooLarge, match="new session") as raised:
        await session.add_items([message(1, size=1024 * 1024 + 1)])
    assert isinstance(raised.value, errors.PayloadTooLarge)
    assert str(STATE_MAX_BYTES) in str(raised.value)
    assert len(requests_sent) == 0  # refused before anything was sent
    assert await session.get_items() == [big]
    await session.add_items([message(2)])  # smaller items still fit
    assert await CairnSession("large", async_client).get_items() == [big, message(2)]


async def test_a_completed_session_takes_no_more_items_until_cleared(async_client: AsyncCairn) -> None:
    session = CairnSession("done", async_client)
    await session.add_items([message(0)])
    execution = await execution_of(async_client, "done")
    await async_client.executions.complete(execution.id, output={"resolved": True})
    with pytest.raises(SessionEnded, match="completed"):
        await session.add_items([message(1)])
    assert await session.get_items() == [message(0)]
    await session.clear_session()
    with pytest.raises(errors.NotFound):
        await async_client.executions.get(execution.id)
    await session.add_items([message(1)])
    restarted = await execution_of(async_client, "done")
    assert restarted.id != execution.id
    assert await session.get_items() == [message(1)]


async def test_a_write_whose_caller_is_cancelled_still_completes(key: str) -> None:
    sent = asyncio.Event()

    async def hook(request: httpx.Request) -> None:
        if request.url.path.endswith("/checkpoints"):
            sent.set()

    http = httpx.AsyncClient(timeout=60, event_hooks={"request": [hook]})
    async with AsyncCairn(key, base_url=URL, http_client=http) as client:
        session = CairnSession("cancelled", client)
        task = asyncio.create_task(session.add_items([message(0)]))
        await sent.wait()  # the checkpoint's request is on its way
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await CairnSession("cancelled", client).get_items() == [message(0)]
        assert await session.pop_item() == message(0)  # the object knows the write's outcome


def test_a_sync_client_works_from_any_event_loop(client: Cairn) -> None:
    session = CairnSession("sync", client)
    asyncio.run(session.add_items([message(0)]))
    asyncio.run(session.add_items([message(1)]))  # another loop: the Cairn client runs in a thread
    assert asyncio.run(session.get_items()) == [message(0), message(1)]


def test_a_session_id_must_fit_an_execution_key(client: Cairn) -> None:
    for bad in ("", "x" * 257, "line\x00break"):
        with pytest.raises(ValueError, match="session_id"):
            CairnSession(bad, client)
    with pytest.raises(TypeError, match=r"cairn\.Cairn or cairn\.AsyncCairn"):
        CairnSession("s", object())  # type: ignore[arg-type]


def test_without_the_sdk_the_import_says_what_to_install() -> None:
    code = "import sys; sys.modules['agents'] = None; import cairn.openai_agents"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode == 1
    assert 'pip install "cairn-client[openai-agents]"' in run.stderr
