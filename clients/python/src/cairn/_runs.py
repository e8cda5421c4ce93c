"""The run core: the rules every integration follows about a Cairn run, written once.

- **Flows.** A rule that needs API calls is written once as a *flow*: a generator that
  yields the calls it needs (a :class:`~cairn._specs.Spec`, or a :class:`Page` of a list)
  and gets each answer back (or its error thrown in). :func:`run` and :func:`arun` run a
  flow on a sync or an async client, so sync and async share one definition. The
  LangGraph saver's flows are flows of this kind.
- **A workflow by name** (:func:`find_or_create_workflow`): the newest workflow of
  exactly that name (``GET /workflows?name=``), else a new one. :func:`workflow_id` and
  :func:`async_workflow_id` run it once per client and name, one lookup at a time, so
  objects used at once for the first time make one workflow, not one each.
- **A run kept running** (:func:`running`): a failed or paused execution is replayed
  before a write; a completed or cancelled one is :class:`~cairn.errors.ExecutionEnded`
  in every integration. **A write by key** (:func:`write_running`): started by key when
  none is known, made running, sent, and resolved again after a 404 or a 409.
- **Keys** (:func:`key_ok`): what the API accepts as an execution or checkpoint key.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from . import _specs as specs
from . import _workflows as workflow_specs
from . import errors, models
from ._resources import AsyncResources, Resources

T = TypeVar("T")
#: The calls a caller's flows yield besides the run core's own.
C = TypeVar("C")

#: A workflow id as the API makes them (``wf_`` and 32 hex digits); anything else is a name.
WORKFLOW_ID = re.compile(r"wf_[0-9a-f]{32}")
#: The longest key the API accepts (execution and checkpoint keys, task ids, channels).
KEY_MAX = 256


@dataclass(frozen=True)
class Page:
    """One page of a list, after the item ``after`` (the first page when ``None``)."""

    spec: specs.ListSpec[Any]
    after: str | None = None


Op = specs.Spec[Any] | Page
Flow = Generator[Op, Any, T]


def call(spec: specs.Spec[T]) -> Flow[T]:
    """One call as a flow."""
    answer: T = yield spec
    return answer


def perform(client: Resources, op: Op) -> Any:
    """The answer to one call of a flow."""
    if isinstance(op, Page):
        return client.api.page(op.spec, op.after)
    return client.api.answer(op)


async def aperform(client: AsyncResources, op: Op) -> Any:
    """:func:`perform` on an async client."""
    if isinstance(op, Page):
        return await client.api.page(op.spec, op.after)
    return await client.api.answer(op)


def run(
    client: Resources, flow: Generator[Any, Any, T], perform: Callable[[Resources, Any], Any] = perform
) -> T:
    """The flow's result, its calls made on ``client`` by ``perform`` (a call's
    :class:`~cairn.errors.CairnError` is thrown into the flow)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = perform(client, op)
        except errors.CairnError as e:
            error = e


