"""One behaviour suite, two backends: CrewAI's own ``SQLiteFlowPersistence`` (the
reference) and ``CairnFlowPersistence`` against the running stack must give the same
results, through the persistence's methods and through real flows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from crewai.flow.async_feedback import HumanFeedbackPending, PendingFeedbackContext
from crewai.flow.flow import Flow, FlowState, listen, start
from crewai.flow.human_feedback import human_feedback
from crewai.flow.persistence import FlowPersistence, SQLiteFlowPersistence, persist
from crewai.flow.persistence.factory import set_flow_persistence_factory
from pydantic import BaseModel, Field

from cairn import Cairn
from cairn.crewai import CairnFlowPersistence

from .conftest import URL, tenant_key


@pytest.fixture(params=["sqlite", "cairn"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowPersistence]:
    """The reference backend, then Cairn's (a tenant and workflow of the test's own)."""
    if request.param == "sqlite":
        yield SQLiteFlowPersistence(str(tmp_path / "flows.db"))
        return
    with Cairn(tenant_key(), base_url=URL) as client:
        yield CairnFlowPersistence(client, workflow=f"behaviour-{uuid.uuid4().hex[:8]}")


class Item(BaseModel):
    name: str
    price: Decimal


class RichState(FlowState):
    """A state with what JSON has no type for."""

    counter: int = 0
    when: datetime = datetime(2026, 11, 26, 12, 30, tzinfo=timezone.utc)
    pair: tuple[int, str] = (1, "one")
    tags: set[str] = Field(default_factory=lambda: {"only"})
    ref: uuid.UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")
    item: Item = Item(name="pen", price=Decimal("1.50"))
    log: list[str] = Field(default_factory=list)


def context(flow_id: str, method: str = "review", message: str = "Approve?") -> PendingFeedbackContext:
    return PendingFeedbackContext(
        flow_id=flow_id,
        flow_class="tests.ReviewFlow",
        method_name=method,
        method_output={"draft": "text", "at": datetime(2026, 1, 2, tzinfo=timezone.utc)},
        message=message,
        emit=["approved", "rejected"],
    )


# ---- the persistence's methods ----


def test_a_saved_state_loads_back_and_the_latest_wins(backend: FlowPersistence) -> None:
    backend.save_state("flow-1", "plan", {"id": "flow-1", "step": 1})
    backend.save_state("flow-1", "act", {"id": "flow-1", "step": 2, "notes": ["a"]})
    backend.save_state("flow-2", "plan", {"id": "flow-2", "step": 9})
    assert backend.load_state("flow-1") == {"id": "flow-1", "step": 2, "notes": ["a"]}
    assert backend.load_state("flow-2") == {"id": "flow-2", "step": 9}


def test_an_unknown_flow_has_no_state_and_no_pending_feedback(backend: FlowPersistence) -> None:
    assert backend.load_state("never-saved") is None
    assert backend.load_pending_feedback("never-saved") is None


def test_a_model_state_is_stored_as_json(backend: FlowPersistence) -> None:
    state = RichState(id="flow-rich")
    backend.save_state("flow-rich", "plan", state)
    assert backend.load_state("flow-rich") == {
        "id": "flow-rich",
        "counter": 0,
        "when": "2026-11-26T12:30:00Z",
        "pair": [1, "one"],
        "tags": ["only"],
        "ref": "12345678-1234-5678-1234-567812345678",
        "item": {"name": "pen", "price": "1.50"},
        "log": [],
    }


def test_a_dict_state_with_datetimes_and_tuples_is_stored_as_crewai_stores_it(
    backend: FlowPersistence,
) -> None:
    when = datetime(2026, 11, 26, 12, 30, tzinfo=timezone.utc)
    state = {
        "id": "flow-dict",
        "when": when,
        "day": when.date(),
        "pair": (1, 2),
        "tags": {"x"},
        "price": Decimal("19.99"),
        "path": Path("/tmp/data.txt"),
        "ref": uuid.UUID(int=1),
        "item": Item(name="pen", price=Decimal("2")),
    }
    backend.save_state("flow-dict", "plan", state)
    assert backend.load_state("flow-dict") == {
        "id": "flow-dict",
        "when": "2026-11-26T12:30:00+00:00",
        "day": "2026-11-26",
        "pair": [1, 2],
        "tags": ["x"],
        "price": "19.99",
        "path": "/tmp/data.txt",
        "ref": "00000000-0000-0000-0000-000000000001",
        "item": {"name": "pen", "price": "2"},
    }


def test_a_state_that_is_neither_a_dict_nor_a_model_is_refused(backend: FlowPersistence) -> None:
    with pytest.raises(ValueError, match="state_data must be either a Pydantic BaseModel or dict"):
        backend.save_state("flow-bad", "plan", ["not", "a", "state"])  # type: ignore[arg-type]


def test_pending_feedback_is_saved_loaded_and_cleared(backend: FlowPersistence) -> None:
    backend.save_state("flow-hitl", "draft", {"id": "flow-hitl", "text": "v1"})
    backend.save_pending_feedback("flow-hitl", context("flow-hitl"), {"id": "flow-hitl", "text": "v2"})

    loaded = backend.load_pending_feedback("flow-hitl")
    assert loaded is not None
    state, ctx = loaded
    assert state == {"id": "flow-hitl", "text": "v2"}
    assert (ctx.flow_id, ctx.method_name, ctx.message, ctx.emit) == (
        "flow-hitl",
        "review",
        "Approve?",
        ["approved", "rejected"],
    )
    assert ctx.method_output == {"draft": "text", "at": "2026-01-02 00:00:00+00:00"}  # as to_dict() makes it
    assert backend.load_state("flow-hitl") == {"id": "flow-hitl", "text": "v2"}, (
        "the pending state is the latest"
    )

    backend.clear_pending_feedback("flow-hitl")
    assert backend.load_pending_feedback("flow-hitl") is None
    assert backend.load_state("flow-hitl") == {"id": "flow-hitl", "text": "v2"}, "the history stays"
    backend.save_state("flow-hitl", "review", {"id": "flow-hitl", "text": "v3"})
    assert backend.load_state("flow-hitl") == {"id": "flow-hitl", "text": "v3"}


def test_new_pending_feedback_replaces_the_old(backend: FlowPersistence) -> None:
    backend.save_pending_feedback("flow-twice", context("flow-twice", "first", "One?"), {"version": 1})
    backend.save_pending_feedback("flow-twice", context("flow-twice", "second", "Two?"), {"version": 2})
    loaded = backend.load_pending_feedback("flow-twice")
    assert loaded is not None
    assert (loaded[0], loaded[1].method_name, loaded[1].message) == ({"version": 2}, "second", "Two?")


# ---- real flows ----


RAN: list[str] = []


def rich_flow(persistence: FlowPersistence, fail_in: str | None = None) -> type[Flow[RichState]]:
    @persist(persistence)
    class RichFlow(Flow[RichState]):
        @start()
        def plan(self) -> str:
            RAN.append("plan")
            self.state.counter += 1
            self.state.log.append("plan")
            self.state.pair = (self.state.counter, "plan")
            return "planned"

        @listen(plan)
        def act(self) -> str:
            RAN.append("act")
            if fail_in == "act":
                raise RuntimeError("act failed")
            self.state.log.append("act")
            self.state.when = datetime(2027, 1, 1, tzinfo=timezone.utc)
            return "acted"

    return RichFlow


def test_a_flow_saves_after_each_method_and_a_kickoff_with_its_id_restores_it(
    backend: FlowPersistence,
) -> None:
    RAN.clear()
    flow = rich_flow(backend)()
    assert flow.kickoff() == "acted"
    flow_id = flow.state.id
    saved = backend.load_state(flow_id)
    assert saved is not None
    assert (saved["counter"], saved["log"], saved["when"], saved["pair"]) == (
        1,
        ["plan", "act"],
        "2027-01-01T00:00:00Z",
        [1, "plan"],
    )

    again = rich_flow(backend)()
    again.kickoff(inputs={"id": flow_id})
    assert again.state.id == flow_id
    assert again.state.counter == 2, "the second run starts from the saved state"
    assert again.state.when == datetime(2027, 1, 1, tzinfo=timezone.utc)
    assert again.state.pair == (2, "plan")
    assert again.state.tags == {"only"}
    assert RAN == ["plan", "act", "plan", "act"], "CrewAI's own resume runs every method again"


def test_a_method_that_raises_is_not_saved(backend: FlowPersistence) -> None:
    flow = rich_flow(backend, fail_in="act")()
    with pytest.raises(RuntimeError, match="act failed"):
        flow.kickoff()
    saved = backend.load_state(flow.state.id)
    assert saved is not None
    assert saved["log"] == ["plan"]


async def test_an_async_kickoff_saves_and_restores(backend: FlowPersistence) -> None:
    flow = rich_flow(backend)()
    await flow.kickoff_async()
    again = rich_flow(backend)()
    await again.kickoff_async(inputs={"id": flow.state.id})
    assert again.state.counter == 2
    assert backend.load_state(flow.state.id) == again.state.model_dump(mode="json")


def test_a_fork_starts_a_new_flow_from_a_saved_state(backend: FlowPersistence) -> None:
    source = rich_flow(backend)()
    source.kickoff()
    fork = rich_flow(backend)()
    fork.kickoff(restore_from_state_id=source.state.id)
    assert fork.state.id != source.state.id
    assert fork.state.counter == 2
    loaded = backend.load_state(source.state.id)
    assert loaded is not None
    assert loaded["counter"] == 1, "the source's history is unchanged"


class ReviewState(FlowState):
    draft: str = ""
    verdict: str = ""


class Pausing:
    """A feedback provider that asks later: the flow pauses."""

    def request_feedback(self, context: PendingFeedbackContext, flow: Flow[Any]) -> str:
        raise HumanFeedbackPending(context=context)


def test_a_flow_waiting_for_feedback_pauses_and_resumes_from_it(backend: FlowPersistence) -> None:
    class ReviewFlow(Flow[ReviewState]):
        @start()
        @human_feedback(message="Approve the draft?", provider=Pausing())
        def write(self) -> str:
            self.state.draft = "a draft"
            return "a draft"

        @listen(write)
        def finish(self, result: Any) -> str:
            self.state.verdict = result.feedback
            return f"done: {result.feedback}"

    paused = ReviewFlow(persistence=backend).kickoff()
    assert isinstance(paused, HumanFeedbackPending)
    flow_id = paused.context.flow_id
    pending = backend.load_pending_feedback(flow_id)
    assert pending is not None
    assert pending[0]["draft"] == "a draft"
    assert pending[1].message == "Approve the draft?"

    resumed = ReviewFlow.from_pending(flow_id, backend)
    assert resumed.state.draft == "a draft"
    assert resumed.resume("looks good") == "done: looks good"
    assert resumed.state.verdict == "looks good"
    assert backend.load_pending_feedback(flow_id) is None


def test_a_persistence_rebuilt_from_its_fields_reads_the_same_flows(
    backend: FlowPersistence, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CrewAI serialises ``Flow.persistence`` and rebuilds it from ``persistence_type``
    (a Cairn one then makes its client from the environment)."""
    flow = rich_flow(backend)(persistence=backend)
    flow.kickoff()
    dumped = flow.model_dump(mode="json")["persistence"]
    assert dumped["persistence_type"] == type(backend).__name__
    if isinstance(backend, CairnFlowPersistence):
        monkeypatch.setenv("CAIRN_API_KEY", backend.client._settings.api_key)
        monkeypatch.setenv("CAIRN_API_URL", URL or "")
        from cairn.crewai import _common

        monkeypatch.setattr(_common, "_default", None)
    rebuilt = rich_flow(backend)(persistence=dumped).persistence
    assert type(rebuilt) is type(backend)
    assert rebuilt is not backend
    assert rebuilt is not None
    assert rebuilt.load_state(flow.state.id) == backend.load_state(flow.state.id)


def test_the_persistence_factory_backs_persist_without_arguments(backend: FlowPersistence) -> None:
    set_flow_persistence_factory(lambda: backend)

    @persist()
    class Counter(Flow[RichState]):
        @start()
        def count(self) -> None:
            self.state.counter += 1

    flow = Counter()
    flow.kickoff()
    Counter().kickoff(inputs={"id": flow.state.id})
    loaded = backend.load_state(flow.state.id)
    assert loaded is not None
    assert loaded["counter"] == 2
