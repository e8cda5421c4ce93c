"""Real Agent Framework workflows on Cairn, offline (plain function executors): a run that
fails midway is recorded as a failure, then resumes from its checkpoint without redoing
finished work; a rollback through ``cairn`` moves where the next run resumes."""

from __future__ import annotations

from typing import Any

from agent_framework import Workflow, WorkflowBuilder, WorkflowContext, executor

from cairn import AsyncCairn
from cairn.agent_framework import CairnCheckpointStorage
from tests.conftest import run_cairn


class Pipeline:
    """plan -> draft -> publish; ``draft`` fails while ``broken``; ``calls`` records what ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.broken = False

    def build(self, storage: CairnCheckpointStorage) -> Workflow:
        @executor(id="plan")
        async def plan(text: str, ctx: WorkflowContext[str]) -> None:
            self.calls.append("plan")
            await ctx.send_message(text.upper())

        @executor(id="draft")
        async def draft(text: str, ctx: WorkflowContext[str]) -> None:
            self.calls.append("draft")
            if self.broken:
                raise TimeoutError("the model did not answer")
            await ctx.send_message(f"{text}, drafted")

        @executor(id="publish")
        async def publish(text: str, ctx: WorkflowContext[str, str]) -> None:
            self.calls.append("publish")
            await ctx.yield_output(f"{text}, published")

        builder = WorkflowBuilder(start_executor=plan, name="pipeline", checkpoint_storage=storage)
        return builder.add_edge(plan, draft).add_edge(draft, publish).build()


async def run(storage: CairnCheckpointStorage, workflow: Workflow, **kwargs: Any) -> list[str]:
    """The outputs of a streamed run, its failure recorded by ``storage.track``."""
    outputs: list[str] = []
    async for event in storage.track(workflow, workflow.run(stream=True, **kwargs)):
        if event.type == "output":
            outputs.append(event.data)
    return outputs


async def test_a_failed_run_is_recorded_and_resumes_from_its_checkpoint(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    storage = CairnCheckpointStorage(async_client, workflow=workflow_name)
    pipeline = Pipeline()
    pipeline.broken = True
    try:
        await run(storage, pipeline.build(storage), message="hello")
    except TimeoutError:
        pass
    else:
        raise AssertionError("the run did not fail")
    assert pipeline.calls == ["plan", "draft"]
    execution_id = await storage._runs.execution_id("pipeline")
    execution = await async_client.executions.get(execution_id)
    assert execution.status == "failed"
    (failure,) = [f async for f in async_client.failures.list()]
    detail = await async_client.failures.get(failure.id)
    assert detail.error_type == "TIMEOUT_ERROR"
    assert detail.details["exception"] == "TimeoutError"
    assert detail.details["agent_name"] == "draft"
    assert "the model did not answer" in detail.details["traceback"]

    # The run again from its latest checkpoint (after plan): plan is not redone, and the
    # first checkpoint written replays the execution.
    latest = await storage.get_latest(workflow_name="pipeline")
    assert latest is not None
    pipeline.broken, pipeline.calls = False, []
    outputs = await run(storage, pipeline.build(storage), checkpoint_id=latest.checkpoint_id)
    assert outputs == ["HELLO, drafted, published"]
    assert pipeline.calls == ["draft", "publish"]
    execution = await async_client.executions.get(execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)


async def test_a_rollback_with_cairn_moves_where_the_next_run_resumes(
    async_client: AsyncCairn, workflow_name: str, key: str
) -> None:
    storage = CairnCheckpointStorage(async_client, workflow=workflow_name)
    pipeline = Pipeline()
    assert await run(storage, pipeline.build(storage), message="first") == ["FIRST, drafted, published"]
    execution_id = await storage._runs.execution_id("pipeline")
    listed = [c async for c in async_client.checkpoints.list(execution_id=execution_id)]
    assert [c.name for c in listed][:3] == ["superstep 0", "superstep 1", "superstep 2"]
    after_plan = listed[1]  # plan ran: its message to draft is pending

    # The operator rolls back to it with the command line, as they would on the dashboard.
    done = await run_cairn(key, "executions", "rollback", execution_id, "--to", after_plan.id, "--yes")
    assert done.returncode == 0, done.stderr
    latest = await storage.get_latest(workflow_name="pipeline")
    assert latest is not None
    assert latest.checkpoint_id == after_plan.key
    assert await storage.list_checkpoint_ids(workflow_name="pipeline") == [c.key for c in listed[:2]]

    pipeline.calls = []
    outputs = await run(storage, pipeline.build(storage), checkpoint_id=latest.checkpoint_id)
    assert outputs == ["FIRST, drafted, published"]
    assert pipeline.calls == ["draft", "publish"], "plan is not redone"
    execution = await async_client.executions.get(execution_id)
    assert (execution.status, execution.attempt) == ("running", 2)
    after = [c async for c in async_client.checkpoints.list(execution_id=execution_id)]
    assert after[2].parent_checkpoint_id == after_plan.id, "the new attempt follows the rollback point"
