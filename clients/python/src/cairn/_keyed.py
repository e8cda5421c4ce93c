"""Executions keyed by a framework's own name for a run, as the async framework
integrations use them (``cairn.agent_framework``, ``cairn.autogen``,
``cairn.semantic_kernel``): found or started by key in one Cairn workflow, written while
running (a failed or paused one replayed first), read at their current checkpoint, and
failed with the failing agent's name."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

from . import errors, models
from ._client import AsyncCairn
from ._runs import KEY_MAX, LoopLocks, arun, async_workflow_id, check_workflow, key_ok, running
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
    Calls about one key are made one at a time (:meth:`lock`)."""

    def __init__(
        self, client: AsyncCairn, workflow: str, workflow_type: models.WorkflowType, framework: str
    ) -> None:
        check_workflow(workflow)
        self.client = client
        self._workflow = workflow
        self._type: models.WorkflowType = workflow_type
        self._framework = framework
        self._ids: dict[str, str] = {}
        self.lock = LoopLocks()  # one lock per name and event loop: calls about a name one at a time

    async def workflow_id(self) -> str:
        return await async_workflow_id(self.client, self._workflow, self._type)

    async def execution_id(self, name: str) -> str:
        """The id of ``name``'s execution, started if it has none (idempotent by key: a
        start finds the execution a concurrent one made)."""
        known = self._ids.get(name)
        if known is not None:
            return known
        started = await self.client.executions.create(
            workflow_id=await self.workflow_id(),
            key=execution_key(name),
            input={"name": name},
            metadata={"framework": self._framework},
        )
        self._ids[name] = started.id
        return started.id

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
        """A checkpoint of ``name``'s execution (the one recorded when ``key`` is taken).
        A failed or paused execution is replayed first, from its checkpoint keyed
        ``resume_from`` when it has one, else from its current one; a deleted one is
        started again. Call it holding :meth:`lock` of ``name``."""
        for _ in range(3):
            execution_id = await self.execution_id(name)
            try:
                optional: dict[str, Any] = {"name": checkpoint_name, "metadata": metadata}
                return await self.client.checkpoints.create(
                    execution_id=execution_id,
                    state=state,
                    key=key,
                    **{k: v for k, v in optional.items() if v is not None},
                )
            except errors.NotFound:  # the execution was deleted: started again
                self._ids.pop(name, None)
            except errors.InvalidState:  # not running: replayed, then sent again
                await self._resume(execution_id, resume_from)
        raise errors.CairnError(f"the execution of {name!r} kept changing; the checkpoint was not written")

    async def _resume(self, execution_id: str, resume_from: str | None) -> None:
        """The run core's :func:`~cairn._runs.running`, from the checkpoint keyed
        ``resume_from`` when the execution has one."""
        execution = await self.client.executions.get(execution_id)
        point: str | None = OMIT
        if execution.status in ("failed", "paused") and resume_from is not None and usable_key(resume_from):
            page = await self.client.checkpoints.list(execution_id=execution_id, key=resume_from).first_page()
            point = page.items[0].id if page.items else OMIT
        await arun(self.client, running(execution_id, execution.status, _ended, point))

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
