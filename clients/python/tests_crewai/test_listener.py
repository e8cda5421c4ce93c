"""``CairnEventListener`` against the running stack: real crews on a canned LLM (no
network), and flows that are not persisted in Cairn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from crewai import Agent, Crew, Task
from crewai.flow.flow import Flow, FlowState, listen, start
from pydantic import Field

from cairn import Cairn, models
from cairn.crewai import CairnEventListener

from .conftest import CannedLLM

pytestmark = pytest.mark.live


@pytest.fixture
def listener(client: Cairn) -> Iterator[CairnEventListener]:
    with CairnEventListener(client) as recording:
        yield recording


def crew(answers: list[str], tasks: int = 2, name: str = "trip-crew") -> Crew:
    """A crew of one agent on a canned LLM, ``tasks`` tasks in sequence; the LLM raises
    once its answers run out (and the agent does not retry)."""
    llm = CannedLLM(model="canned", answers=answers)
    agent = Agent(
        role="Travel researcher", goal="Plan trips", backstory="Knows maps", llm=llm, max_retry_limit=0
    )
    steps = [
        Task(name=f"step-{i}", description=f"Step {i} of the plan", expected_output="a line", agent=agent)
        for i in range(1, tasks + 1)
    ]
    return Crew(agents=[agent], tasks=steps, name=name)


def only_execution(client: Cairn, workflow: str = "crewai-crews") -> models.Execution:
    found = [e for e in client.executions.list() if client.workflows.get(e.workflow_id).name == workflow]
    assert len(found) == 1, found
    return client.executions.get(found[0].id)


def test_a_crew_kickoff_is_an_execution_with_a_checkpoint_per_task(
    client: Cairn, listener: CairnEventListener
) -> None:
    team = crew(
        ["Final Answer: Lisbon.", "Final Answer: Take the tram.", "Final Answer: Eat pasteis."], tasks=3
    )
    result = team.kickoff(inputs={"city": "Lisbon"})
    assert listener.flush()

    assert result.raw == "Eat pasteis."
    execution = only_execution(client)
    assert execution.status == "completed"
    assert execution.input == {"city": "Lisbon"}
    assert execution.metadata == {"crew": "trip-crew", "crew_id": str(team.id)}
    assert execution.output is not None
    assert execution.output["raw"] == "Eat pasteis."
    checkpoints = list(client.checkpoints.list(execution_id=execution.id))
    assert [c.name for c in checkpoints] == ["step-1", "step-2", "step-3"], "in the order the tasks ran"
    first = client.checkpoints.get(checkpoints[0].id, include_state=True)
    assert first.state == {
        "task_id": str(team.tasks[0].id),
        "task": "step-1",
        "agent": "Travel researcher",
        "raw": "Lisbon.",
    }
    assert client.workflows.get(execution.workflow_id).workflow_type == "crewai"


def test_a_failed_task_fails_the_execution_with_the_agent_the_task_and_the_traceback(
    client: Cairn, listener: CairnEventListener
) -> None:
    team = crew(["Final Answer: Lisbon."])  # the second task's LLM call raises
    with pytest.raises(RuntimeError, match="LLM exploded"):
        team.kickoff()
    assert listener.flush()

    execution = only_execution(client)
    assert execution.status == "failed"
    assert execution.error is not None
    assert (execution.error.error_type, execution.error.message) == ("RUNTIME_ERROR", "LLM exploded")
    assert [c.name for c in client.checkpoints.list(execution_id=execution.id)] == ["step-1"]
    failures = list(client.failures.list())
    assert len(failures) == 1, "the task's failure and the kickoff's are one failure"
    failure = client.failures.get(failures[0].id)
    assert failure.error_type == "RUNTIME_ERROR"
    assert failure.details["agent_name"] == "Travel researcher"
    assert failure.details["task_id"] == str(team.tasks[1].id)
    assert failure.details["task_name"] == "step-2"
    assert "RuntimeError: LLM exploded" in failure.details["traceback"]
    assert "in call" in failure.details["traceback"], "the traceback reaches the LLM"


async def test_an_async_kickoff_is_recorded_too(client: Cairn, listener: CairnEventListener) -> None:
    team = crew(["Final Answer: Porto.", "Final Answer: Walk."])
    result = await team.akickoff()
    assert await asyncio.to_thread(listener.flush)
    assert result.raw == "Walk."
    execution = only_execution(client)
    assert (execution.status, execution.checkpoint_count) == ("completed", 2)


def test_each_kickoff_is_an_execution_of_its_own(client: Cairn, listener: CairnEventListener) -> None:
    crew(["Final Answer: a.", "Final Answer: b."]).kickoff()
    team = crew(["Final Answer: c.", "Final Answer: d."])
    team.kickoff()
    team.tasks[0].agent.llm.answers.extend(["Final Answer: e.", "Final Answer: f."])  # type: ignore[union-attr]
    team.kickoff()
    assert listener.flush()
    executions = list(client.executions.list())
    assert len(executions) == 3
    assert {e.status for e in executions} == {"completed"}
    assert len({e.key for e in executions}) == 3


class PlanState(FlowState):
    steps: list[str] = Field(default_factory=list)


def test_a_flow_run_without_cairn_persistence_is_an_execution_with_its_methods(
    client: Cairn, listener: CairnEventListener
) -> None:
    class Plan(Flow[PlanState]):
        @start()
        def outline(self) -> str:
            self.state.steps.append("outline")
            return "outline"

        @listen(outline)
        def detail(self, previous: str) -> str:
            self.state.steps.append("detail")
            return f"{previous} + detail"

    flow = Plan()
    assert flow.kickoff(inputs={"goal": "trip"}) == "outline + detail"
    assert listener.flush()

    execution = only_execution(client, "crewai-flows")
    assert (execution.status, execution.output) == ("completed", "outline + detail")
    assert execution.metadata == {"flow": "Plan", "flow_id": flow.state.id}
    checkpoints = list(client.checkpoints.list(execution_id=execution.id))
    assert [c.name for c in checkpoints] == ["outline", "detail"]
    last = client.checkpoints.get(checkpoints[-1].id, include_state=True)
    assert last.state == {"id": flow.state.id, "steps": ["outline", "detail"]}


def test_a_flow_that_fails_without_cairn_persistence_fails_its_execution(
    client: Cairn, listener: CairnEventListener
) -> None:
    class Broken(Flow[PlanState]):
        @start()
        def outline(self) -> None:
            self.state.steps.append("outline")

        @listen(outline)
        def detail(self) -> None:
            raise KeyError("no such city")

    with pytest.raises(KeyError):
        Broken().kickoff()
    assert listener.flush()
    execution = only_execution(client, "crewai-flows")
    assert execution.status == "failed"
    assert execution.error is not None
    assert execution.error.error_type == "KEY_ERROR"
    failure = client.failures.get(next(iter(client.failures.list())).id)
    assert (failure.details["task_id"], failure.details["flow"]) == ("detail", "Broken")
    assert "KeyError: 'no such city'" in failure.details["traceback"]


def test_closing_the_listener_stops_recording(client: Cairn) -> None:
    recording = CairnEventListener(client)
    recording.close()
    crew(["Final Answer: a.", "Final Answer: b."]).kickoff()
    assert recording.flush()
    assert list(client.executions.list()) == []


def test_agent_runs_inside_a_crew_are_not_flows_of_their_own(
    client: Cairn, listener: CairnEventListener
) -> None:
    """Every agent step runs in CrewAI's own internal flow: not recorded as a flow."""
    crew(["Final Answer: a.", "Final Answer: b."]).kickoff()
    assert listener.flush()
    assert [client.workflows.get(e.workflow_id).name for e in client.executions.list()] == ["crewai-crews"]
