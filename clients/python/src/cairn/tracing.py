"""Tracing: every run of your code is a Cairn execution, every step a checkpoint.

::

    client = Cairn()

    @client.workflow("support-triage", workflow_type="crewai")   # found by name, or created
    def triage(run, ticket):
        plan = run.step("plan", make_plan, ticket)    # checkpointed after it returns
        reply = run.step("reply", write_reply, plan)
        return reply                                   # the execution completes with it

    triage(ticket)               # starts an execution (input: the arguments)
    triage.resume(execution_id)  # continues one that was replayed, from its replay point

- A step's result is recorded in a checkpoint named after the step, state
  ``{"cairn_step": {"index": i, "name": name, "result": result}}``. Results must be
  JSON; pydantic models and dataclasses are converted; anything else raises
  ``TypeError`` naming the step before anything is sent.
- An exception fails the execution (``error_type`` from the exception's class in upper
  snake case, ``message``, ``details`` with ``traceback`` and any ``agent_name`` or
  ``task_id`` attributes of the exception) and is re-raised unchanged.
- ``resume`` reads the execution's current checkpoint (its replay or rollback point)
  and the chain of checkpoints before it: those steps return their recorded results
  without running again, in order, while their names match; the rest run and record as
  before. The function is called again with the execution's recorded arguments.

``client.trace(workflow_id, input=...)`` is the lower level, for code not shaped as
steps: ``with client.trace(wf) as run: run.checkpoint(state, name=...)``; leaving the
block completes the execution with ``run.output``, an exception fails it.
"""

from __future__ import annotations

import functools
import inspect
import re
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from . import _runs, errors, models
from ._resources import AsyncResources, Resources
from ._specs import jsonable

STEP_KEY = "cairn_step"


def error_type(exception: BaseException | str) -> str:
    """``ValueError`` (an exception, or its class's name) -> ``VALUE_ERROR``;
    ``HTTPTimeout`` -> ``HTTP_TIMEOUT``."""
    name = exception if isinstance(exception, str) else type(exception).__name__
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()
    snake = re.sub(r"[^A-Z0-9_]", "_", snake).lstrip("_0123456789") or "ERROR"
    return snake[:64]


def failure_of(exception: BaseException) -> dict[str, Any]:
    """The ``fail`` body for an exception."""
    details: dict[str, Any] = {
        "traceback": "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))[
            -16000:
        ],
        "exception": f"{type(exception).__module__}.{type(exception).__qualname__}",
    }
    for attribute in ("agent_name", "task_id"):
        value = getattr(exception, attribute, None)
        if isinstance(value, str):
            details[attribute] = value
    message = str(exception).strip() or type(exception).__name__
    message = "".join(c if c in "\t\n\r" or ord(c) >= 32 else " " for c in message)[:4096]
    return {"error_type": error_type(exception), "message": message, "details": details}


def _recorded(chain: list[models.Checkpoint]) -> list[tuple[str, Any]]:
    """The steps a chain of checkpoints recorded, in order."""
    steps = []
    for checkpoint in chain:
        step = (checkpoint.state or {}).get(STEP_KEY)
        if isinstance(step, dict) and isinstance(step.get("name"), str):
            steps.append((step["name"], step.get("result")))
    return steps


def _chain(by_id: dict[str, models.Checkpoint], current: str | None) -> list[str]:
    """Ids from the first checkpoint to ``current``, following parents."""
    ids: list[str] = []
    while current is not None and current in by_id and current not in ids:
        ids.append(current)
        current = by_id[current].parent_checkpoint_id
    return list(reversed(ids))


class _Steps:
    """What :class:`Run` and :class:`AsyncRun` share: the execution, and which step is
    next and whether it was recorded before the replay point."""

    def __init__(self, execution: models.Execution, recorded: list[tuple[str, Any]]) -> None:
        self.execution = execution
        self.output: Any = None
        self._recorded = recorded
        self._index = 0
        self._replaying = True

    @property
    def execution_id(self) -> str:
        return self.execution.id

    def _next(self, name: str) -> tuple[int, bool, Any]:
        """The next step's index, and its recorded result when it has one (the steps
        before the replay point, in order, while their names match)."""
        index = self._index
        self._index += 1
        if self._replaying and index < len(self._recorded) and self._recorded[index][0] == name:
            return index, True, self._recorded[index][1]
        self._replaying = False
        return index, False, None

    @staticmethod
    def _state(index: int, name: str, result: Any) -> dict[str, Any]:
        return {STEP_KEY: {"index": index, "name": name, "result": result}}


