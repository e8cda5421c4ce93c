"""Real LangGraph graphs on CairnSaver against the running stack, sync and async: a
run read back as history (and as the Cairn execution's checkpoints), an interrupt and
its resume, ``update_state`` at an interrupt, a fork, a 3 MiB state, a Cairn rollback
that LangGraph then sees, a node that raises (a Cairn failure), and two tenants that
never see each other's threads."""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, StateSnapshot, interrupt

from cairn import AsyncCairn, Cairn, errors, models
from cairn.langgraph import CairnSaver

from .conftest import URL, admin

pytestmark = pytest.mark.live

Mode = Literal["sync", "async"]
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
MiB = 1024 * 1024


class State(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    blob: str


class Graph:
    """A compiled graph run sync (``invoke``) or async (``ainvoke``) alike."""

    def __init__(self, builder: StateGraph[Any], saver: CairnSaver, mode: Mode) -> None:
        self.graph = builder.compile(checkpointer=saver)
        self.mode = mode

    async def invoke(self, input: Any, config: dict[str, Any]) -> Any:
        if self.mode == "sync":
            return self.graph.invoke(input, config)  # type: ignore[arg-type]
        return await self.graph.ainvoke(input, config)  # type: ignore[arg-type]

    async def state(self, config: dict[str, Any]) -> StateSnapshot:
        if self.mode == "sync":
            return self.graph.get_state(config)  # type: ignore[arg-type]
        return await self.graph.aget_state(config)  # type: ignore[arg-type]

    async def update(self, config: dict[str, Any], values: Any, as_node: str) -> Any:
        if self.mode == "sync":
            return self.graph.update_state(config, values, as_node=as_node)  # type: ignore[arg-type]
        return await self.graph.aupdate_state(config, values, as_node=as_node)  # type: ignore[arg-type]

    async def history(self, config: dict[str, Any]) -> list[StateSnapshot]:
        if self.mode == "sync":
            return list(self.graph.get_state_history(config))  # type: ignore[arg-type]
        return [s async for s in self.graph.aget_state_history(config)]  # type: ignore[arg-type]


@pytest.fixture
async def saver_for(key: str) -> AsyncIterator[Any]:
    """``saver_for(mode, workflow_id)``: a saver on the test's tenant."""
    made: list[CairnSaver] = []

    def make(mode: Mode, workflow: str) -> CairnSaver:
        if mode == "sync":
            saver = CairnSaver(Cairn(key, base_url=URL), workflow=workflow)
        else:
            saver = CairnSaver(async_client=AsyncCairn(key, base_url=URL), workflow=workflow)
        made.append(saver)
        return saver

    yield make
    for saver in made:
        await saver.aclose()
        if saver.client is not None:
            saver.client.close()
        if saver.async_client is not None:
            await saver.async_client.close()


def workflow(client: Cairn) -> str:
    return client.workflows.create(name=f"graph-{uuid.uuid4().hex[:8]}", workflow_type="langgraph").id


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:8]}"}}


def execution_of(client: Cairn, workflow_id: str, config: dict[str, Any]) -> models.ExecutionSummary:
    (found,) = client.executions.list(workflow_id=workflow_id, key=config["configurable"]["thread_id"])
    return found


def three_steps(ran: list[str] | None = None) -> StateGraph[Any]:
    def step(name: str) -> Any:
        def node(state: State) -> State:
            if ran is not None:
                ran.append(name)
            return {"steps": [name]}

        return node

    g = StateGraph(State)
    for name in ("plan", "act", "report"):
        g.add_node(name, step(name))
    g.add_edge(START, "plan")
    g.add_edge("plan", "act")
    g.add_edge("act", "report")
    g.add_edge("report", END)
    return g


