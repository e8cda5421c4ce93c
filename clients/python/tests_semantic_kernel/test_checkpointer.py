"""``ProcessCheckpointer``: one behaviour suite for the references and Cairn's, then real
process runs: one that fails in a step, resumes from its checkpoint without redoing the
finished step, and a rollback with ``cairn`` that changes where the next run starts."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function
from semantic_kernel.processes import ProcessBuilder
from semantic_kernel.processes.kernel_process import (
    KernelProcessStep,
    KernelProcessStepContext,
    KernelProcessStepState,
)
from semantic_kernel.processes.kernel_process.kernel_process_step_state_metadata import (
    KernelProcessStateMetadata,
)
from semantic_kernel.processes.local_runtime.local_kernel_process import start

from cairn import AsyncCairn
from cairn.semantic_kernel import ProcessCheckpointer
from tests.conftest import run_cairn

from .conftest import URL, Checkpointer, Requests


class Done(BaseModel):
    """A step's state: its result once it has run."""

    result: str | None = None


RUN: dict[str, Any] = {"calls": [], "broken": False, "error": None}


class PlanStep(KernelProcessStep[Done]):
    state: Done | None = None

    async def activate(self, state: KernelProcessStepState[Done]) -> None:
        self.state = state.state

    @kernel_function
    async def plan(self, context: KernelProcessStepContext, topic: str) -> None:
        assert self.state is not None
        if self.state.result is None:  # finished work is not done again
            RUN["calls"].append("plan")
            self.state.result = topic.upper()
        await context.emit_event(process_event="planned", data=self.state.result)


class DraftStep(KernelProcessStep[Done]):
    state: Done | None = None

    async def activate(self, state: KernelProcessStepState[Done]) -> None:
        self.state = state.state

    @kernel_function
    async def draft(self, context: KernelProcessStepContext, plan: str) -> None:
        assert self.state is not None
        if self.state.result is None:
            RUN["calls"].append("draft")
            if RUN["broken"]:
                RUN["error"] = TimeoutError("the model did not answer")
                raise RUN["error"]
            self.state.result = f"{plan}, drafted"


def builder() -> ProcessBuilder:
    process = ProcessBuilder(name="article")
    plan = process.add_step(PlanStep)
    draft = process.add_step(DraftStep)
    process.on_input_event("start").send_event_to(plan, parameter_name="topic")
    plan.on_event("planned").send_event_to(draft, parameter_name="plan")
    return process


async def run(state: KernelProcessStateMetadata[Any] | None, *, supersteps: int | None = None) -> Any:
    """One run of the process from ``state``; its state at the end."""
    process = builder().build(state_metadata=state)
    async with await start(
        process=process, kernel=Kernel(), initial_event="start", data="cats", max_supersteps=supersteps
    ) as context:
        return (await context.get_state()).to_process_state_metadata()


def results(state: KernelProcessStateMetadata[Any] | None) -> dict[str, Any]:
    assert state is not None
    document = state.model_dump(mode="json", by_alias=True)
    return {name: step["state"]["result"] for name, step in document["stepsState"].items()}


async def test_nothing_to_load_for_an_unknown_key(checkpointer: Checkpointer) -> None:
    assert await checkpointer.load("never-saved") is None


async def test_a_saved_state_rebuilds_the_process_where_it_was(checkpointer: Checkpointer) -> None:
    RUN.update(calls=[], broken=False)
    first = await run(None, supersteps=1)  # the plan step alone
    assert results(first) == {"PlanStep": "CATS", "DraftStep": None}
    await checkpointer.save(first, "article-7")
    loaded = await checkpointer.load("article-7")
    assert loaded is not None
    assert loaded.model_dump(by_alias=True, mode="json") == first.model_dump(by_alias=True, mode="json")
    RUN["calls"] = []
    assert results(await run(loaded)) == {"PlanStep": "CATS", "DraftStep": "CATS, drafted"}
    assert RUN["calls"] == ["draft"], "the plan step's work is not done again"


async def test_the_latest_save_is_loaded_and_keys_are_apart(checkpointer: Checkpointer) -> None:
    RUN.update(calls=[], broken=False)
    planned = await run(None, supersteps=1)
    await checkpointer.save(planned, "a")
    await checkpointer.save(planned, "b")
    drafted = await run(planned)  # (the run changes the state it was built from: saved first)
    await checkpointer.save(drafted, "a")
    assert results(await checkpointer.load("a")) == {"PlanStep": "CATS", "DraftStep": "CATS, drafted"}
    assert results(await checkpointer.load("b")) == {"PlanStep": "CATS", "DraftStep": None}