class Run(_Steps):
    """One execution while your code runs: ``step`` and ``checkpoint`` record it."""

    def __init__(
        self, client: Resources, execution: models.Execution, recorded: list[tuple[str, Any]]
    ) -> None:
        super().__init__(execution, recorded)
        self.client = client

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn(*args, **kwargs)`` and checkpoints its result; on a resume, a step
        recorded before the replay point returns its recorded result instead."""
        index, recorded, value = self._next(name)
        if recorded:
            return value
        result = jsonable(fn(*args, **kwargs), f"the result of step {name!r}")
        self.checkpoint(self._state(index, name, result), name=name)
        return result

    def checkpoint(self, state: dict[str, Any], *, name: str | None = None) -> models.Checkpoint:
        """Records ``state`` as a checkpoint of this execution."""
        return self.client.checkpoints.create(execution_id=self.execution.id, state=state, name=name)


class AsyncRun(_Steps):
    """:class:`Run` for :class:`~cairn.AsyncCairn`."""

    def __init__(
        self, client: AsyncResources, execution: models.Execution, recorded: list[tuple[str, Any]]
    ) -> None:
        super().__init__(execution, recorded)
        self.client = client

    async def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Like :meth:`Run.step`; ``fn`` may be a coroutine function."""
        index, recorded, value = self._next(name)
        if recorded:
            return value
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        result = jsonable(value, f"the result of step {name!r}")
        await self.checkpoint(self._state(index, name, result), name=name)
        return result

    async def checkpoint(self, state: dict[str, Any], *, name: str | None = None) -> models.Checkpoint:
        return await self.client.checkpoints.create(execution_id=self.execution.id, state=state, name=name)


def _input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "args": jsonable(list(args), "the arguments"),
        "kwargs": jsonable(kwargs, "the keyword arguments"),
    }


def _arguments(execution: models.Execution) -> tuple[list[Any], dict[str, Any]]:
    recorded = execution.input if isinstance(execution.input, dict) else {}
    args = recorded.get("args", [])
    kwargs = recorded.get("kwargs", {})
    return (list(args) if isinstance(args, list) else []), (dict(kwargs) if isinstance(kwargs, dict) else {})


def _not_running(execution: models.Execution) -> errors.InvalidState:
    return errors.InvalidState(
        f"execution {execution.id} is {execution.status}; resume continues a running execution "
        "(replay it first: client.executions.replay(...) or cairn executions replay)"
    )


