"""Real CrewAI flows on ``CairnFlowPersistence`` (with ``CairnEventListener`` where runs
fail) against the running stack, seen through the API and the ``cairn`` command line."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from crewai.flow.async_feedback import HumanFeedbackPending, PendingFeedbackContext
from crewai.flow.flow import Flow, FlowState, listen, start
from crewai.flow.human_feedback import human_feedback
from crewai.flow.persistence import persist
from crewai.flow.persistence.factory import set_flow_persistence_factory
from pydantic import Field

from cairn import Cairn, errors
from cairn.crewai import CairnEventListener, CairnFlowPersistence, FlowEnded

from .conftest import URL, cli, tenant_key

pytestmark = pytest.mark.live


class TripState(FlowState):
    stops: list[str] = Field(default_factory=list)
    booked_at: datetime | None = None
    seats: tuple[int, int] = (0, 0)


class Trip:
    """A three-method flow on a persistence; ``broken`` makes ``book`` raise."""

    def __init__(self, persistence: CairnFlowPersistence) -> None:
        self.ran: list[str] = []
        self.broken = False
        trip = self

        @persist(persistence)
        class TripFlow(Flow[TripState]):
            @start()
            def plan(self) -> str:
                trip.ran.append("plan")
                self.state.stops.append("plan")
                self.state.seats = (2, 3)
                return "planned"

            @listen(plan)
            def search(self) -> str:
                trip.ran.append("search")
                self.state.stops.append("search")
                return "found"

            @listen(search)
            def book(self) -> str:
                trip.ran.append("book")
                if trip.broken:
                    raise TimeoutError("the airline timed out")
                self.state.stops.append("book")
                self.state.booked_at = datetime(2026, 12, 24, 9, 0, tzinfo=timezone.utc)
                return f"booked {len(self.state.stops)} stops"

        self.flow = TripFlow


@pytest.fixture
def listener(client: Cairn) -> Iterator[CairnEventListener]:
    with CairnEventListener(client) as recording:
        yield recording


def names(client: Cairn, execution_id: str) -> list[str | None]:
    return [c.name for c in client.checkpoints.list(execution_id=execution_id)]


def test_persisted_and_listened_flows_start_with_their_tags(client: Cairn) -> None:
    trip = Trip(CairnFlowPersistence(client, workflow="tagged-trips", tags={"team": "travel"}))
    trip.flow().kickoff()
    (persisted,) = list(client.executions.list(tags={"team": "travel"}))
    assert client.executions.get(persisted.id).tags == {"team": "travel"}

    class Hello(Flow[FlowState]):
        @start()
        def greet(self) -> str:
            return "hi"

    with CairnEventListener(client, tags={"via": "listener"}) as recording:
        Hello().kickoff()
        recording.flush()
    (listened,) = list(client.executions.list(tags={"via": "listener"}))
    assert listened.status == "completed"


def test_a_failed_flow_is_replayed_with_the_cli_and_resumes_without_rerunning_finished_methods(
    client: Cairn, key: str, listener: CairnEventListener
) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    trip = Trip(persistence)
    trip.broken = True
    first = trip.flow()
    with pytest.raises(TimeoutError):
        first.kickoff()
    assert listener.flush()
    flow_id = first.state.id

    execution = persistence.execution(flow_id)
    assert execution is not None
    assert (execution.key, execution.status) == (flow_id, "failed")
    assert execution.error is not None
    assert execution.error.error_type == "TIMEOUT_ERROR"
    assert names(client, execution.id) == ["plan", "search"]
    failure = client.failures.get(next(iter(client.failures.list(status="open"))).id)
    assert failure.details["task_id"] == "book"
    assert "TimeoutError: the airline timed out" in failure.details["traceback"]
    workflow = client.workflows.get(execution.workflow_id)
    assert (workflow.name, workflow.workflow_type) == ("trips", "crewai")

    replayed = cli(key, "executions", "replay", execution.id)
    assert replayed.returncode == 0, replayed.stderr
    trip.broken, trip.ran = False, []
    result = persistence.resume(trip.flow(), flow_id)
    assert listener.flush()

    assert result == "booked 3 stops"
    assert trip.ran == ["book"], "plan and search ran once, before the failure"
    after = client.executions.get(execution.id)
    assert (after.status, after.attempt) == ("running", 2), "a flow's execution stays running between runs"
    assert names(client, execution.id) == ["plan", "search", "book"]
    state = persistence.load_state(flow_id)
    assert state is not None
    assert (state["stops"], state["seats"], state["booked_at"]) == (
        ["plan", "search", "book"],
        [2, 3],
        "2026-12-24T09:00:00Z",
    )
    done = persistence.complete(flow_id, output={"booked": True})
    assert (done.status, done.output) == ("completed", {"booked": True})
    assert client.failures.get(failure.id).status == "resolved"


def test_after_a_rollback_the_flow_resumes_from_the_rolled_back_checkpoint(client: Cairn) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    trip = Trip(persistence)
    first = trip.flow()
    first.kickoff()
    flow_id = first.state.id
    execution = persistence.execution(flow_id)
    assert execution is not None
    plan = next(c for c in client.checkpoints.list(execution_id=execution.id) if c.name == "plan")

    rolled = client.executions.rollback(execution.id, checkpoint_id=plan.id)
    assert (rolled.status, rolled.discarded_checkpoints) == ("paused", 2)
    assert persistence.load_state(flow_id) == {
        "id": flow_id,
        "stops": ["plan"],
        "booked_at": None,
        "seats": [2, 3],
    }

    trip.ran = []
    assert persistence.resume(trip.flow(), flow_id) == "booked 3 stops"
    assert trip.ran == ["search", "book"]
    after = client.executions.get(execution.id)
    assert (after.status, after.attempt) == ("running", 2), (
        "the next save replayed it from the rollback point"
    )
    checkpoints = list(client.checkpoints.list(execution_id=execution.id))
    assert [c.name for c in checkpoints] == ["plan", "search", "book"]
    assert checkpoints[1].parent_checkpoint_id == plan.id
    state = persistence.load_state(flow_id)
    assert state is not None
    assert state["stops"] == ["plan", "search", "book"]


def test_a_kickoff_with_the_flow_id_continues_after_a_rollback_as_crewai_resumes(client: Cairn) -> None:
    """CrewAI's own resume (``kickoff(inputs={"id": ...})``) runs every method again,
    from the state of the execution's current checkpoint."""
    persistence = CairnFlowPersistence(client, workflow="trips")
    trip = Trip(persistence)
    first = trip.flow()
    first.kickoff()
    execution = persistence.execution(first.state.id)
    assert execution is not None
    plan = next(iter(client.checkpoints.list(execution_id=execution.id)))
    client.executions.rollback(execution.id, checkpoint_id=plan.id)

    again = trip.flow()
    again.kickoff(inputs={"id": first.state.id})
    assert again.state.stops == ["plan", "plan", "search", "book"]
    assert client.executions.get(execution.id).attempt == 2