@MODES
async def test_a_run_is_read_back_as_history_and_as_the_executions_checkpoints(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    wf = workflow(client)
    graph = Graph(three_steps(), saver_for(mode, wf), mode)
    cfg = thread("run")
    assert await graph.invoke({"steps": []}, cfg) == {"steps": ["plan", "act", "report"]}

    history = await graph.history(cfg)
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]  # type: ignore[index]
    assert history[0].values == {"steps": ["plan", "act", "report"]}
    assert history[0].next == ()
    assert history[2].next == ("act",)

    execution = execution_of(client, wf, cfg)
    assert (execution.status, execution.attempt, execution.checkpoint_count) == ("running", 1, 5)
    checkpoints = list(client.checkpoints.list(execution_id=execution.id))
    assert [c.name for c in checkpoints] == ["input -1", "loop 0", "loop 1", "loop 2", "loop 3"]
    assert [c.key for c in checkpoints] == [
        h.config["configurable"]["checkpoint_id"] for h in reversed(history)
    ]
    last = client.checkpoints.get(checkpoints[-1].id, include_state=True)
    assert last.state is not None
    assert last.state["checkpoint"]["channel_values"]["steps"] == ["plan", "act", "report"], "readable JSON"
    assert last.metadata["source"] == '"loop"'


def approval() -> StateGraph[Any]:
    def review(state: State) -> State:
        return {"steps": [f"review:{interrupt({'question': 'send it?'})}"]}

    g = StateGraph(State)
    g.add_node("draft", lambda s: {"steps": ["draft"]})
    g.add_node("review", review)
    g.add_node("send", lambda s: {"steps": ["send"]})
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", "send")
    g.add_edge("send", END)
    return g


