"""``CairnTracingProcessor`` on real runs of the SDK's offline ``ScriptedModel``: every run
an execution, every agent a checkpoint, a failed run a failure with the agent's name,
and never an error in the agent's way."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    RunConfig,
    Runner,
    function_tool,
    input_guardrail,
    set_trace_processors,
    trace,
)
from agents.testing import ScriptedModel, assistant_message, function_call

from cairn import AsyncCairn, Cairn, models
from cairn.openai_agents import CairnTracingProcessor

from .conftest import free_port


@pytest.fixture
def processor(client: Cairn) -> Iterator[CairnTracingProcessor]:
    recorder = CairnTracingProcessor(client)
    set_trace_processors([recorder])  # in an application: add_trace_processor(CairnTracingProcessor())
    yield recorder
    recorder.shutdown()


def runs(client: Cairn, processor: CairnTracingProcessor) -> list[models.Execution]:
    """The executions of the processor's workflow, oldest first, once everything is sent."""
    processor.force_flush()
    workflow = next(w for w in client.workflows.list() if w.name == "openai-agents-runs")
    assert workflow.workflow_type == "custom"
    found = [client.executions.get(e.id) for e in client.executions.list(workflow_id=workflow.id)]
    return sorted(found, key=lambda e: e.created_at)


def states(client: Cairn, execution: models.Execution) -> list[tuple[str | None, dict[str, Any]]]:
    checkpoints = client.checkpoints.list(execution_id=execution.id)
    return [(c.name, client.checkpoints.get(c.id, include_state=True).state or {}) for c in checkpoints]


def failure_of(client: Cairn, execution: models.Execution) -> models.Failure:
    (found,) = [f for f in client.failures.list() if f.execution_id == execution.id]
    return client.failures.get(found.id)


@function_tool
def lookup_invoice(number: str) -> str:
    """An invoice's amount."""
    if number == "missing":
        raise LookupError("no such invoice")
    return f"invoice {number}: 42 EUR"


def billing(invoice: str, answer: str) -> Agent[Any]:
    """An agent that looks the invoice up, then answers."""
    model = ScriptedModel(
        [
            [function_call("lookup_invoice", {"number": invoice}, call_id="c1")],
            [assistant_message(answer)],
        ]
    )
    return Agent(name="billing", tools=[lookup_invoice], model=model)


async def test_a_run_is_an_execution_with_a_checkpoint_per_agent(
    client: Cairn, processor: CairnTracingProcessor
) -> None:
    triage = Agent(
        name="triage",
        handoffs=[billing("F-1", "Invoice F-1 is 42 EUR.")],
        model=ScriptedModel([[function_call("transfer_to_billing", {}, call_id="h1")]]),
    )
    config = RunConfig(workflow_name="support", group_id="ticket-7", trace_metadata={"customer": "c-42"})
    result = await Runner.run(triage, "What is invoice F-1?", run_config=config)
    assert result.final_output == "Invoice F-1 is 42 EUR."

    (execution,) = runs(client, processor)
    assert execution.status == "completed"
    assert execution.metadata["agent"] == "triage"
    assert execution.metadata["workflow_name"] == "support"
    assert execution.input["workflow_name"] == "support"
    assert execution.input["group_id"] == "ticket-7"
    assert execution.input["metadata"] == {"customer": "c-42"}
    assert execution.input["trace_id"] == execution.metadata["trace_id"]
    assert execution.output["agents"] == ["triage", "billing"]
    recorded = states(client, execution)
    assert [name for name, _ in recorded] == ["triage", "billing"]
    triage_state, billing_state = recorded[0][1], recorded[1][1]
    assert triage_state["handoffs"] == ["billing"]
    assert triage_state["error"] is None
    assert [h["to_agent"] for h in triage_state["handoff_calls"]] == ["billing"]
    assert billing_state["turns"] == 2
    (call,) = billing_state["tool_calls"]
    assert (call["name"], call["output"]) == ("lookup_invoice", "invoice F-1: 42 EUR")
    # A replay from the start would run both agents again, and the tool the billing one called.
    preview = client.executions.replay_preview(execution.id, checkpoint_id=None)
    assert [(s.name, s.count) for s in preview.steps] == [("triage", 1), ("billing", 1)]
    assert [(t.name, t.count) for t in preview.tool_calls] == [("lookup_invoice", 1)]
    assert (preview.replayable, preview.refused is not None) == (False, True)  # completed