def test_a_flow_waiting_for_feedback_pauses_its_execution_and_the_feedback_resumes_it(client: Cairn) -> None:
    persistence = CairnFlowPersistence(client, workflow="reviews")

    class Later:
        def request_feedback(self, context: PendingFeedbackContext, flow: Flow[Any]) -> str:
            raise HumanFeedbackPending(context=context)

    @persist(persistence)
    class Review(Flow[TripState]):
        @start()
        @human_feedback(message="Book this trip?", provider=Later())
        def propose(self) -> str:
            self.state.stops.append("proposed")
            return "Paris, 2 seats"

        @listen(propose)
        def decide(self, result: Any) -> str:
            self.state.stops.append(result.feedback)
            return result.feedback

    paused = Review().kickoff()
    assert isinstance(paused, HumanFeedbackPending)
    flow_id = paused.context.flow_id
    execution = persistence.execution(flow_id)
    assert execution is not None
    assert execution.status == "paused"
    pending = client.checkpoints.get(execution.current_checkpoint_id or "", include_state=True)
    assert pending.name == "propose"
    assert pending.metadata == {"crewai_pending_feedback": "true"}
    assert pending.state is not None
    assert pending.state["stops"] == ["proposed"]

    flow = Review.from_pending(flow_id, persistence)
    assert flow.resume("yes") == "yes"
    after = client.executions.get(execution.id)
    assert (after.status, after.attempt) == ("running", 2)
    state = persistence.load_state(flow_id)
    assert state is not None
    assert state["stops"] == ["proposed", "yes"]
    assert persistence.load_pending_feedback(flow_id) is None


def test_the_persistence_factory_and_a_rebuilt_persistence_use_the_environment(env_client: Cairn) -> None:
    set_flow_persistence_factory(CairnFlowPersistence)

    @persist()
    class Counted(Flow[TripState]):
        @start()
        def stop(self) -> None:
            self.state.stops.append("stop")

    first = Counted()
    first.kickoff()
    Counted().kickoff(inputs={"id": first.state.id})
    execution = next(iter(env_client.executions.list()))
    assert execution.key == first.state.id
    assert env_client.workflows.get(execution.workflow_id).name == "crewai-flows"
    assert [c.name for c in env_client.checkpoints.list(execution_id=execution.id)] == ["stop", "stop"]

    persistence = CairnFlowPersistence(workflow="crewai-flows", tags={"team": "travel"})
    dumped = Counted(persistence=persistence).model_dump(mode="json")
    assert dumped["persistence"] == {
        "persistence_type": "CairnFlowPersistence",
        "workflow": "crewai-flows",
        "tags": {"team": "travel"},
    }
    rebuilt = Counted(persistence=dumped["persistence"]).persistence
    assert isinstance(rebuilt, CairnFlowPersistence)
    assert rebuilt.tags == {"team": "travel"}, "a rebuilt persistence keeps its tags"
    assert rebuilt.load_state(first.state.id) == {
        "id": first.state.id,
        "stops": ["stop", "stop"],
        "booked_at": None,
        "seats": [0, 0],
    }