async def arun(
    client: AsyncResources,
    flow: Generator[Any, Any, T],
    perform: Callable[[AsyncResources, Any], Awaitable[Any]] = aperform,
) -> T:
    """:func:`run` on an async client."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.send(value) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        value, error = None, None
        try:
            value = await perform(client, op)
        except errors.CairnError as e:
            error = e


async def arun_on(client: Resources | AsyncResources, flow: Flow[T]) -> T:
    """A flow run from async code on either client (a sync one's calls in a worker
    thread, so any event loop may use it)."""
    if isinstance(client, AsyncResources):
        return await arun(client, flow)
    return await asyncio.to_thread(run, client, flow)


# ---- a run kept running ----

#: The statuses in which an execution takes no more checkpoints.
ENDED = ("completed", "cancelled")


@dataclass(frozen=True)
class Running:
    """What :func:`running` did."""

    #: The execution as last answered (None when no call was needed).
    execution: models.Execution | None
    #: Whether this replayed it (else it was running, or another process replayed it).
    replayed: bool


def running(
    execution_id: str, status: str, ended: Callable[[str, str], str], point: str | None = specs.OMIT
) -> Flow[Running]:
    """Makes execution ``execution_id``, last seen in ``status``, running before a write:
    a failed or paused one is replayed (from checkpoint ``point`` when given, else from
    its current one); a completed or cancelled one raises
    :class:`~cairn.errors.ExecutionEnded` with ``ended(execution_id, status)`` as its
    message. A replay refused is read again: refused as it is (its attempts used up),
    the refusal is raised; changed meanwhile (another process replayed it), it goes on
    from what it is now."""
    latest: models.Execution | None = None
    replayed = False
    for _ in range(3):
        if status == "running":
            break
        if status in ENDED:
            raise errors.ExecutionEnded(ended(execution_id, status), status=409)
        try:
            latest = yield specs.executions_replay(None, execution_id, checkpoint_id=point)
            replayed = True
        except errors.InvalidState:
            current: models.Execution = yield specs.executions_get(None, execution_id)
            if current.status == status:
                raise
            latest = current
        status = latest.status
    return Running(latest, replayed)


@dataclass
class Seen:
    """What a caller knows of a key's execution: its id (None: none known yet) and its
    status as last seen ("running" when only its id is known: a write finds out)."""

    id: str | None = None
    status: str = "running"
    #: The execution as last answered to :func:`write_running` (started, replayed or read
    #: again), None when it made no such call: its attempt and current checkpoint.
    execution: models.Execution | None = None
    #: Whether the last :func:`write_running` replayed the execution.
    replayed: bool = False

    def saw(self, execution: models.Execution) -> None:
        """``execution`` is the key's execution as it is now."""
        self.id, self.status, self.execution = execution.id, execution.status, execution


def write_running(
    seen: Seen,
    start: Callable[[], Generator[C, Any, models.Execution]],
    send: Callable[[str], Generator[C, Any, T]],
    ended: Callable[[str, str], str],
    point: Callable[[str], Generator[C, Any, Any]] | None = None,
    *,
    restart: bool = True,
) -> Generator[C | Op, Any, T]:
    """``send`` (a flow given the execution's id) on a key's execution made running:
    ``start`` (a flow that starts by key, which answers the key's execution when one
    exists) when ``seen`` knows none; :func:`running` when it was seen failed or paused
    (replayed from the checkpoint ``point`` names, else its current one); then ``send``.
    Sent again, up to three times, after a 404 (the execution was deleted: started
    again; raised instead, ``seen`` knowing none, unless ``restart``) or a 409 (its
    status changed behind this process: read again, made running). ``seen`` ends as the
    execution was last seen, and says whether this replayed it. (The flows given may
    yield calls of their own kinds: the caller's runner makes them.)"""
    seen.execution, seen.replayed = None, False
    for _ in range(3):
        if seen.id is None:
            seen.saw((yield from start()))
        execution_id = cast(str, seen.id)
        at = specs.OMIT
        if point is not None and seen.status in ("failed", "paused"):
            at = yield from point(execution_id)
        ran = yield from running(execution_id, seen.status, ended, at)
        seen.replayed = seen.replayed or ran.replayed
        if ran.execution is not None:
            seen.saw(ran.execution)
        try:
            result: T = yield from send(execution_id)
            return result
        except errors.ExecutionEnded:
            raise
        except errors.NotFound:
            seen.id = None
            if not restart:
                raise
        except errors.InvalidState:
            try:
                current: models.Execution = yield specs.executions_get(None, execution_id)
            except errors.NotFound:
                seen.id = None
                if not restart:
                    raise
            else:
                seen.saw(current)
    raise errors.InvalidState("the execution kept changing behind this write; it was not sent", status=409)


# ---- keys ----


def key_ok(key: str) -> bool:
    """Whether the API accepts ``key`` as a key: 1 to 256 characters, valid UTF-8, no
    control characters (execution and checkpoint keys; LangGraph's task ids, channels)."""
    return 1 <= len(key) <= KEY_MAX and utf8(key) and not any(control(c) for c in key)


