"""Executions keyed by a framework's own name for a run, as the async framework
integrations use them (``cairn.agent_framework``, ``cairn.autogen``,
``cairn.semantic_kernel``): found or started by key in one Cairn workflow, written while
running (a failed or paused one replayed first), read at their current checkpoint, and
failed with the failing agent's name."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from . import _specs as specs
from . import errors, models
from ._client import AsyncCairn
from ._runs import (
    KEY_MAX,
    Flow,
    LoopLocks,
    Page,
    Seen,
    arun,
    async_workflow_id,
    call,
    check_workflow,
    key_ok,
    write_running,
)
from ._specs import OMIT
from .tracing import error_type

log = logging.getLogger("cairn")

#: The execution of a key is completed or cancelled (the run core's one ended error).
ExecutionEnded = errors.ExecutionEnded


def _ended(execution_id: str, status: str) -> str:
    return (
        f"execution {execution_id} is {status} in Cairn and takes no checkpoint; delete it "
        f"(cairn executions delete {execution_id}) to start this key over"
    )


def execution_key(name: str) -> str:
    """The Cairn key of a framework's name for a run: the name, or for one that is too
    long or not printable, its start and a hash of the whole. (Stricter than the API's
    rule, :func:`~cairn._runs.key_ok`: the keys runs already have stay as they are.)"""
    if 0 < len(name) <= KEY_MAX and name.isprintable():
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()
    start = "".join(c for c in name[:150] if c.isprintable())
    return f"{start}#sha256:{digest}"


def usable_key(key: str) -> bool:
    """Whether a checkpoint or execution could have ``key`` (else none has it)."""
    return key_ok(key)


class KeyedExecutions:
    """The executions of one Cairn workflow (an id, or a name: found, else created as a
    ``workflow_type`` workflow), each found by a key; one object per integration object.
    Calls about one key are made one at a time (:attr:`lock`)."""

    def __init__(
        self,
        client: AsyncCairn,
        workflow: str,
        workflow_type: models.WorkflowType,
        framework: str,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        check_workflow(workflow)
        self.client = client
        self._tags = dict(tags or {})
        self._workflow = workflow
        self._type: models.WorkflowType = workflow_type
        self._framework = framework
        self._seen: dict[str, Seen] = {}
        self.lock = LoopLocks()  # one lock per name and event loop: calls about a name one at a time

    async def workflow_id(self) -> str:
        return await async_workflow_id(self.client, self._workflow, self._type)

    async def execution_id(self, name: str) -> str:
        """The id of ``name``'s execution, started if it has none (idempotent by key: a
        start finds the execution a concurrent one made)."""
        seen = self._seen.setdefault(name, Seen())
        if seen.id is None:
            started = await self.client.api.answer(self._start(await self.workflow_id(), name))
            seen.id, seen.status = started.id, started.status
        return seen.id

    async def find(self, name: str) -> models.ExecutionSummary | None:
        """``name``'s execution as it is now, if it has one (one request)."""
        page = await self.client.executions.list(
            workflow_id=await self.workflow_id(), key=execution_key(name)
        ).first_page()
        return page.items[0] if page.items else None

    async def current(self, name: str) -> models.Checkpoint | None:
        """The current checkpoint of ``name``'s execution with its state (the newest
        written, or the point of a replay or rollback made since), if any (two requests)."""
        execution = await self.find(name)
        if execution is None or execution.current_checkpoint_id is None:
            return None
        try:
            return await self.client.checkpoints.get(execution.current_checkpoint_id, include_state=True)
        except errors.NotFound:
            return None  # deleted between the two reads

    async def write(
        self,
        name: str,
        state: dict[str, Any],
        *,
        checkpoint_name: str | None = None,
        metadata: dict[str, str] | None = None,
        key: str | None = None,
        resume_from: str | None = None,
    ) -> models.Checkpoint:
        """A checkpoint of ``name``'s execution (the one recorded when ``key`` is taken),
        by the run core's :func:`~cairn._runs.write_running`: a failed or paused execution
        is replayed first, from its checkpoint keyed ``resume_from`` when it has one, else
        from its current one; a deleted one is started again. Call it holding
        :attr:`lock` of ``name``."""
        workflow_id = await self.workflow_id()
        optional: dict[str, Any] = {"name": checkpoint_name, "metadata": metadata}
        given = {k: v for k, v in optional.items() if v is not None}

        def start() -> Flow[models.Execution]:
            return call(self._start(workflow_id, name))

        def send(execution_id: str) -> Flow[models.Checkpoint]:
            created: models.Checkpoint = yield specs.checkpoints_create(
                None, execution_id=execution_id, state=state, key=key, **given
            )
            return created

        def point(execution_id: str) -> Flow[Any]:
            if resume_from is None or not usable_key(resume_from):
                return OMIT
            page: models.Page[models.Checkpoint] = yield Page(
                specs.checkpoints_list(None, execution_id=execution_id, key=resume_from)
            )
            return page.items[0].id if page.items else OMIT

        seen = self._seen.setdefault(name, Seen())
        return await arun(self.client, write_running(seen, start, send, _ended, point))

    def _start(self, workflow_id: str, name: str) -> specs.Spec[models.Execution]:
        return specs.executions_create(
            None,
            workflow_id=workflow_id,
            key=execution_key(name),
            input={"name": name},
            metadata={"framework": self._framework},
            tags=self._tags,
        )

    async def fail(
        self, name: str, kind: str, message: str, agent: str | None, traceback: str | None
    ) -> None:
        """Fails ``name``'s execution: ``error_type`` from the exception class ``kind``,
        ``details`` with ``agent_name``, ``exception`` and ``traceback``. Not running
        (failed already, paused, ended): nothing to fail. A failure Cairn does not take
        is logged, never raised."""
        details: dict[str, Any] = {"exception": kind}
        if agent is not None:
            details["agent_name"] = agent
        if traceback:
            details["traceback"] = traceback[-16_000:]
        try:
            async with self.lock(name):
                execution_id = await self.execution_id(name)
                with contextlib.suppress(errors.InvalidState):
                    await self.client.executions.fail(
                        execution_id,
                        error_type=error_type(kind),
                        message=(message or kind)[:2000],
                        details=details,
                    )
        except errors.CairnError as e:
            log.warning("cairn: could not record the failure of %r in Cairn: %s", name, e)