async def test_an_async_flow_resumes_with_aresume(client: Cairn, listener: CairnEventListener) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    trip = Trip(persistence)
    trip.broken = True
    first = trip.flow()
    with pytest.raises(TimeoutError):
        await first.kickoff_async()
    assert listener.flush()
    execution = persistence.execution(first.state.id)
    assert execution is not None
    assert execution.status == "failed"

    trip.broken, trip.ran = False, []
    assert await persistence.aresume(trip.flow(), first.state.id) == "booked 3 stops"
    assert trip.ran == ["book"]
    assert client.executions.get(execution.id).attempt == 2, "the failed execution was replayed by the run"


def test_a_save_after_a_rollback_behind_the_persistence_replays_from_the_rollback_point(
    client: Cairn,
) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    persistence.save_state("f", "plan", {"id": "f", "n": 1})
    persistence.save_state("f", "search", {"id": "f", "n": 2})
    execution = persistence.execution("f")
    assert execution is not None
    first = next(iter(client.checkpoints.list(execution_id=execution.id)))
    client.executions.rollback(execution.id, checkpoint_id=first.id)  # the persistence still thinks it runs

    persistence.save_state("f", "search", {"id": "f", "n": 3})
    after = client.executions.get(execution.id)
    assert (after.status, after.attempt, after.checkpoint_count) == ("running", 2, 2)
    newest = client.checkpoints.get(after.current_checkpoint_id or "")
    assert newest.parent_checkpoint_id == first.id
    assert persistence.load_state("f") == {"id": "f", "n": 3}


def test_a_flow_whose_execution_was_deleted_starts_a_new_one(client: Cairn) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    persistence.save_state("f", "plan", {"id": "f", "n": 1})
    execution = persistence.execution("f")
    assert execution is not None
    client.executions.delete(execution.id)
    assert persistence.load_state("f") is None

    persistence.save_state("f", "plan", {"id": "f", "n": 2})
    again = persistence.execution("f")
    assert again is not None
    assert again.id != execution.id
    assert persistence.load_state("f") == {"id": "f", "n": 2}


def test_a_completed_flow_takes_no_more_states(client: Cairn) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    trip = Trip(persistence)
    first = trip.flow()
    first.kickoff()
    persistence.complete(first.state.id)
    with pytest.raises(FlowEnded, match="restore_from_state_id"):
        persistence.save_state(first.state.id, "plan", {"id": first.state.id})
    with pytest.raises(RuntimeError, match="State persistence failed"):
        trip.flow().kickoff(inputs={"id": first.state.id})
    fork = trip.flow()
    fork.kickoff(restore_from_state_id=first.state.id)
    assert fork.state.stops == ["plan", "search", "book", "plan", "search", "book"]


def test_a_copy_of_the_persistence_shares_its_client(client: Cairn) -> None:
    """CrewAI deep-copies flow method definitions, which may hold the persistence."""
    persistence = CairnFlowPersistence(client, workflow="trips")
    persistence.save_state("f", "plan", {"id": "f", "n": 1})
    copied = copy.deepcopy(persistence)
    assert copied is not persistence
    assert copied.client is client
    assert copied.load_state("f") == {"id": "f", "n": 1}


def test_each_call_costs_a_bounded_number_of_requests(key: str) -> None:
    sent: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent.append(f"{r.method} {r.url.path}")]})
    with Cairn(key, base_url=URL, http_client=http) as client:
        persistence = CairnFlowPersistence(client, workflow="costs")
        persistence.init_db()  # the workflow, once per client
        sent.clear()
        persistence.save_state("f", "a", {"id": "f", "n": 1})
        assert len(sent) == 2, sent  # the execution (by key), the checkpoint
        for n in range(2, 12):
            sent.clear()
            persistence.save_state("f", "a", {"id": "f", "n": n})
            assert len(sent) == 1, sent
        sent.clear()
        assert persistence.load_state("f") == {"id": "f", "n": 11}
        assert len(sent) == 2, sent
        other = CairnFlowPersistence(client, workflow="costs")  # what CrewAI's factory may make
        sent.clear()
        other.save_state("f", "b", {"id": "f", "n": 12})
        assert len(sent) == 1, "the caches are per client"


def test_the_missing_extra_names_the_install_command() -> None:
    code = "import sys; sys.modules['crewai'] = None; import cairn.crewai"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode == 1
    assert 'pip install "cairn-client[crewai]"' in run.stderr


def test_another_tenant_does_not_see_the_flow(client: Cairn) -> None:
    persistence = CairnFlowPersistence(client, workflow="trips")
    persistence.save_state("mine", "a", {"id": "mine"})
    with Cairn(tenant_key(credits=10), base_url=URL) as other:
        assert CairnFlowPersistence(other, workflow="trips").load_state("mine") is None
    with pytest.raises(errors.NotFound):
        persistence.complete("not-a-flow")
