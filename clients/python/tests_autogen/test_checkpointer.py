"""``TeamCheckpointer``: one behaviour suite for the reference (a dict of JSON states) and
Cairn's, then what only Cairn does: a rollback, failures and the cost of a call."""

from __future__ import annotations

from typing import Any

import pytest
from autogen_agentchat.base import Team

from cairn import AsyncCairn
from cairn.autogen import TeamCheckpointer
from tests.conftest import run_cairn

from .conftest import Checkpointer, Requests, team


def texts(state: Any) -> list[str]:
    """The messages a team's state holds, as ``source: content`` (the group chat's thread)."""
    for name, agent_state in state["agent_states"].items():
        if "GroupChatManager" in name or "group_chat_manager" in name:
            return [f"{m['source']}: {m['content']}" for m in agent_state["message_thread"]]
    raise AssertionError(f"no manager in {list(state['agent_states'])}")


async def test_nothing_to_load_for_an_unknown_key(checkpointer: Checkpointer) -> None:
    fresh = team(["p"], ["w"])
    before = await fresh.save_state()
    assert await checkpointer.load(fresh, "never-saved") is False
    assert await fresh.save_state() == before


async def test_a_saved_team_is_loaded_into_a_new_one_and_goes_on(checkpointer: Checkpointer) -> None:
    first = team(["plan: A"], ["draft 1"])
    await first.run(task="write a note")
    await checkpointer.save(first, "note-1")
    again = team(["plan: B"], ["draft 2"])
    assert await checkpointer.load(again, "note-1") is True
    assert await again.save_state() == await first.save_state()
    await again.run(task="shorter")
    assert texts(await again.save_state()) == [
        "user: write a note",
        "planner: plan: A",
        "writer: draft 1",
        "user: shorter",
        "planner: plan: B",
        "writer: draft 2",
    ]


async def test_the_latest_save_is_loaded_and_keys_are_apart(checkpointer: Checkpointer) -> None:
    t = team(["plan: A", "plan: B"], ["draft 1", "draft 2"])
    await t.run(task="one")
    await checkpointer.save(t, "a")
    await t.run(task="two")
    await checkpointer.save(t, "a")
    other = team(["x"], ["y"], messages=2)
    await other.run(task="elsewhere")
    await checkpointer.save(other, "b")
    loaded = team([], [])
    assert await checkpointer.load(loaded, "a") is True
    assert texts(await loaded.save_state())[-1] == "writer: draft 2"
    assert await checkpointer.load(loaded, "b") is True
    assert texts(await loaded.save_state()) == ["user: elsewhere", "planner: x"]


# ---- Cairn's own ----


async def test_a_team_is_an_execution_and_each_save_a_checkpoint(
    async_client: AsyncCairn, workflow_name: str, requests_sent: Requests
) -> None:
    checkpointer = TeamCheckpointer(async_client, workflow=workflow_name)
    t = team(["plan: A"], ["draft 1"])
    await t.run(task="write a note")
    first = await checkpointer.save(t, "note-1", name="planned")
    requests_sent.clear()
    second = await checkpointer.save(t, "note-1")
    assert len(requests_sent) == 1, requests_sent.sent
    (workflow,) = [w async for w in async_client.workflows.list() if w.name == workflow_name]
    assert workflow.workflow_type == "autogen"
    execution = await async_client.executions.get(first.execution_id)
    assert (execution.key, execution.current_checkpoint_id) == ("note-1", second.id)
    assert (first.name, second.name) == ("planned", "team state")
    stored = await async_client.checkpoints.get(first.id, include_state=True)
    assert stored.state == await t.save_state()  # the team's state, readable as it is
    requests_sent.clear()
    assert await checkpointer.load(team([], []), "note-1") is True
    assert len(requests_sent) == 2, requests_sent.sent


async def test_a_failed_run_is_recorded_with_the_speaking_agent_and_resumed(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    checkpointer = TeamCheckpointer(async_client, workflow=workflow_name)
    result = await checkpointer.run(team(["plan: A"], ["draft 1"]), "write a note", key="note-1")
    assert [m.source for m in result.messages] == ["user", "planner", "writer"]
    # The writer's model has nothing more to say: it raises while speaking.
    broken = team(["plan: B"], [])
    with pytest.raises(RuntimeError, match="No more mock responses"):
        await checkpointer.run(broken, "shorter", key="note-1")
    workflow_id = await checkpointer._runs.workflow_id()
    page = await async_client.executions.list(key="note-1", workflow_id=workflow_id).first_page()
    (execution,) = page.items
    assert execution.status == "failed"
    (failure,) = [f async for f in async_client.failures.list()]
    detail = await async_client.failures.get(failure.id)
    assert detail.error_type == "VALUE_ERROR"
    assert detail.details["agent_name"] == "writer"
    assert "No more mock responses available" in detail.details["traceback"]

    # Run again: the last good state (after the first run) is loaded, the failed run's
    # messages are not in it, and the save replays the execution.
    fixed = team(["plan: C"], ["draft 2"])
    await checkpointer.run(fixed, "shorter", key="note-1")
    assert texts(await fixed.save_state()) == [
        "user: write a note",
        "planner: plan: A",
        "writer: draft 1",
        "user: shorter",
        "planner: plan: C",
        "writer: draft 2",
    ]
    execution = await async_client.executions.get(execution.id)
    assert (execution.status, execution.attempt) == ("running", 2)


async def test_a_rollback_with_cairn_changes_what_load_restores(
    async_client: AsyncCairn, workflow_name: str, key: str
) -> None:
    checkpointer = TeamCheckpointer(async_client, workflow=workflow_name)
    t = team(["plan: A", "plan: B"], ["draft 1", "draft 2"])
    await t.run(task="one")
    first = await checkpointer.save(t, "note-1")
    await t.run(task="two")
    await checkpointer.save(t, "note-1")

    done = await run_cairn(key, "executions", "rollback", first.execution_id, "--to", first.id, "--yes")
    assert done.returncode == 0, done.stderr

    loaded: Team = team(["plan: C"], ["draft 3"])
    assert await checkpointer.load(loaded, "note-1") is True
    assert texts(await loaded.save_state())[-1] == "writer: draft 1", "the rollback point"
    await loaded.run(task="three")
    after = await checkpointer.save(loaded, "note-1")
    execution = await async_client.executions.get(first.execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)
    assert after.parent_checkpoint_id == first.id
