"""``CairnFlowPersistence``: CrewAI flow states as Cairn checkpoints (see :mod:`cairn.crewai`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from crewai.flow.async_feedback.types import PendingFeedbackContext
from crewai.flow.persistence.base import FlowPersistence
from crewai.flow.runtime import Flow
from crewai.flow.types import CompletedMethodData, FlowExecutionData
from pydantic import BaseModel, Field, PrivateAttr

from cairn import Cairn, _runs, errors, models
from cairn import _specs as specs

from ._common import (
    NAME_CHARS,
    Known,
    Registry,
    bounded_output,
    default_client,
    quietly_ended,
    registry,
    state_dict,
    text,
    to_json,
    workflow_id,
)

T = TypeVar("T")

#: The checkpoint metadata that marks a checkpoint saved with pending feedback.
PENDING_KEY = "crewai_pending_feedback"
#: Where a pending checkpoint holds the ``PendingFeedbackContext`` (its writes).
PENDING_TASK, PENDING_CHANNEL = "crewai", "pending_feedback"


#: The flow's execution is completed or cancelled: it takes no more states (the run
#: core's one ended error, :class:`cairn.errors.ExecutionEnded`).
FlowEnded = errors.ExecutionEnded


class CairnFlowPersistence(FlowPersistence):
    """CrewAI flow persistence on Cairn: ``@persist(CairnFlowPersistence())``.

    A flow's ``state.id`` is the ``key`` of an execution of ``workflow`` (a ``wf_...``
    id, or a name: found, else created with ``workflow_type="crewai"``); every
    ``save_state`` is a checkpoint of that execution named after the method, whose state
    is the flow's state as JSON; ``load_state`` returns the state of the execution's
    current checkpoint, so a rollback or replay made in the dashboard, the CLI or the
    API decides where the flow resumes. ``client`` defaults to ``Cairn()`` from the
    environment, made on first use (also when CrewAI rebuilds this object from its
    fields).
    """

    persistence_type: str = Field(default="CairnFlowPersistence")
    workflow: str = Field(default="crewai-flows")
    #: Tags every execution it starts gets (``CairnFlowPersistence(tags={...})``).
    tags: dict[str, str] = Field(default_factory=dict)
    _client: Cairn | None = PrivateAttr(default=None)

    def __init__(self, client: Cairn | None = None, *, workflow: str = "crewai-flows", **data: Any) -> None:
        if not workflow:
            raise ValueError("workflow must be a workflow id (wf_...) or a name")
        super().__init__(workflow=workflow, **data)
        self._client = client

    def __repr__(self) -> str:
        return f"CairnFlowPersistence(workflow={self.workflow!r})"

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> CairnFlowPersistence:
        # A copy shares the client (its connections are not copied).
        return self.model_copy()

    @property
    def client(self) -> Cairn:
        """The client: the one given, else the process-wide ``Cairn()`` from the environment."""
        return self._client if self._client is not None else default_client()

    # ---- executions ----

    def _registry(self) -> tuple[Cairn, Registry, str]:
        client = self.client
        return client, registry(client), workflow_id(client, self.workflow)

    def _read(self, flow_uuid: str) -> Known | None:
        """The flow's execution as it is now (one request), or None."""
        client, reg, wf = self._registry()
        cached = reg.known(wf, flow_uuid)
        if cached is not None:
            try:
                return reg.remember(wf, flow_uuid, client.executions.get(cached.id))
            except errors.NotFound:
                reg.forget(wf, flow_uuid)  # deleted: look for another with the key
        page = client.executions.list(workflow_id=wf, key=flow_uuid, page_size=1).first_page()
        if not page.items:
            return None
        return reg.remember(wf, flow_uuid, page.items[0])

    def _ended(self, flow_uuid: str) -> Callable[[str, str], str]:
        def ended(execution_id: str, status: str) -> str:
            return (
                f"flow {flow_uuid!r} (execution {execution_id}) is {status}: it takes no more "
                "states; kick the flow off with a new id, or fork it with "
                f"kickoff(restore_from_state_id={flow_uuid!r})"
            )

        return ended

    def _running(self, flow_uuid: str, known: Known) -> Known:
        """Makes the execution running: a replay from its current checkpoint when it is
        paused (rolled back, or waiting for feedback) or failed (the run core's rule)."""
        client, reg, wf = self._registry()
        latest = _runs.run(client, _runs.running(known.id, known.status, self._ended(flow_uuid))).execution
        return known if latest is None else reg.remember(wf, flow_uuid, latest)

    def _write(self, flow_uuid: str, send: Callable[[str], _runs.Flow[T]]) -> T:
        """``send`` (a flow given the execution's id) on the flow's running execution, by
        the run core's :func:`~cairn._runs.write_running`: started by key, or replayed;
        sent again after a 409 or 404 (its status changed behind this process: a rollback
        paused it, or it was deleted)."""
        client, reg, wf = self._registry()
        with reg.lock(flow_uuid):
            known = reg.known(wf, flow_uuid)
            seen = _runs.Seen(known.id, known.status) if known is not None else _runs.Seen()

            def start() -> _runs.Flow[models.Execution]:
                return _runs.call(
                    specs.executions_create(None, workflow_id=wf, key=flow_uuid, tags=self.tags)
                )

            try:
                return _runs.run(client, _runs.write_running(seen, start, send, self._ended(flow_uuid)))
            finally:
                if seen.id is None:
                    reg.forget(wf, flow_uuid)
                elif known is not None and known.id == seen.id:
                    known.status = seen.status
                else:
                    reg.keep(wf, flow_uuid, Known(seen.id, seen.status, None))

    def _checkpoint(
        self, state: dict[str, Any], name: str, **kwargs: Any
    ) -> Callable[[str], _runs.Flow[models.Checkpoint]]:
        def send(execution_id: str) -> _runs.Flow[models.Checkpoint]:
            stored: models.Checkpoint = yield specs.checkpoints_create(
                None, execution_id=execution_id, state=state, name=text(name, NAME_CHARS) or "state", **kwargs
            )
            return stored

        return send

    # ---- FlowPersistence ----

    def init_db(self) -> None:
        """Finds the workflow (by name), or creates it; nothing else is needed."""
        self._registry()

    def save_state(self, flow_uuid: str, method_name: str, state_data: dict[str, Any] | BaseModel) -> None:
        """A checkpoint of the flow's execution named after the method (one request
        once the execution is known in this process)."""
        state = state_dict(state_data)
        self._write(flow_uuid, self._checkpoint(state, method_name))

    def load_state(self, flow_uuid: str) -> dict[str, Any] | None:
        """The state of the execution's current checkpoint (two requests), or None."""
        for _ in range(2):
            known = self._read(flow_uuid)
            if known is None or known.current is None:
                return None
            try:
                checkpoint = self.client.checkpoints.get(known.current, include_state=True)
            except errors.NotFound:
                continue  # rolled back meanwhile: read the execution again
            return checkpoint.state if isinstance(checkpoint.state, dict) else None
        return None

    def save_pending_feedback(
        self, flow_uuid: str, context: PendingFeedbackContext, state_data: dict[str, Any] | BaseModel
    ) -> None:
        """A checkpoint of the state named after the method, marked pending, holding the
        context (as its writes); then the execution is paused (three requests)."""
        state = state_dict(state_data)
        pending = to_json(context.to_dict())

        checkpoint = self._checkpoint(state, context.method_name, metadata={PENDING_KEY: "true"})

        def send(execution_id: str) -> _runs.Flow[None]:
            stored = yield from checkpoint(execution_id)
            yield specs.checkpoints_put_writes(
                None,
                stored.id,
                task_id=PENDING_TASK,
                writes=[{"index": 0, "channel": PENDING_CHANNEL, "value": pending}],
            )

        client, reg, wf = self._registry()
        with reg.lock(flow_uuid):
            self._write(flow_uuid, send)
            known = reg.known(wf, flow_uuid)
            if known is not None:
                paused = quietly_ended(client.executions.pause, known.id)
                reg.remember(wf, flow_uuid, paused or client.executions.get(known.id))

    def load_pending_feedback(self, flow_uuid: str) -> tuple[dict[str, Any], PendingFeedbackContext] | None:
        """The state and context of the feedback the flow waits for: while its execution
        is paused at a pending checkpoint (three requests), else None."""
        known = self._read(flow_uuid)
        if known is None or known.status != "paused" or known.current is None:
            return None
        try:
            checkpoint = self.client.checkpoints.get(known.current, include_state=True)
            writes = self.client.checkpoints.list_writes(checkpoint.id)
        except errors.NotFound:
            return None
        if checkpoint.metadata.get(PENDING_KEY) != "true" or not isinstance(checkpoint.state, dict):
            return None
        for write in writes.items:
            if write.task_id == PENDING_TASK and write.channel == PENDING_CHANNEL:
                return checkpoint.state, PendingFeedbackContext.from_dict(write.value)
        return None

    def clear_pending_feedback(self, flow_uuid: str) -> None:
        """The feedback arrived: a paused execution is replayed from its current
        checkpoint (running again); the history stays."""
        client, reg, wf = self._registry()
        with reg.lock(flow_uuid):
            known = self._read(flow_uuid)
            if known is not None and known.status == "paused":
                replayed = quietly_ended(client.executions.replay, known.id)
                reg.remember(wf, flow_uuid, replayed or client.executions.get(known.id))

    # ---- what CairnEventListener reports ----

    def _run_started(self, flow_uuid: str) -> None:
        """A run of the flow starts: its execution is started, or made running (a
        replay when it is paused or failed), so that a failure can be recorded."""
        client, reg, wf = self._registry()
        with reg.lock(flow_uuid):
            known = self._read(flow_uuid)
            if known is None:
                known = reg.remember(
                    wf, flow_uuid, client.executions.create(workflow_id=wf, key=flow_uuid, tags=self.tags)
                )
            self._running(flow_uuid, known)

    def _run_failed(self, flow_uuid: str, failure: dict[str, Any]) -> None:
        """A run of the flow failed: its running execution fails (once)."""
        client, reg, wf = self._registry()
        with reg.lock(flow_uuid):
            known = self._read(flow_uuid)
            if known is not None and known.status == "running":
                failed = quietly_ended(client.executions.fail, known.id, **failure)
                reg.remember(wf, flow_uuid, failed or client.executions.get(known.id))

    # ---- beyond FlowPersistence ----

    def execution(self, flow_uuid: str) -> models.Execution | None:
        """The flow's execution, or None."""
        known = self._read(flow_uuid)
        return self.client.executions.get(known.id) if known is not None else None

    def complete(self, flow_uuid: str, output: Any = None) -> models.Execution:
        """Completes the flow's execution for good (it stays running between kickoffs,
        as a flow can be kicked off again with its id)."""
        client, reg, wf = self._registry()
        body = {} if output is None else {"output": bounded_output(output)}
        with reg.lock(flow_uuid):
            known = self._read(flow_uuid)
            if known is None:
                raise errors.NotFound(f"flow {flow_uuid!r} has no execution in {self.workflow!r}", status=404)
            done = client.executions.complete(self._running(flow_uuid, known).id, **body)
            reg.remember(wf, flow_uuid, done)
            return done

    def completed_methods(self, flow_uuid: str) -> list[str]:
        """The methods recorded up to the execution's current checkpoint (its replay or
        rollback point), oldest first; a pending-feedback checkpoint's method is not
        finished. Reads every checkpoint of the execution (200 per request)."""
        known = self._read(flow_uuid)
        if known is None or known.current is None:
            return []
        by_id = {c.id: c for c in self.client.checkpoints.list(execution_id=known.id)}
        chain: list[models.Checkpoint] = []
        current: str | None = known.current
        while current is not None and current in by_id and by_id[current] not in chain:
            chain.append(by_id[current])
            current = by_id[current].parent_checkpoint_id
        names = [c.name for c in reversed(chain) if c.name and c.metadata.get(PENDING_KEY) != "true"]
        return list(dict.fromkeys(names))

    def restore(self, flow: Flow[Any], flow_uuid: str) -> list[str]:
        """Prepares ``flow`` to resume ``flow_uuid`` without running again the methods
        recorded up to the execution's current checkpoint (CrewAI's ``Flow.reload``):
        ``flow.kickoff(inputs={"id": flow_uuid})`` then loads that checkpoint's state and
        runs the rest. Returns those methods. The methods after them receive ``None`` as
        the result of the method they listen to (as after ``reload``): keep what they
        need in the state."""
        if flow.persistence is None:
            flow.persistence = self
        methods = self.completed_methods(flow_uuid)
        done: list[CompletedMethodData] = [
            {"flow_method": {"name": name}, "status": "completed"} for name in methods
        ]
        data: FlowExecutionData = {
            "id": flow_uuid,
            "flow": {"name": type(flow).__name__, "flow_methods_attributes": []},
            "inputs": {},
            "completed_methods": done,
            "execution_methods": [],
        }
        flow.reload(data)
        return methods

    def resume(self, flow: Flow[Any], flow_uuid: str, inputs: dict[str, Any] | None = None) -> Any:
        """:meth:`restore`, then ``flow.kickoff(inputs={"id": flow_uuid, **inputs})``: the
        flow goes on from the execution's current checkpoint (after ``cairn executions
        replay``, or a rollback), and the execution is replayed there if it is paused
        or failed. Returns what ``kickoff`` returns."""
        self.restore(flow, flow_uuid)
        return flow.kickoff(inputs={**(inputs or {}), "id": flow_uuid})

    async def aresume(self, flow: Flow[Any], flow_uuid: str, inputs: dict[str, Any] | None = None) -> Any:
        """:meth:`resume` with ``await flow.kickoff_async(...)``."""
        await asyncio.to_thread(self.restore, flow, flow_uuid)
        return await flow.kickoff_async(inputs={**(inputs or {}), "id": flow_uuid})