# ---- Cairn's own ----


def test_one_made_outside_an_event_loop_works_in_one_after_another(key: str, workflow_name: str) -> None:
    # As a notebook or a CLI does: made at the top, then each call in an asyncio.run of its own.
    checkpointer = ProcessCheckpointer(AsyncCairn(key, base_url=URL), workflow=workflow_name)
    RUN.update(calls=[], broken=False)
    planned = asyncio.run(run(None, supersteps=1))
    asyncio.run(checkpointer.save(planned, "notebook"))
    loaded = asyncio.run(checkpointer.load("notebook"))
    assert results(loaded) == {"PlanStep": "CATS", "DraftStep": None}


async def test_a_key_is_an_execution_and_each_save_a_checkpoint(
    async_client: AsyncCairn, workflow_name: str, requests_sent: Requests
) -> None:
    RUN.update(calls=[], broken=False)
    checkpointer = ProcessCheckpointer(async_client, workflow=workflow_name)
    first = await checkpointer.save(await run(None, supersteps=1), "article-7")
    requests_sent.clear()
    second = await checkpointer.save(await run(None), "article-7", name="drafted")
    assert len(requests_sent) == 1, requests_sent.sent
    (workflow,) = [w async for w in async_client.workflows.list() if w.name == workflow_name]
    assert workflow.workflow_type == "semantic_kernel"
    execution = await async_client.executions.get(first.execution_id)
    assert (execution.key, execution.current_checkpoint_id) == ("article-7", second.id)
    assert (first.name, second.name) == ("article state", "drafted")
    stored = await async_client.checkpoints.get(second.id, include_state=True)
    assert stored.state is not None
    assert stored.state["stepsState"]["DraftStep"]["state"] == {"result": "CATS, drafted"}
    requests_sent.clear()
    assert await checkpointer.load("article-7") is not None
    assert len(requests_sent) == 2, requests_sent.sent


async def test_a_failed_run_resumes_from_its_checkpoint_without_redoing_the_finished_step(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    checkpointer = ProcessCheckpointer(async_client, workflow=workflow_name)
    RUN.update(calls=[], broken=True, error=None)
    # Checkpoint after each step: the run in stages (a superstep each).
    planned = await run(await checkpointer.load("article-7"), supersteps=1)
    await checkpointer.save(planned, "article-7", name="planned")
    ended = await run(await checkpointer.load("article-7"), supersteps=2)
    assert RUN["calls"] == ["plan", "draft"]
    assert results(ended) == {"PlanStep": "CATS", "DraftStep": None}, "the draft step failed"
    await checkpointer.fail("article-7", RUN["error"], step="DraftStep")
    execution_id = (await checkpointer._runs.find("article-7")).id  # type: ignore[union-attr]
    execution = await async_client.executions.get(execution_id)
    assert execution.status == "failed"
    (failure,) = [f async for f in async_client.failures.list()]
    detail = await async_client.failures.get(failure.id)
    assert (detail.error_type, detail.details["agent_name"]) == ("TIMEOUT_ERROR", "DraftStep")

    RUN.update(calls=[], broken=False)
    done = await run(await checkpointer.load("article-7"))
    assert RUN["calls"] == ["draft"], "plan is not done again"
    await checkpointer.save(done, "article-7", name="drafted")
    execution = await async_client.executions.get(execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)


async def test_a_rollback_with_cairn_changes_where_the_next_run_starts(
    async_client: AsyncCairn, workflow_name: str, key: str
) -> None:
    checkpointer = ProcessCheckpointer(async_client, workflow=workflow_name)
    RUN.update(calls=[], broken=False)
    planned = await checkpointer.save(await run(None, supersteps=1), "article-7", name="planned")
    await checkpointer.save(await run(await checkpointer.load("article-7")), "article-7", name="drafted")

    done = await run_cairn(key, "executions", "rollback", planned.execution_id, "--to", planned.id, "--yes")
    assert done.returncode == 0, done.stderr
    assert results(await checkpointer.load("article-7")) == {"PlanStep": "CATS", "DraftStep": None}

    RUN["calls"] = []
    again = await checkpointer.save(await run(await checkpointer.load("article-7")), "article-7")
    assert RUN["calls"] == ["draft"]
    assert again.parent_checkpoint_id == planned.id
    execution = await async_client.executions.get(planned.execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)
