"""The flows that delete and copy: ``delete_thread``, ``copy_thread``, ``prune`` and
``delete_for_runs``."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _specs as specs
from .. import errors, models
from ._driver import Delete, Flow, Page
from ._flows import WRITES_PER_REQUEST, Flows
from ._metadata import NS_KEY, PARTIAL_KEY, index_value
from ._threads import Thread


class Housekeeping:
    """The flows of deleting and copying threads and checkpoints."""

    def __init__(self, flows: Flows) -> None:
        self.flows = flows

    def delete_flow(self, thread_id: str) -> Flow[None]:
        thread = yield from self.flows._find(thread_id, fresh=True)
        if thread is None:
            return None
        with contextlib.suppress(errors.NotFound):
            yield Delete(thread.execution_id)
        self.flows._memory.forget(thread_id)
        return None

    def copy_flow(self, source: str, target: str) -> Flow[None]:
        thread = yield from self.flows._find(source, fresh=True)
        if thread is None:
            return None
        spec = specs.checkpoints_list(None, execution_id=thread.execution_id, order="asc")
        after: str | None = None
        while True:
            page: models.Page[models.Checkpoint] = yield Page(spec, after)
            for checkpoint in page.items:
                if checkpoint.key is not None:
                    yield from self._copy_one(target, checkpoint)
            after = page.after(spec.size)
            if after is None:
                return None

    def _copy_one(self, target: str, checkpoint: models.Checkpoint) -> Flow[None]:
        try:
            full: models.Checkpoint = yield specs.checkpoints_get(None, checkpoint.id, include_state=True)
            writes: models.CheckpointWrites = yield specs.checkpoints_list_writes(None, checkpoint.id)
        except errors.NotFound:
            return None
        state = full.state or {}
        parent = state.get("parent_checkpoint_id")
        key = checkpoint.key
        assert key is not None
        by_task: dict[tuple[str, str], builtins.list[dict[str, Any]]] = {}
        for w in writes.items:
            by_task.setdefault((w.task_id, w.task_path), []).append(
                {"index": w.index, "channel": w.channel, "value": w.value}
            )

        def send(thread: Thread) -> Flow[None]:
            stored: models.Checkpoint = yield specs.checkpoints_create(
                None,
                execution_id=thread.execution_id,
                state=state,
                name=checkpoint.name if checkpoint.name is not None else specs.OMIT,
                metadata=checkpoint.metadata,
                key=key,
            )
            self.flows._memory.remember_checkpoint(thread.execution_id, key, stored.id)
            for (task_id, task_path), items in by_task.items():
                for start in range(0, len(items), WRITES_PER_REQUEST):
                    yield specs.checkpoints_put_writes(
                        None,
                        stored.id,
                        task_id=task_id,
                        task_path=task_path,
                        writes=items[start : start + WRITES_PER_REQUEST],
                    )

        yield from self.flows._write(target, parent if isinstance(parent, str) else None, send)
        return None

    def _checkpoints_of(
        self, execution_id: str, metadata: Mapping[str, str] | None = None
    ) -> Flow[builtins.list[models.Checkpoint]]:
        """Every checkpoint of the execution, newest first (with a metadata filter)."""
        spec = specs.checkpoints_list(
            None, execution_id=execution_id, order="desc", metadata=metadata or None
        )
        found: builtins.list[models.Checkpoint] = []
        after: str | None = None
        while True:
            page: models.Page[models.Checkpoint] = yield Page(spec, after)
            found.extend(page.items)
            after = page.after(spec.size)
            if after is None:
                return found

    def _delete_checkpoints(self, execution_id: str, doomed: Sequence[models.Checkpoint]) -> Flow[None]:
        """Deletes these checkpoints with their writes, newest first (so that the
        execution's current checkpoint moves back one at a time)."""
        for checkpoint in sorted(doomed, key=lambda c: c.sequence, reverse=True):
            with contextlib.suppress(errors.NotFound):
                yield specs.checkpoints_delete(None, checkpoint.id)
        self.flows._memory.forget_checkpoints(execution_id)
        return None

    def prune_flow(self, thread_id: str, strategy: str) -> Flow[None]:
        if strategy == "delete":
            yield from self.delete_flow(thread_id)
            return None
        if strategy != "keep_latest":
            raise ValueError(f"strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        thread = yield from self.flows._find(thread_id, fresh=True)
        if thread is None:
            return None
        newest: set[str | None] = set()
        doomed: builtins.list[models.Checkpoint] = []
        for checkpoint in (yield from self._checkpoints_of(thread.execution_id)):
            ns = checkpoint.metadata.get(NS_KEY)
            if ns in newest:
                doomed.append(checkpoint)
            else:
                newest.add(ns)
        yield from self._delete_checkpoints(thread.execution_id, doomed)
        return None

    def delete_runs_flow(self, run_ids: Sequence[str]) -> Flow[None]:
        """The checkpoints whose metadata names one of the runs, in every thread of the
        workflow: LangGraph names runs without their threads, and Cairn indexes
        checkpoints per execution, so this reads each thread (once per run)."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return None
        workflow_id = yield from self.flows._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id)
        after: str | None = None
        while True:
            page: models.Page[models.ExecutionSummary] = yield Page(spec, after)
            for execution in page.items:
                if execution.key is None:
                    continue
                doomed: dict[str, models.Checkpoint] = {}
                for run_id in sorted(wanted):
                    value = index_value(run_id)
                    if value is None:
                        continue
                    for checkpoint in (yield from self._checkpoints_of(execution.id, {"run_id": value})):
                        doomed[checkpoint.id] = checkpoint
                # Checkpoints whose metadata did not all fit are checked one by one.
                for checkpoint in (yield from self._checkpoints_of(execution.id, {PARTIAL_KEY: "true"})):
                    if checkpoint.id in doomed:
                        continue
                    tup = yield from self.flows._tuple(execution.key, checkpoint)
                    if tup is not None and tup.metadata.get("run_id") in wanted:
                        doomed[checkpoint.id] = checkpoint
                yield from self._delete_checkpoints(execution.id, builtins.list(doomed.values()))
            after = page.after(spec.size)
            if after is None:
                return None