@MODES
async def test_an_interrupt_pauses_the_execution_and_the_resume_replays_it(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    wf = workflow(client)
    graph = Graph(approval(), saver_for(mode, wf), mode)
    cfg = thread("approval")
    first = await graph.invoke({"steps": []}, cfg)
    assert first["__interrupt__"][0].value == {"question": "send it?"}
    paused = execution_of(client, wf, cfg)
    assert (paused.status, paused.attempt) == ("paused", 1)
    snapshot = await graph.state(cfg)
    assert snapshot.next == ("review",)
    assert snapshot.interrupts[0].value == {"question": "send it?"}

    done = await graph.invoke(Command(resume="yes"), cfg)
    assert done == {"steps": ["draft", "review:yes", "send"]}
    resumed = client.executions.get(paused.id)
    assert (resumed.status, resumed.attempt) == ("running", 2)


@MODES
async def test_update_state_at_an_interrupt_is_a_replay_the_run_then_goes_on_from(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    wf = workflow(client)
    graph = Graph(approval(), saver_for(mode, wf), mode)
    cfg = thread("update")
    await graph.invoke({"steps": []}, cfg)
    paused = execution_of(client, wf, cfg)
    assert (paused.status, paused.attempt, paused.checkpoint_count) == ("paused", 1, 3)

    # A person answers in the reviewer's place: a checkpoint of source "update", written
    # to a paused execution, so a replay (attempt 2); the run goes on from it.
    await graph.update(cfg, {"steps": ["review:edited"]}, as_node="review")
    updated = client.executions.get(paused.id)
    assert (updated.status, updated.attempt, updated.checkpoint_count) == ("running", 2, 4)
    newest = client.checkpoints.list(execution_id=paused.id, order="desc").first_page().items[0]
    assert newest.metadata["source"] == '"update"'
    snapshot = await graph.state(cfg)
    assert snapshot.next == ("send",)
    assert await graph.invoke(None, cfg) == {"steps": ["draft", "review:edited", "send"]}
    done = client.executions.get(paused.id)
    assert (done.status, done.attempt, done.checkpoint_count) == ("running", 2, 5)


@MODES
async def test_a_fork_runs_again_from_an_earlier_checkpoint(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    wf = workflow(client)
    graph = Graph(three_steps(), saver_for(mode, wf), mode)
    cfg = thread("fork")
    await graph.invoke({"steps": []}, cfg)
    history = await graph.history(cfg)
    after_plan = next(h for h in history if h.next == ("act",))
    fork_cfg = {"configurable": {**cfg["configurable"], **after_plan.config["configurable"]}}

    assert await graph.invoke(None, fork_cfg) == {"steps": ["plan", "act", "report"]}
    forked = await graph.history(cfg)
    assert len(forked) == 8, "5, then a fork of the checkpoint and the two steps after it"
    newest = forked[0]
    assert newest.values == {"steps": ["plan", "act", "report"]}
    by_id = {h.config["configurable"]["checkpoint_id"]: h for h in forked}
    chain = [newest]
    while (parent := chain[-1].parent_config) is not None:
        chain.append(by_id[parent["configurable"]["checkpoint_id"]])
    assert [h.metadata["source"] for h in chain] == ["loop", "loop", "fork", "loop", "loop", "input"]  # type: ignore[index]
    assert (
        chain[3].config["configurable"]["checkpoint_id"] == after_plan.config["configurable"]["checkpoint_id"]
    )
    execution = execution_of(client, wf, cfg)
    assert (execution.status, execution.attempt, execution.checkpoint_count) == ("running", 1, 8)


@MODES
async def test_a_3_mib_state_round_trips(mode: Mode, client: Cairn, saver_for: Any) -> None:
    wf = workflow(client)
    g = StateGraph(State)
    g.add_node("big", lambda s: {"blob": "x" * (3 * MiB), "steps": ["big"]})
    g.add_edge(START, "big")
    graph = Graph(g, saver_for(mode, wf), mode)
    cfg = thread("big")
    await graph.invoke({"steps": []}, cfg)
    values = (await graph.state(cfg)).values
    assert len(values["blob"]) == 3 * MiB
    execution = execution_of(client, wf, cfg)
    sizes = [c.state_size_bytes for c in client.checkpoints.list(execution_id=execution.id)]
    assert max(sizes) > 3 * MiB


@MODES
async def test_a_cairn_rollback_is_what_langgraph_sees_next(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    ran: list[str] = []
    wf = workflow(client)
    graph = Graph(three_steps(ran), saver_for(mode, wf), mode)
    cfg = thread("rollback")
    await graph.invoke({"steps": []}, cfg)
    history = await graph.history(cfg)
    after_plan = next(h for h in history if h.next == ("act",))
    target_id = after_plan.config["configurable"]["checkpoint_id"]
    execution = execution_of(client, wf, cfg)
    (target,) = client.checkpoints.list(execution_id=execution.id, key=target_id)
    rolled = client.executions.rollback(execution.id, checkpoint_id=target.id)
    assert (rolled.status, rolled.discarded_checkpoints) == ("paused", 2)

    # The newest checkpoint is the rollback's target now, with its writes: act's result,
    # written before the rollback, is still pending on it.
    snapshot = await graph.state(cfg)
    assert snapshot.config["configurable"]["checkpoint_id"] == target_id
    assert [(t.name, t.result) for t in snapshot.tasks] == [("act", {"steps": ["act"]})]
    assert [h.metadata["step"] for h in await graph.history(cfg)] == [1, 0, -1]  # type: ignore[index]

    # Going on from there replays the execution (the saver finds it paused); act's
    # pending writes are applied, not run again.
    ran.clear()
    assert await graph.invoke(None, cfg) == {"steps": ["plan", "act", "report"]}
    assert ran == ["report"]
    after = client.executions.get(execution.id)
    assert (after.status, after.attempt, after.checkpoint_count) == ("running", 2, 5)


@MODES
async def test_a_node_that_raises_fails_the_execution_with_a_failure(
    mode: Mode, client: Cairn, saver_for: Any
) -> None:
    def flaky(state: State) -> State:
        raise RuntimeError("the model exploded")

    wf = workflow(client)
    g = StateGraph(State)
    g.add_node("ok", lambda s: {"steps": ["ok"]})
    g.add_node("flaky", flaky)
    g.add_edge(START, "ok")
    g.add_edge("ok", "flaky")
    graph = Graph(g, saver_for(mode, wf), mode)
    cfg = thread("error")
    with pytest.raises(RuntimeError, match="exploded"):
        await graph.invoke({"steps": []}, cfg)

    execution = client.executions.get(execution_of(client, wf, cfg).id)
    assert execution.status == "failed"
    assert execution.error is not None
    assert (execution.error.error_type, execution.error.message) == ("RUNTIME_ERROR", "the model exploded")
    (failure,) = [f for f in client.failures.list() if f.execution_id == execution.id]
    detail = client.failures.get(failure.id)
    assert detail.error_type == "RUNTIME_ERROR"
    assert detail.details["channel"] == "__error__"
    assert "RuntimeError" in detail.details["traceback"]
    snapshot = await graph.state(cfg)
    assert snapshot.tasks[0].error is not None, "the error is a pending write LangGraph shows"


def tenant_key() -> str:
    tenant = admin("tenant", "create", "--name", "langgraph other tenant")
    api_key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", "100")
    return api_key


@MODES
async def test_two_tenants_never_see_each_others_threads(mode: Mode, key: str, saver_for: Any) -> None:
    other_key = tenant_key()
    mine = Graph(three_steps(), saver_for(mode, "shared-name"), mode)
    if mode == "sync":
        other_saver = CairnSaver(Cairn(other_key, base_url=URL), workflow="shared-name")
    else:
        other_saver = CairnSaver(async_client=AsyncCairn(other_key, base_url=URL), workflow="shared-name")
    theirs = Graph(approval(), other_saver, mode)
    cfg = {"configurable": {"thread_id": "same-thread"}}
    await mine.invoke({"steps": []}, cfg)
    await theirs.invoke({"steps": []}, cfg)

    assert (await mine.state(cfg)).values == {"steps": ["plan", "act", "report"]}
    assert (await theirs.state(cfg)).values == {"steps": ["draft"]}
    assert len(await mine.history(cfg)) == 5
    assert len(await theirs.history(cfg)) == 3
    with Cairn(other_key, base_url=URL) as other:
        (their_execution,) = other.executions.list()
        assert their_execution.status == "paused"
    with Cairn(key, base_url=URL) as me:
        (my_execution,) = me.executions.list()
        assert my_execution.status == "running"
        with pytest.raises(errors.NotFound):
            me.executions.get(their_execution.id)
    other_saver.close()
    await other_saver.aclose()


@MODES
@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_a_step_costs_one_request_and_no_lookups(mode: Mode, durability: str, key: str) -> None:
    """Each super-step is one ``POST /checkpoints``: the step's writes ride with the
    checkpoint that ends it (``pending_writes``), none is sent on its own and nothing is
    looked up, in either durability (``async`` sends a step's writes before that step's
    checkpoint is stored)."""
    import httpx

    sent: list[httpx.Request] = []
    hooks = {"request": [sent.append]}
    ahooks = {"request": [lambda r: _append(sent, r)]}
    if mode == "sync":
        saver = CairnSaver(
            Cairn(key, base_url=URL, http_client=httpx.Client(timeout=60, event_hooks=hooks)), workflow="w"
        )
    else:
        http = httpx.AsyncClient(timeout=60, event_hooks=ahooks)
        saver = CairnSaver(async_client=AsyncCairn(key, base_url=URL, http_client=http), workflow="w")
    compiled = three_steps().compile(checkpointer=saver)
    cfg = thread("one-request")
    run = compiled.invoke if mode == "sync" else compiled.ainvoke
    for n in range(3):
        sent.clear()
        if mode == "sync":
            out = run({"steps": []}, cfg, durability=durability)  # type: ignore[arg-type]
        else:
            out = await run({"steps": []}, cfg, durability=durability)  # type: ignore[arg-type, misc]
        assert out["steps"] == ["plan", "act", "report"] * (n + 1)
        posts = [r.url.path for r in sent if r.method == "POST"]
        lookups = [r.url for r in sent if r.url.path.endswith("/checkpoints") and "key" in r.url.params]
        # A checkpoint for the input and after each of the 3 nodes, and the run's
        # first: 5 (the first run also starts the execution).
        assert posts.count("/api/v1/checkpoints") == 5, posts
        # A step's writes that LangGraph hands over after the next put started (its
        # background threads race, rarely) go on their own.
        assert len([p for p in posts if p.endswith("/writes")]) <= 2, posts
        if n > 0:  # the thread's first run looks up what its first put may have stored
            assert lookups == [], f"run {n + 1}: {len(lookups)} lookups of {len(sent)} requests"
    history = (
        list(compiled.get_state_history(cfg))
        if mode == "sync"
        else [s async for s in compiled.aget_state_history(cfg)]
    )  # type: ignore[arg-type]
    assert len(history) == 15, "every step's checkpoint is stored"
    # Each step's writes are its checkpoint's pending writes, as LangGraph reads them.
    results = [(t.name, t.result) for h in history[1:4] for t in h.tasks]
    assert results == [(n, {"steps": [n]}) for n in ("report", "act", "plan")]
    await saver.aclose()
    if saver.client is not None:
        saver.client.close()
    await saver.aclose()
    if saver.client is not None:
        saver.client.close()


async def _append(sent: list[Any], url: Any) -> None:
    sent.append(url)