def utf8(s: str) -> bool:
    """Whether ``s`` is valid UTF-8 (no lone surrogates)."""
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def control(c: str) -> bool:
    """Whether ``c`` is a control character (Unicode's Cc, as the API counts them)."""
    return c < " " or "\x7f" <= c <= "\x9f"


# ---- locks of event loops ----


class LoopLocks:
    """``asyncio.Lock``s by name, one set per event loop: an asyncio lock belongs to the
    loop it first waited in, so an object made outside a loop, then used by one
    ``asyncio.run`` after another, needs a lock of each loop."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    def __call__(self, name: str) -> asyncio.Lock:
        """The lock of ``name`` in the running loop."""
        loop = asyncio.get_running_loop()
        with self._mutex:
            return self._locks.setdefault(loop, {}).setdefault(name, asyncio.Lock())


# ---- workflows by name ----


def check_workflow(workflow: str) -> None:
    """Refuses what can be neither a workflow id nor a workflow's name."""
    if not workflow or len(workflow) > 200:
        raise ValueError("workflow must be a workflow id (wf_...) or a name of 1 to 200 characters")


def find_or_create_workflow(name: str, workflow_type: models.WorkflowType) -> Flow[str]:
    """The id of the newest workflow named exactly ``name``, else of a new
    ``workflow_type`` workflow of that name. The names are checked here too: an API
    from before the ``name`` filter answers every workflow, page by page."""
    spec = workflow_specs.workflows_list(None, name=name)
    after: str | None = None
    while True:
        page: models.Page[models.WorkflowSummary] = yield Page(spec, after)
        found = next((w.id for w in page.items if w.name == name), None)
        if found is not None:
            return found
        after = page.after(spec.size)
        if after is None:
            break
    created: models.Workflow = yield workflow_specs.workflows_create(
        None, name=name, workflow_type=workflow_type
    )
    return created.id


class _Names:
    """One client's workflows found by name, and the lookups under way."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.async_locks = LoopLocks()


_mutex = threading.Lock()
_names: weakref.WeakKeyDictionary[Resources | AsyncResources, _Names] = weakref.WeakKeyDictionary()


def _of(client: Resources | AsyncResources) -> _Names:
    with _mutex:
        found = _names.get(client)
        if found is None:
            found = _names[client] = _Names()
        return found


def _cached(names: _Names, workflow: str) -> str | None:
    if WORKFLOW_ID.fullmatch(workflow):
        return workflow
    with _mutex:
        return names.found.get(workflow)


def _remember(names: _Names, workflow: str, workflow_id: str) -> str:
    with _mutex:
        names.found[workflow] = workflow_id
    return workflow_id


def workflow_id(client: Resources, workflow: str, workflow_type: models.WorkflowType = "custom") -> str:
    """The id of ``workflow``: an id as it is, a name by :func:`find_or_create_workflow`,
    looked up once per client and name, one lookup at a time."""
    names = _of(client)
    if (cached := _cached(names, workflow)) is not None:
        return cached
    with _mutex:
        looking = names.locks.setdefault(workflow, threading.Lock())
    with looking:
        if (cached := _cached(names, workflow)) is not None:
            return cached  # found by the lookup this one waited for
        return _remember(names, workflow, run(client, find_or_create_workflow(workflow, workflow_type)))


async def async_workflow_id(
    client: AsyncResources, workflow: str, workflow_type: models.WorkflowType = "custom"
) -> str:
    """:func:`workflow_id` on an async client (in any event loop)."""
    names = _of(client)
    if (cached := _cached(names, workflow)) is not None:
        return cached
    async with names.async_locks(workflow):
        if (cached := _cached(names, workflow)) is not None:
            return cached
        found = await arun(client, find_or_create_workflow(workflow, workflow_type))
        return _remember(names, workflow, found)
