"""``CairnTracingProcessor``: every agent run an execution, every agent a checkpoint, a
failed run a failure."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.tracing import (
    AgentSpanData,
    FunctionSpanData,
    GuardrailSpanData,
    HandoffSpanData,
    Span,
    TaskSpanData,
    Trace,
    TracingProcessor,
    TurnSpanData,
)

from cairn import Cairn, errors
from cairn._runs import check_workflow, workflow_id

logger = logging.getLogger("cairn.openai_agents")

#: The SDK's span error messages and the ``error_type`` each is recorded with.
ERROR_TYPES = {
    "Error in agent run": "AGENT_ERROR",
    "Max turns exceeded": "MAX_TURNS_EXCEEDED",
    "Guardrail tripwire triggered": "GUARDRAIL_TRIPWIRE_TRIGGERED",
}
#: Longer strings in a checkpoint's state (a tool's input or output) are cut to this.
TEXT_MAX = 16 * 1024
_MESSAGE_MAX = 4096
_METADATA_VALUE_MAX = 500


@dataclass
class _Span:
    parent_id: str | None
    trace_id: str
    kind: str  # "task", "agent", "turn", "function", "handoff", "guardrail" or "other"
    name: str | None


@dataclass
class _Agent:
    """What one agent span did, for its checkpoint."""

    turns: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    guardrails: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Run:
    key: str
    trace_id: str
    execution_id: str | None = None
    broken: bool = False  # Cairn refused or could not be reached: the run is not recorded
    agents: list[str] = field(default_factory=list)
    turns: int = 0
    failure: dict[str, Any] | None = None


def _kind(data: object) -> str:
    kinds: list[tuple[type[Any], str]] = [
        (TaskSpanData, "task"),
        (AgentSpanData, "agent"),
        (TurnSpanData, "turn"),
        (FunctionSpanData, "function"),
        (HandoffSpanData, "handoff"),
        (GuardrailSpanData, "guardrail"),
    ]
    return next((kind for cls, kind in kinds if isinstance(data, cls)), "other")


def _jsonable(value: Any) -> Any:
    """``value`` as JSON, strings cut to :data:`TEXT_MAX` characters."""
    if isinstance(value, str):
        return value if len(value) <= TEXT_MAX else value[:TEXT_MAX] + f"... [{len(value) - TEXT_MAX} more]"
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return _jsonable(str(value))


def _error_type(message: str) -> str:
    return ERROR_TYPES.get(message, "AGENT_ERROR")


@dataclass(frozen=True)
class _Event:
    what: str  # "trace_start", "trace_end", "span_start", "span_end", "flush", "stop"
    trace_id: str = ""
    span_id: str = ""
    parent_id: str | None = None
    kind: str = ""
    name: str | None = None
    data: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    done: threading.Event | None = None


def _span_event(
    what: str,
    span: Span[Any],
    kind: str,
    data: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> _Event:
    name = getattr(span.span_data, "name", None)
    return _Event(
        what,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_id=span.parent_id,
        kind=kind,
        name=name if isinstance(name, str) else None,
        data=data,
        error=error,
    )


class CairnTracingProcessor(TracingProcessor):
    """A tracing processor of the OpenAI Agents SDK that records agent runs in Cairn.

    ::

        from agents import add_trace_processor
        from cairn.openai_agents import CairnTracingProcessor

        add_trace_processor(CairnTracingProcessor())   # CAIRN_API_KEY, CAIRN_API_URL

    Each run (``Runner.run``, ``run_sync``, ``run_streamed``: the SDK's task span; the
    whole trace when task spans are turned off) is an execution of ``workflow`` (a
    ``wf_...`` id, or a name: found, else created with type ``custom``) whose ``key`` is
    the task span's id (the trace's), with the trace (``workflow_name``, ``trace_id``,
    ``group_id``, its metadata) as input and ``agent`` (the first agent),
    ``workflow_name`` and ``trace_id`` in its metadata. Each agent that ran is a
    checkpoint named after it (its turns, tool calls, handoffs, guardrails, error). The
    run completes with the agents and turns as output; a run whose agent or turn span
    ended with an error (the model raised, max turns, a guardrail tripwire) fails it:
    ``error_type`` ``AGENT_ERROR``, ``MAX_TURNS_EXCEEDED`` or
    ``GUARDRAIL_TRIPWIRE_TRIGGERED``, the error's message, ``details`` with
    ``agent_name``, ``trace_id``, ``span_id`` and the SDK's error data. A tool error the
    model recovers from (non-fatal) is not a failure.

    Never in the agent's way: the SDK calls processors in the run's thread, so this one
    only queues what it is told, and a daemon thread sends it. A Cairn outage, an
    exhausted balance or any other error is logged (logger ``cairn.openai_agents``) and
    that run goes unrecorded; the agent run is unaffected. ``force_flush()`` (also
    ``agents.flush_traces()``) waits until everything queued is sent; ``shutdown()``
    then stops the thread (the SDK calls it at exit).

    ``client`` must be a sync :class:`~cairn.Cairn` (the thread uses it); by default
    ``Cairn(max_retries=2, max_elapsed=10)`` from the environment, so an outage holds the
    queue seconds, not minutes. At most ``max_queue`` events wait; more are dropped
    (logged once). ``tags`` are given to every execution it starts.
    """

    def __init__(
        self,
        client: Cairn | None = None,
        *,
        workflow: str = "openai-agents-runs",
        max_queue: int = 10_000,
        flush_timeout: float = 30.0,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        check_workflow(workflow)
        if client is not None and not isinstance(client, Cairn):
            raise TypeError(
                "CairnTracingProcessor sends from a thread of its own: client must be a cairn.Cairn "
                f"(sync), not {type(client).__name__}"
            )
        self.workflow = workflow
        self.tags = dict(tags or {})
        self.flush_timeout = flush_timeout
        # Made now: a missing CAIRN_API_KEY is an error where the processor is made, not a
        # log line per run.
        self._client = client if client is not None else Cairn(max_retries=2, max_elapsed=10.0)
        self._queue: queue.Queue[_Event] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._dropping = False
        # The worker's own state (only its thread touches it).
        self._traces: dict[str, dict[str, Any]] = {}
        self._spans: dict[str, _Span] = {}
        self._agents: dict[str, _Agent] = {}
        self._runs: dict[str, _Run] = {}

    def __repr__(self) -> str:
        return f"CairnTracingProcessor(workflow={self.workflow!r})"

    # ---- the SDK's calls: queue, never block, never raise ----

    def on_trace_start(self, trace: Trace) -> None:
        try:
            exported = trace.export() or {}
            self._put(_Event("trace_start", trace_id=trace.trace_id, name=trace.name, data=exported))
        except Exception:
            logger.exception("cairn.openai_agents: could not queue a trace start")

    def on_trace_end(self, trace: Trace) -> None:
        try:
            self._put(_Event("trace_end", trace_id=trace.trace_id))
        except Exception:
            logger.exception("cairn.openai_agents: could not queue a trace end")

    def on_span_start(self, span: Span[Any]) -> None:
        try:
            self._put(_span_event("span_start", span, _kind(span.span_data)))
        except Exception:
            logger.exception("cairn.openai_agents: could not queue a span start")

    def on_span_end(self, span: Span[Any]) -> None:
        try:
            data = span.span_data
            kind = _kind(data)
            if kind == "other":
                return  # model calls, custom spans...: nothing this processor records
            exported = dict(data.export())
            if kind == "turn":
                exported["turn"] = getattr(data, "turn", None)
                exported["agent_name"] = getattr(data, "agent_name", None)
            exported["started_at"], exported["ended_at"] = span.started_at, span.ended_at
            error = dict(span.error) if span.error is not None else None
            self._put(_span_event("span_end", span, kind, exported, error))
        except Exception:
            logger.exception("cairn.openai_agents: could not queue a span end")

    def force_flush(self) -> None:
        """Waits (at most ``flush_timeout`` seconds) until what was queued is sent."""
        self._wait(self.flush_timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        """Sends what was queued (waiting at most ``timeout``, else ``flush_timeout``
        seconds), then stops the thread."""
        self._wait(self.flush_timeout if timeout is None else timeout)
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            try:
                self._queue.put_nowait(_Event("stop"))
            except queue.Full:
                return
            thread.join(timeout=1.0)

    # ---- queueing ----

    def _put(self, event: _Event) -> None:
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="cairn-openai-agents", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            if not self._dropping:
                self._dropping = True
                logger.warning(
                    "cairn.openai_agents: %d events wait to be sent to Cairn; dropping more until they are",
                    self._queue.maxsize,
                )
            return
        self._dropping = False

    def _wait(self, timeout: float) -> None:
        with self._lock:
            if self._thread is None or self._stopped:
                return
        done = threading.Event()
        try:
            self._queue.put(_Event("flush", done=done), timeout=timeout)
        except queue.Full:
            return
        if not done.wait(timeout):
            logger.warning("cairn.openai_agents: events still unsent after %.0f s", timeout)

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            if event.what == "stop":
                return
            if event.done is not None:
                event.done.set()
                continue
            try:
                self._handle(event)
            except Exception:
                logger.exception("cairn.openai_agents: could not record a %s event", event.what)

    # ---- the worker: events to executions, checkpoints and failures ----

    @property
    def client(self) -> Cairn:
        """The client the thread sends with."""
        return self._client

    def _handle(self, event: _Event) -> None:
        if event.what == "trace_start":
            self._traces[event.trace_id] = event.data or {}
        elif event.what == "trace_end":
            self._trace_ended(event.trace_id)
        elif event.what == "span_start":
            self._spans[event.span_id] = _Span(event.parent_id, event.trace_id, event.kind, event.name)
            if event.kind == "agent":
                self._agents[event.span_id] = _Agent()
                self._agent_started(event)
        elif event.what == "span_end":
            self._span_ended(event)

    def _ancestor(self, span_id: str | None, kind: str) -> str | None:
        """The nearest span of ``kind`` at or above ``span_id``."""
        seen = 0
        while span_id is not None and seen < 1000:
            span = self._spans.get(span_id)
            if span is None:
                return None
            if span.kind == kind:
                return span_id
            span_id, seen = span.parent_id, seen + 1
        return None

    def _run_of(self, span_id: str, trace_id: str) -> _Run:
        task = self._ancestor(span_id, "task")
        key = task if task is not None else trace_id
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = _Run(key=key, trace_id=trace_id)
        return run

    def _send(self, run: _Run, what: str, action: Any, *args: Any, **kwargs: Any) -> Any:
        """One API call for ``run``; an error is logged and the run left unrecorded."""
        if run.broken:
            return None
        try:
            return action(*args, **kwargs)
        except (errors.CairnError, OSError) as e:
            run.broken = True
            logger.warning(
                "cairn.openai_agents: could not %s for agent run %s (trace %s): %s; the run is not recorded",
                what,
                run.key,
                run.trace_id,
                e,
            )
            return None

    def _agent_started(self, event: _Event) -> None:
        run = self._run_of(event.span_id, event.trace_id)
        agent = event.name or "agent"
        run.agents.append(agent)
        if run.execution_id is not None or run.broken:
            return
        trace = self._traces.get(event.trace_id, {})
        name = str(trace.get("workflow_name") or "")
        metadata = {"agent": agent, "workflow_name": name, "trace_id": event.trace_id}
        metadata = {k: v[:_METADATA_VALUE_MAX] for k, v in metadata.items() if v}
        wf = self._send(run, "find the workflow", workflow_id, self.client, self.workflow)
        if wf is None:
            return
        run_input = {
            "trace_id": event.trace_id,
            "workflow_name": name or None,
            "group_id": trace.get("group_id"),
            "metadata": _jsonable(trace.get("metadata")),
        }
        started = self._send(
            run,
            "start an execution",
            self.client.executions.create,
            workflow_id=wf,
            key=run.key,
            input=run_input,
            metadata=metadata,
            tags=self.tags,
        )
        if started is not None:
            run.execution_id = started.id

    def _span_ended(self, event: _Event) -> None:
        data = event.data or {}
        if event.kind == "task":
            if event.span_id in self._runs:
                self._finish(self._runs.pop(event.span_id), data.get("data", {}).get("usage"))
            return
        run = self._run_of(event.span_id, event.trace_id)
        if event.kind == "agent":
            self._agent_ended(run, event, data)
        elif event.kind == "turn":
            run.turns += 1
            agent = self._agents.get(self._ancestor(event.parent_id, "agent") or "")
            if agent is not None:
                agent.turns += 1
            if event.error is not None:
                self._failed(run, event, str(data.get("agent_name") or "agent"))
        else:
            agent = self._agents.get(self._ancestor(event.parent_id, "agent") or "")
            if agent is None:
                return
            entry = {k: v for k, v in data.items() if k not in ("type", "started_at", "ended_at")}
            if event.error is not None:
                entry["error"] = event.error
            if event.kind == "function":
                agent.tool_calls.append(entry)
            elif event.kind == "handoff":
                agent.handoffs.append(entry)
            elif event.kind == "guardrail":
                agent.guardrails.append(entry)

    def _agent_ended(self, run: _Run, event: _Event, data: dict[str, Any]) -> None:
        agent = self._agents.pop(event.span_id, _Agent())
        name = event.name or "agent"
        if event.error is not None:
            self._failed(run, event, name)
        if run.execution_id is None:
            return
        state = _jsonable(
            {
                "agent": name,
                "tools": data.get("tools"),
                "handoffs": data.get("handoffs"),
                "output_type": data.get("output_type"),
                "turns": agent.turns,
                "tool_calls": agent.tool_calls,
                "handoff_calls": agent.handoffs,
                "guardrails": agent.guardrails,
                "error": event.error,
                "started_at": data.get("started_at"),
                "ended_at": data.get("ended_at"),
            }
        )
        # The tools it called, for replay previews (docs/api.md, "replay-preview").
        tools = ",".join(str(c.get("name")) for c in agent.tool_calls if c.get("name"))
        self._send(
            run,
            "record a checkpoint",
            self.client.checkpoints.create,
            execution_id=run.execution_id,
            state=state,
            name=name[:200],
            metadata={"cairn.tools": tools[:_METADATA_VALUE_MAX]} if tools else {},
        )

    def _failed(self, run: _Run, event: _Event, agent_name: str) -> None:
        if run.failure is not None:
            return  # the first error is the run's
        error = event.error or {}
        message = str(error.get("message") or "agent run failed")
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        text = data.get("error") if isinstance(data, dict) else None
        details: dict[str, Any] = {
            "agent_name": agent_name,
            "trace_id": event.trace_id,
            "span_id": event.span_id,
            "error": _jsonable(error),
        }
        if event.kind == "turn" and event.data is not None:
            details["turn"] = event.data.get("turn")
        run.failure = {
            "error_type": _error_type(message),
            "message": (str(text) if text else message)[:_MESSAGE_MAX],
            "details": details,
        }

    def _finish(self, run: _Run, usage: Any) -> None:
        if run.execution_id is None:
            return
        if run.failure is not None:
            self._send(
                run, "fail the execution", self.client.executions.fail, run.execution_id, **run.failure
            )
            return
        output = {"agents": run.agents, "turns": run.turns, "usage": _jsonable(usage)}
        self._send(
            run, "complete the execution", self.client.executions.complete, run.execution_id, output=output
        )

    def _trace_ended(self, trace_id: str) -> None:
        for key in [k for k, r in self._runs.items() if r.trace_id == trace_id]:
            self._finish(self._runs.pop(key), None)
        self._traces.pop(trace_id, None)
        for span_id in [s for s, span in self._spans.items() if span.trace_id == trace_id]:
            del self._spans[span_id]
            self._agents.pop(span_id, None)