class _Workflow:
    """A traced workflow function (see the module's documentation)."""

    def __init__(
        self,
        client: Resources,
        name: str,
        workflow_type: models.WorkflowType,
        fn: Callable[..., Any],
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client, self._name, self._type, self._fn = client, name, workflow_type, fn
        self._tags = dict(tags or {})
        self._id: str | None = None
        functools.update_wrapper(self, fn)

    def workflow_id(self) -> str:
        """The workflow's id: found by name (the newest of that name), else created."""
        if self._id is None:
            self._id = _runs.workflow_id(self._client, self._name, self._type)
        return self._id

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        execution = self._client.executions.create(
            workflow_id=self.workflow_id(), input=_input(args, kwargs), tags=self._tags
        )
        return self._run(execution, [], args, kwargs)

    def resume(self, execution_id: str) -> Any:
        """Continues a replayed (running) execution from its replay point."""
        execution = self._client.executions.get(execution_id)
        if execution.status != "running":
            raise _not_running(execution)
        checkpoints = {c.id: c for c in self._client.checkpoints.list(execution_id=execution_id)}
        chain = [
            self._client.checkpoints.get(i, include_state=True)
            for i in _chain(checkpoints, execution.current_checkpoint_id)
        ]
        args, kwargs = _arguments(execution)
        return self._run(execution, _recorded(chain), tuple(args), kwargs)

    def _run(
        self, execution: models.Execution, recorded: list[tuple[str, Any]], args: Any, kwargs: Any
    ) -> Any:
        run = Run(self._client, execution, recorded)
        try:
            result = self._fn(run, *args, **kwargs)
        except BaseException as exception:
            self._client.executions.fail(execution.id, **failure_of(exception))
            raise
        self._client.executions.complete(execution.id, output=jsonable(result, "the workflow's result"))
        return result


class _AsyncWorkflow:
    """A traced ``async def`` workflow."""

    def __init__(
        self,
        client: AsyncResources,
        name: str,
        workflow_type: models.WorkflowType,
        fn: Callable[..., Awaitable[Any]],
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client, self._name, self._type, self._fn = client, name, workflow_type, fn
        self._tags = dict(tags or {})
        self._id: str | None = None
        functools.update_wrapper(self, fn)

    async def workflow_id(self) -> str:
        if self._id is None:
            self._id = await _runs.async_workflow_id(self._client, self._name, self._type)
        return self._id

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        workflow_id = await self.workflow_id()
        execution = await self._client.executions.create(
            workflow_id=workflow_id, input=_input(args, kwargs), tags=self._tags
        )
        return await self._run(execution, [], args, kwargs)

    async def resume(self, execution_id: str) -> Any:
        execution = await self._client.executions.get(execution_id)
        if execution.status != "running":
            raise _not_running(execution)
        checkpoints = {c.id: c async for c in self._client.checkpoints.list(execution_id=execution_id)}
        chain = [
            await self._client.checkpoints.get(i, include_state=True)
            for i in _chain(checkpoints, execution.current_checkpoint_id)
        ]
        args, kwargs = _arguments(execution)
        return await self._run(execution, _recorded(chain), tuple(args), kwargs)

    async def _run(
        self, execution: models.Execution, recorded: list[tuple[str, Any]], args: Any, kwargs: Any
    ) -> Any:
        run = AsyncRun(self._client, execution, recorded)
        try:
            result = await self._fn(run, *args, **kwargs)
        except BaseException as exception:
            await self._client.executions.fail(execution.id, **failure_of(exception))
            raise
        await self._client.executions.complete(execution.id, output=jsonable(result, "the workflow's result"))
        return result


def workflow(
    client: Resources, name: str, workflow_type: models.WorkflowType, tags: Mapping[str, str] | None = None
) -> Callable[[Any], _Workflow]:
    def decorate(fn: Callable[..., Any]) -> _Workflow:
        if inspect.iscoroutinefunction(fn):
            raise TypeError(f"{fn.__name__} is async: decorate it with AsyncCairn().workflow(...)")
        return _Workflow(client, name, workflow_type, fn, tags)

    return decorate


def async_workflow(
    client: AsyncResources,
    name: str,
    workflow_type: models.WorkflowType,
    tags: Mapping[str, str] | None = None,
) -> Callable[[Any], _AsyncWorkflow]:
    def decorate(fn: Callable[..., Awaitable[Any]]) -> _AsyncWorkflow:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"{getattr(fn, '__name__', fn)} is not async: decorate it with Cairn().workflow(...)"
            )
        return _AsyncWorkflow(client, name, workflow_type, fn, tags)

    return decorate


class Trace:
    """``with client.trace(workflow_id, input=...) as run:`` one execution."""

    def __init__(
        self,
        client: Resources,
        workflow_id: str,
        input: Any,
        metadata: dict[str, str] | None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client, self._workflow_id, self._input, self._metadata = client, workflow_id, input, metadata
        self._tags = dict(tags or {})
        self._run: Run | None = None

    def __enter__(self) -> Run:
        execution = self._client.executions.create(
            workflow_id=self._workflow_id,
            input=jsonable(self._input, "the input"),
            metadata=self._metadata or {},
            tags=self._tags,
        )
        self._run = Run(self._client, execution, [])
        return self._run

    def __exit__(self, kind: Any, exception: BaseException | None, _tb: Any) -> None:
        assert self._run is not None
        if exception is not None:
            self._client.executions.fail(self._run.execution_id, **failure_of(exception))
            return
        self._client.executions.complete(
            self._run.execution_id, output=jsonable(self._run.output, "run.output")
        )


class AsyncTrace:
    """``async with client.trace(workflow_id, input=...) as run:`` one execution."""

    def __init__(
        self,
        client: AsyncResources,
        workflow_id: str,
        input: Any,
        metadata: dict[str, str] | None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client, self._workflow_id, self._input, self._metadata = client, workflow_id, input, metadata
        self._tags = dict(tags or {})
        self._run: AsyncRun | None = None

    async def __aenter__(self) -> AsyncRun:
        execution = await self._client.executions.create(
            workflow_id=self._workflow_id,
            input=jsonable(self._input, "the input"),
            metadata=self._metadata or {},
            tags=self._tags,
        )
        self._run = AsyncRun(self._client, execution, [])
        return self._run

    async def __aexit__(self, kind: Any, exception: BaseException | None, _tb: Any) -> None:
        assert self._run is not None
        if exception is not None:
            await self._client.executions.fail(self._run.execution_id, **failure_of(exception))
            return
        await self._client.executions.complete(
            self._run.execution_id, output=jsonable(self._run.output, "run.output")
        )
