"""``CairnEventListener``: crew kickoffs and flow runs as Cairn executions (see :mod:`cairn.crewai`)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crewai.events import BaseEventListener
from crewai.events.event_bus import CrewAIEventsBus, crewai_event_bus
from crewai.events.types.crew_events import (
    CrewKickoffCompletedEvent,
    CrewKickoffFailedEvent,
    CrewKickoffStartedEvent,
)
from crewai.events.types.flow_events import (
    FlowFailedEvent,
    FlowFinishedEvent,
    FlowPausedEvent,
    FlowStartedEvent,
    MethodExecutionFailedEvent,
    MethodExecutionFinishedEvent,
)
from crewai.events.types.task_events import TaskCompletedEvent, TaskFailedEvent
from crewai.hooks import InterceptionPoint, register_hook, unregister_hook
from crewai.tasks.task_output import TaskOutput

from cairn import OMIT, Cairn
from cairn.tracing import error_type, failure_of

from ._common import (
    NAME_CHARS,
    VALUE_CHARS,
    bounded_output,
    default_client,
    quietly_ended,
    state_dict,
    text,
    to_json,
    workflow_id,
)
from ._persistence import CairnFlowPersistence

log = logging.getLogger("cairn.crewai")

#: Runs and errors remembered at once (a run is forgotten when it ends).
_RUNS = 10_000


@dataclass
class _Run:
    """An execution the listener records: a crew kickoff, or a flow run."""

    execution_id: str | None = None
    #: A flow persisted with CairnFlowPersistence: its execution, keyed by the flow's id.
    persistence: CairnFlowPersistence | None = None
    flow_id: str = ""
    #: What the failed task or method left for the failure's details.
    failed: dict[str, Any] = field(default_factory=dict)


def _class_error_type(kind: type[BaseException] | None) -> str:
    """``error_type`` of an exception class (``RuntimeError`` -> ``RUNTIME_ERROR``)."""
    if kind is None:
        return "AGENT_ERROR"
    try:
        return error_type(kind.__new__(kind))
    except Exception:
        return "AGENT_ERROR"


def _task_record(output: TaskOutput, task: Any) -> dict[str, Any]:
    """A task's output as a checkpoint state (and a crew's output)."""
    record: dict[str, Any] = {
        "task_id": str(task.id) if task is not None else None,
        "task": output.name or output.description,
        "agent": output.agent,
        "raw": output.raw,
    }
    if output.json_dict is not None:
        record["json"] = output.json_dict
    if output.pydantic is not None:
        record["pydantic"] = output.pydantic
    stored: dict[str, Any] = to_json(record)
    return stored


def _task_name(task: Any) -> str:
    return text(getattr(task, "name", None) or getattr(task, "description", None) or "task", NAME_CHARS)


def _agent_name(task: Any) -> str | None:
    agent = getattr(task, "agent", None)
    role = getattr(agent, "role", None)
    return role if isinstance(role, str) else None


class CairnEventListener(BaseEventListener):
    """Records CrewAI runs in Cairn: ``CairnEventListener()`` once, at startup.

    - A crew kickoff is an execution of ``workflow`` (a ``wf_...`` id or a name: found,
      else created as a ``crewai`` workflow) whose ``key`` is the kickoff's event id;
      every completed task is a checkpoint named after the task, whose state holds its
      output; the kickoff's result completes it. A failed task or kickoff fails it:
      ``error_type`` from the exception's class (``RuntimeError`` -> ``RUNTIME_ERROR``),
      ``details`` with ``agent_name`` (the task's agent role), ``task_id``,
      ``task_name`` and the ``traceback``.
    - A flow run is an execution too: for a flow persisted with
      :class:`CairnFlowPersistence`, the persistence's execution (keyed by the flow's
      id; a run replays it when paused or failed, a failure fails it, and it stays
      running between runs); for any other flow, an execution of ``flow_workflow`` per
      kickoff with a checkpoint per finished method, completed with the flow's result.
      A failure names the failed method as ``task_id``.

    ``tags`` are given to every execution it starts (those of flows persisted with
    :class:`CairnFlowPersistence` get the persistence's own ``tags``).

    CrewAI calls handlers on its own threads; the listener sends from one thread of its
    own, in the order the events were emitted, and never slows a run down. ``flush()``
    waits until everything emitted so far is recorded (also done at exit); ``close()``
    stops listening.
    """

    def __init__(
        self,
        client: Cairn | None = None,
        *,
        workflow: str = "crewai-crews",
        flow_workflow: str = "crewai-flows",
        tags: Mapping[str, str] | None = None,
    ) -> None:
        if not workflow or not flow_workflow:
            raise ValueError("workflow and flow_workflow must be workflow ids (wf_...) or names")
        self._client = client
        self.tags = dict(tags or {})
        self.workflow, self.flow_workflow = workflow, flow_workflow
        self._ops: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._pending = 0
        self._idle = threading.Condition()
        self._worker: threading.Thread | None = None
        self._handlers: list[tuple[type[Any], Callable[..., Any]]] = []
        self._closed = False
        # The worker's: runs by kickoff (or flow start) event id.
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        # The handlers' (the event bus's loop thread): the run of each flow object.
        self._flow_runs: dict[int, str] = {}
        # The EXECUTION_END hook's (the kicking-off threads): a failed crew's exception.
        self._errors: OrderedDict[str, BaseException] = OrderedDict()
        self._errors_lock = threading.Lock()
        super().__init__()
        register_hook(InterceptionPoint.EXECUTION_END, self._on_end)
        atexit.register(self._at_exit)

    def __repr__(self) -> str:
        return f"CairnEventListener(workflow={self.workflow!r}, flow_workflow={self.flow_workflow!r})"

    def __enter__(self) -> CairnEventListener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def client(self) -> Cairn:
        """The client: the one given, else the process-wide ``Cairn()`` from the environment."""
        return self._client if self._client is not None else default_client()

    # ---- the queue and its worker ----

    def _push(self, op: Callable[[], None]) -> None:
        """Queues ``op`` for the worker (called in emission order: see setup_listeners)."""
        with self._idle:
            if self._closed:
                return
            self._pending += 1
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="cairn-crewai", daemon=True)
                self._worker.start()
        self._ops.put(op)

    def _work(self) -> None:
        while True:
            op = self._ops.get()
            if op is None:
                return
            try:
                op()
            except Exception as e:
                log.warning("cairn.crewai: could not record a CrewAI event in Cairn: %s", e, exc_info=True)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Waits until every event emitted so far is recorded in Cairn (at most
        ``timeout`` seconds); whether it all was. Not from inside an event handler."""
        deadline = None if timeout is None else time.monotonic() + timeout
        crewai_event_bus.flush(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, left)

    def close(self) -> None:
        """Stops listening, after recording what was emitted so far."""
        if self._closed:
            return
        for event_type, handler in self._handlers:
            crewai_event_bus.off(event_type, handler)
        unregister_hook(InterceptionPoint.EXECUTION_END, self._on_end)
        atexit.unregister(self._at_exit)
        self.flush()
        with self._idle:
            self._closed = True
            worker = self._worker
        if worker is not None:
            self._ops.put(None)
            worker.join(timeout=30)

    def _at_exit(self) -> None:
        self.flush(timeout=10)

    # ---- runs (the worker's) ----

    def _remember(self, key: str, run: _Run) -> None:
        self._runs[key] = run
        while len(self._runs) > _RUNS:
            self._runs.popitem(last=False)

    def _start(self, key: str, workflow: str, inputs: Any, metadata: dict[str, str]) -> None:
        client = self.client
        execution = client.executions.create(
            workflow_id=workflow_id(client, workflow),
            key=key,
            input=bounded_output(inputs) if inputs else OMIT,
            metadata={k: text(v, VALUE_CHARS) for k, v in metadata.items()},
            tags=self.tags,
        )
        self._remember(key, _Run(execution.id))

    def _checkpoint(self, key: str | None, state: dict[str, Any], name: str) -> None:
        run = self._runs.get(key or "")
        if run is not None and run.execution_id is not None:
            self.client.checkpoints.create(execution_id=run.execution_id, state=state, name=name)

    def _complete(self, key: str | None, output: Any) -> None:
        run = self._runs.pop(key or "", None)
        if run is not None and run.execution_id is not None:
            quietly_ended(self.client.executions.complete, run.execution_id, output=bounded_output(output))

    def _fail(self, key: str | None, body: dict[str, Any]) -> None:
        run = self._runs.pop(key or "", None)
        if run is None:
            return
        body["details"].update(run.failed)
        if run.persistence is not None:
            run.persistence._run_failed(run.flow_id, body)
        elif run.execution_id is not None:
            quietly_ended(self.client.executions.fail, run.execution_id, **body)

    # ---- the handlers ----

    def _on_end(self, ctx: Any) -> None:
        """The EXECUTION_END hook, in the kicking-off thread: the exception of a failed
        crew (with its traceback, which no crew event carries)."""
        crew, error = getattr(ctx, "crew", None), getattr(ctx, "error", None)
        if getattr(ctx, "status", None) == "failed" and crew is not None and isinstance(error, BaseException):
            with self._errors_lock:
                self._errors[str(crew.id)] = error
                while len(self._errors) > _RUNS:
                    self._errors.popitem(last=False)

    def _on(self, bus: CrewAIEventsBus, event_type: type[Any], handler: Callable[..., Any]) -> None:
        bus.on(event_type)(handler)
        self._handlers.append((event_type, handler))

    def setup_listeners(self, crewai_event_bus: CrewAIEventsBus) -> None:
        """Registers the handlers. They are coroutines: the bus runs them one after the
        other on its own event loop, in the order the events were emitted, so each
        queues its work before the next event's handler runs."""
        bus = crewai_event_bus

        async def crew_started(source: Any, event: CrewKickoffStartedEvent) -> None:
            key = event.event_id
            meta = {"crew": str(event.crew_name or "crew"), "crew_id": str(getattr(source, "id", ""))}
            self._push(lambda: self._start(key, self.workflow, event.inputs, meta))

        async def task_completed(source: Any, event: TaskCompletedEvent) -> None:
            state, name = _task_record(event.output, event.task), _task_name(event.task)
            self._push(lambda: self._checkpoint(event.parent_event_id, state, name))

        async def task_failed(source: Any, event: TaskFailedEvent) -> None:
            task = event.task
            failed = {
                "agent_name": _agent_name(task) or event.agent_role,
                "task_id": str(task.id) if task is not None else event.task_id,
                "task_name": _task_name(task),
                "error_type": _class_error_type(event.error_type),
                "message": text(event.error, 4096),
            }

            def op() -> None:
                run = self._runs.get(event.parent_event_id or "")
                if run is not None and not run.failed:
                    run.failed = {k: v for k, v in failed.items() if v is not None}

            self._push(op)

        async def crew_completed(source: Any, event: CrewKickoffCompletedEvent) -> None:
            output = event.output
            if isinstance(output, TaskOutput):
                output = _task_record(output, None)
            self._push(lambda: self._complete(event.started_event_id, output))

        async def crew_failed(source: Any, event: CrewKickoffFailedEvent) -> None:
            with self._errors_lock:
                error = self._errors.pop(str(getattr(source, "id", "")), None)
            started = event.started_event_id

            def op() -> None:
                run = self._runs.get(started or "")
                failed = dict(run.failed) if run is not None else {}
                kind, message = failed.pop("error_type", None), failed.pop("message", None)
                if error is not None:
                    body = failure_of(error)
                else:
                    body = {
                        "error_type": kind or "AGENT_ERROR",
                        "message": message or text(event.error, 4096) or "the crew failed",
                        "details": {},
                    }
                if run is not None:
                    run.failed = failed
                self._fail(started, body)

            self._push(op)

        async def flow_started(source: Any, event: FlowStartedEvent) -> None:
            if getattr(source, "suppress_flow_events", False):
                return  # CrewAI's own flows (an agent's executor, memory)
            key, flow_id = event.event_id, str(getattr(source, "flow_id", ""))
            self._flow_runs[id(source)] = key
            persistence = getattr(source, "persistence", None)
            if isinstance(persistence, CairnFlowPersistence) and flow_id:

                def op() -> None:
                    self._remember(key, _Run(persistence=persistence, flow_id=flow_id))
                    persistence._run_started(flow_id)

                self._push(op)
            else:
                meta = {"flow": event.flow_name, "flow_id": flow_id}
                self._push(lambda: self._start(key, self.flow_workflow, event.inputs, meta))

        async def method_finished(source: Any, event: MethodExecutionFinishedEvent) -> None:
            key = self._flow_runs.get(id(source))
            if key is None or isinstance(getattr(source, "persistence", None), CairnFlowPersistence):
                return  # the persistence records the states of its flows
            state = state_dict(event.state)
            self._push(lambda: self._checkpoint(key, state, text(event.method_name, NAME_CHARS)))

        async def method_failed(source: Any, event: MethodExecutionFailedEvent) -> None:
            key = self._flow_runs.get(id(source))
            if key is None:
                return

            def op() -> None:
                run = self._runs.get(key)
                if run is not None and not run.failed:
                    run.failed = {"task_id": event.method_name, "method": event.method_name}

            self._push(op)

        async def flow_finished(source: Any, event: FlowFinishedEvent) -> None:
            key = self._flow_runs.pop(id(source), None)
            if key is None:
                return

            def op() -> None:
                run = self._runs.get(key)
                if run is not None and run.persistence is not None:
                    self._runs.pop(key, None)  # stays running: the flow can be kicked off again
                else:
                    self._complete(key, event.result)

            self._push(op)

        async def flow_failed(source: Any, event: FlowFailedEvent) -> None:
            key = self._flow_runs.pop(id(source), None)
            if key is None:
                return
            body = failure_of(event.error)
            body["details"]["flow"] = event.flow_name
            self._push(lambda: self._fail(key, body))

        async def flow_paused(source: Any, event: FlowPausedEvent) -> None:
            key = self._flow_runs.pop(id(source), None)
            if key is None:
                return

            def op() -> None:
                run = self._runs.pop(key, None)
                if run is not None and run.persistence is None and run.execution_id is not None:
                    quietly_ended(self.client.executions.pause, run.execution_id)

            self._push(op)

        for event_type, handler in (
            (CrewKickoffStartedEvent, crew_started),
            (TaskCompletedEvent, task_completed),
            (TaskFailedEvent, task_failed),
            (CrewKickoffCompletedEvent, crew_completed),
            (CrewKickoffFailedEvent, crew_failed),
            (FlowStartedEvent, flow_started),
            (MethodExecutionFinishedEvent, method_finished),
            (MethodExecutionFailedEvent, method_failed),
            (FlowFinishedEvent, flow_finished),
            (FlowFailedEvent, flow_failed),
            (FlowPausedEvent, flow_paused),
        ):
            self._on(bus, event_type, handler)