async def test_a_failed_run_is_a_failure_with_the_agents_name(
    client: Cairn, processor: CairnTracingProcessor
) -> None:
    agent = Agent(name="summariser", model=ScriptedModel([RuntimeError("model boom")]))
    with pytest.raises(RuntimeError, match="model boom"):
        await Runner.run(agent, "Summarise the ticket")

    (execution,) = runs(client, processor)
    assert execution.status == "failed"
    assert execution.error is not None
    assert (execution.error.error_type, execution.error.message) == ("AGENT_ERROR", "model boom")
    failure = failure_of(client, execution)
    assert failure.status == "open"
    assert failure.details["agent_name"] == "summariser"
    assert failure.details["error"] == {"message": "Error in agent run", "data": {"error": "model boom"}}
    assert [name for name, _ in states(client, execution)] == ["summariser"]


async def test_a_tool_error_the_model_recovers_from_is_not_a_failure(
    client: Cairn, processor: CairnTracingProcessor
) -> None:
    agent = billing("missing", "I could not find that invoice.")
    assert (await Runner.run(agent, "invoice 'missing'?")).final_output == "I could not find that invoice."
    (execution,) = runs(client, processor)
    assert execution.status == "completed"
    ((_, state),) = states(client, execution)
    assert state["tool_calls"][0]["error"]["message"] == "Error running tool (non-fatal)"


async def test_a_guardrail_tripwire_and_max_turns_fail_their_runs(
    client: Cairn, processor: CairnTracingProcessor
) -> None:
    @input_guardrail
    def no_refunds(context: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="refund" in str(text))

    guarded = Agent(
        name="guarded", input_guardrails=[no_refunds], model=ScriptedModel([[assistant_message("ok")]])
    )
    with pytest.raises(InputGuardrailTripwireTriggered):
        await Runner.run(guarded, "I want a refund")
    looping = Agent(
        name="looping",
        tools=[lookup_invoice],
        model=ScriptedModel([[function_call("lookup_invoice", {"number": "F-1"}, call_id="c1")]]),
    )
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(looping, "loop", max_turns=1)

    guarded_run, looping_run = runs(client, processor)
    assert guarded_run.error is not None
    assert looping_run.error is not None
    assert guarded_run.error.error_type == "GUARDRAIL_TRIPWIRE_TRIGGERED"
    assert failure_of(client, guarded_run).details["agent_name"] == "guarded"
    assert looping_run.error.error_type == "MAX_TURNS_EXCEEDED"
    assert failure_of(client, looping_run).details["agent_name"] == "looping"


async def test_each_run_of_a_trace_is_an_execution_of_its_own(
    client: Cairn, processor: CairnTracingProcessor
) -> None:
    with trace("nightly batch") as batch:
        for name in ("first", "second"):
            agent = Agent(name=name, model=ScriptedModel([[assistant_message(f"{name} done")]]))
            await Runner.run(agent, "go")
    first, second = runs(client, processor)
    assert [first.metadata["agent"], second.metadata["agent"]] == ["first", "second"]
    assert first.metadata["trace_id"] == second.metadata["trace_id"] == batch.trace_id
    assert first.status == second.status == "completed"
    assert first.key != second.key


async def test_a_cairn_outage_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    unreachable = Cairn("cairn_" + "0" * 43, base_url=f"http://127.0.0.1:{free_port()}/api/v1", max_retries=0)
    recorder = CairnTracingProcessor(unreachable)
    set_trace_processors([recorder])
    agent = Agent(name="resilient", model=ScriptedModel([[assistant_message("still answered")]]))
    with caplog.at_level(logging.WARNING, logger="cairn.openai_agents"):
        result = await Runner.run(agent, "hello")
        recorder.shutdown()
    assert result.final_output == "still answered"
    assert "the run is not recorded" in caplog.text


def test_the_processor_sends_from_its_own_thread_so_it_needs_a_sync_client(async_client: AsyncCairn) -> None:
    with pytest.raises(TypeError, match=r"must be a cairn\.Cairn"):
        CairnTracingProcessor(async_client)  # type: ignore[arg-type]
