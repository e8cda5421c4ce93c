"""The flows of :class:`~cairn.langgraph.CairnSaver` (see ``_driver``): finding the
workflow, a thread's execution and its checkpoints; keeping the execution running for a
write and applying the pause or failure the writes call for; and the flows of ``put``,
``put_writes``, ``get_tuple`` and ``complete``. ``_listing`` and ``_housekeeping`` add
the others."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import ERROR

from .. import _specs as specs
from .. import errors, models
from .._runs import WORKFLOW_ID, Seen, call, find_or_create_workflow, write_running
from ._driver import Flow, Page
from ._encoding import checkpoint_state, checkpoint_tuple, encode
from ._held import Held, HeldTask, Where, fits
from ._metadata import NS_KEY, cairn_metadata, checkpoint_name, ns_value
from ._status import Stop, cancelled, transition
from ._text import key_ok
from ._threads import Memory, Thread, ThreadEnded, checkpoint_config, ns_of, thread_of
from ._traffic import Traffic, Unstored

T = TypeVar("T")
_log = logging.getLogger("cairn.langgraph")

#: The most writes one request stores.
WRITES_PER_REQUEST = 1000


class Flows(BaseCheckpointSaver[int]):
    """What the saver's flows share: the workflow, what is known of its threads
    (:class:`~cairn.langgraph._threads.Memory`) and the traffic under way."""

    def __init__(
        self, *, workflow: str, serde: SerializerProtocol | None, tags: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(serde=serde)
        if not workflow:
            raise ValueError("workflow must be a workflow id (wf_...) or a name")
        self.workflow = workflow
        self.tags = dict(tags or {})
        self._workflow_id: str | None = workflow if WORKFLOW_ID.fullmatch(workflow) else None
        self._memory = Memory()
        self._traffic = Traffic()
        self._held = Held(self._flush_held)

    def _flush_held(self, where: Where) -> None:
        """Sends the writes held for ``where`` on their own (see ``_held``)."""
        raise NotImplementedError

    # ---- flows: lookups ----

    def _workflow_flow(self) -> Flow[str]:
        if self._workflow_id is None:
            self._workflow_id = yield from find_or_create_workflow(self.workflow, "langgraph")
        return self._workflow_id

    def _find(self, thread_id: str, *, fresh: bool = False) -> Flow[Thread | None]:
        """The thread's execution, if it has one."""
        if not fresh and (thread := self._memory.thread(thread_id)) is not None:
            return thread
        workflow_id = yield from self._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id, key=thread_id)
        page: models.Page[models.ExecutionSummary] = yield Page(spec)
        if not page.items:
            self._memory.forget(thread_id)
            return None
        return self._memory.remember(thread_id, page.items[0])

    def _by_key(self, execution_id: str, key: str) -> Flow[models.Checkpoint | None]:
        spec = specs.checkpoints_list(None, execution_id=execution_id, key=key, limit=1)
        page: models.Page[models.Checkpoint] = yield Page(spec)
        found = page.items[0] if page.items else None
        if found is not None:
            self._memory.remember_checkpoint(execution_id, key, found.id)
        return found

    def _checkpoint_id(self, execution_id: str, key: str) -> Flow[str | None]:
        """The Cairn id of the execution's checkpoint with this LangGraph id."""
        cached = self._memory.checkpoint(execution_id, key)
        if cached is not None:
            return cached
        found = yield from self._by_key(execution_id, key)
        return found.id if found is not None else None

    def _tuple(self, thread_id: str, checkpoint: models.Checkpoint) -> Flow[CheckpointTuple | None]:
        """The LangGraph tuple of a Cairn checkpoint (None when it is gone meanwhile)."""
        try:
            full: models.Checkpoint = yield specs.checkpoints_get(None, checkpoint.id, include_state=True)
            writes: models.CheckpointWrites = yield specs.checkpoints_list_writes(None, checkpoint.id)
        except errors.NotFound:
            return None
        return checkpoint_tuple(self.serde, thread_id, full.state, writes.items)

    # ---- flows: the status of the execution ----

    def _ended(self, thread_id: str) -> Callable[[str, str], str]:
        def ended(execution_id: str, status: str) -> str:
            return (
                f"thread {thread_id!r} (execution {execution_id}) is {status}: "
                "it takes no more checkpoints; use a new thread_id"
            )

        return ended

    def _apply(self, thread: Thread, stop: Stop) -> Flow[None]:
        try:
            if stop.action == "pause":
                done: models.Execution = yield specs.executions_pause(None, thread.execution_id)
            else:
                done = yield specs.executions_fail(None, thread.execution_id, **(stop.failure or {}))
        except errors.InvalidState:
            done = yield specs.executions_get(None, thread.execution_id)
        thread.status = done.status
        thread.stop = stop

    def _write(
        self, thread_id: str, at: str | None, send: Callable[[Thread], Flow[T]], stop: Stop | None = None
    ) -> Flow[T]:
        """Runs ``send`` on the thread's execution made running by the run core's
        :func:`~cairn._runs.write_running` (started; replayed from the checkpoint keyed
        ``at`` when failed or paused, else from the start, or from its current one when
        ``at`` is not among its checkpoints; sent again after a 409 or 404), then applies
        ``stop``, or again the stop of this run after a replay."""
        known = self._memory.thread(thread_id)
        seen = Seen(known.execution_id, known.status) if known is not None else Seen()

        def start() -> Flow[models.Execution]:
            workflow_id = yield from self._workflow_flow()
            return (
                yield from call(
                    specs.executions_create(None, workflow_id=workflow_id, key=thread_id, tags=self.tags)
                )
            )

        def point(execution_id: str) -> Flow[Any]:
            if at is None:
                return None
            found = yield from self._by_key(execution_id, at)
            return found.id if found is not None else specs.OMIT

        def sent(execution_id: str) -> Flow[T]:
            try:
                return (yield from send(self._memory.keep(thread_id, execution_id, seen.status)))
            except (errors.InvalidState, errors.NotFound) as e:
                if not isinstance(e, ThreadEnded):  # its checkpoints may have changed too
                    self._memory.forget_checkpoints(execution_id)
                raise

        try:
            result = yield from write_running(seen, start, sent, self._ended(thread_id), point)
        finally:
            if seen.id is None:
                self._memory.forget(thread_id)
        thread = self._memory.keep(thread_id, cast(str, seen.id), seen.status)
        if stop is not None:
            if stop.outranks(thread.pending):
                thread.pending = stop
        elif seen.replayed and thread.stop is not None and thread.pending is None:
            thread.pending = thread.stop  # a late write of the run: its stop again
        if thread.pending is not None and not self._traffic.others_writing(thread_id):
            pending, thread.pending = thread.pending, None
            yield from self._apply(thread, pending)
        return result

    # ---- flows: the saver's methods ----

    def _put_flow(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> Flow[RunnableConfig]:
        """Stores the checkpoint with the writes held for its parent (its step's)."""
        thread_id, ns = thread_of(config), ns_of(config)
        parent = get_checkpoint_id(config)
        where = (thread_id, ns, parent or "")
        held = self._held.take(where, claim=True) if parent else []
        try:
            _, _, _, send = self._checkpoint_send(config, checkpoint, metadata, held)
            yield from self._write(thread_id, parent, send)
        except BaseException:
            self._held.restore(where, held)
            raise
        self._held.stored((thread_id, ns, str(checkpoint["id"])))
        return checkpoint_config(thread_id, ns, str(checkpoint["id"]))

    def _checkpoint_send(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        held: builtins.list[HeldTask] | None = None,
    ) -> tuple[str, str, str | None, Callable[[Thread], Flow[models.Checkpoint]]]:
        """The thread, namespace and parent of a ``put``, and its request (as ``send``),
        which carries ``held``, the parent's writes, when it can (else sends them first)."""
        thread_id, ns = thread_of(config), ns_of(config)
        parent = get_checkpoint_id(config)
        key = str(checkpoint["id"])
        if not key_ok(key):
            raise ValueError(f"checkpoint id {key!r} must be 1 to 256 characters without control characters")
        meta = dict(get_checkpoint_metadata(config, metadata))
        state = checkpoint_state(self.serde, checkpoint, meta, ns, parent)
        index = cairn_metadata(ns, meta)
        name = checkpoint_name(meta, ns)

        def create(thread: Thread, pending: dict[str, Any] | None) -> Flow[models.Checkpoint]:
            stored: models.Checkpoint = yield specs.checkpoints_create(
                None,
                execution_id=thread.execution_id,
                state=state,
                name=name if name is not None else specs.OMIT,
                metadata=index,
                key=key,
                pending_writes=pending,
            )
            return stored

        def send(thread: Thread) -> Flow[models.Checkpoint]:
            pending: dict[str, Any] | None = None
            if held and parent:
                checkpoint_id = yield from self._checkpoint_id(thread.execution_id, parent)
                if checkpoint_id is None:  # the parent went (a rollback, a deletion): so do they
                    _log.warning(
                        "writes of thread %r for checkpoint %s dropped: it is gone", thread_id, parent
                    )
                elif fits(held):
                    pending = {"checkpoint_id": checkpoint_id, "tasks": [t.body() for t in held]}
                else:
                    yield from self._apart(checkpoint_id, held)
            try:
                stored = yield from create(thread, pending)
            except errors.PayloadTooLarge:
                if pending is None:
                    raise
                # The state and the writes fit their own transactions, not one together.
                yield from self._apart(pending["checkpoint_id"], held or [])
                stored = yield from create(thread, None)
            if stored.metadata.get(NS_KEY) != index[NS_KEY]:
                raise ValueError(
                    f"checkpoint {key} of thread {thread_id!r} is stored in another namespace already"
                )
            self._memory.remember_checkpoint(thread.execution_id, key, stored.id)
            return stored

        return thread_id, ns, parent, send

    def _apart(self, checkpoint_id: str, tasks: builtins.list[HeldTask]) -> Flow[None]:
        """Sends held writes on their own (more than one ``put`` carries)."""
        for t in tasks:
            yield from self._send_writes(checkpoint_id, t.task_id, t.task_path, t.writes())

    def _writes_items(self, writes: Sequence[tuple[str, Any]]) -> builtins.list[dict[str, Any]]:
        """A task's writes as the API takes them, keyed by index as LangGraph's savers key them."""
        return [
            {"index": WRITES_IDX_MAP.get(channel, i), "channel": channel, "value": encode(self.serde, value)}
            for i, (channel, value) in enumerate(writes)
        ]

    def _send_writes(
        self, checkpoint_id: str, task_id: str, task_path: str, items: builtins.list[dict[str, Any]]
    ) -> Flow[None]:
        for start in range(0, len(items), WRITES_PER_REQUEST):
            yield specs.checkpoints_put_writes(
                None,
                checkpoint_id,
                task_id=task_id,
                task_path=task_path,
                writes=items[start : start + WRITES_PER_REQUEST],
            )

    def _import_flow(self, t: CheckpointTuple) -> Flow[bool]:
        """One checkpoint of another saver with its pending writes (:func:`migrate`),
        stored as ``put`` and ``put_writes`` store them, without the pauses and failures
        writes call for in a run: they are history here. Not stored (False) when the
        thread's execution exists and is not running: the thread has moved on in Cairn
        (paused, failed, completed), and history from elsewhere must not replay it."""
        parent = get_checkpoint_id(t.parent_config) if t.parent_config else None
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_of(t.config), "checkpoint_ns": ns_of(t.config)}
        }
        if parent:
            config["configurable"]["checkpoint_id"] = parent
        thread_id, _, parent, send_checkpoint = self._checkpoint_send(config, t.checkpoint, t.metadata)
        by_task: dict[str, builtins.list[tuple[str, Any]]] = {}
        for task_id, channel, value in t.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))

        def send(thread: Thread) -> Flow[None]:
            stored = yield from send_checkpoint(thread)
            for task_id, writes in by_task.items():
                yield from self._send_writes(stored.id, task_id, "", self._writes_items(writes))

        found = yield from self._find(thread_id, fresh=self._memory.thread(thread_id) is None)
        if found is not None and found.status != "running":
            return False
        yield from self._write(thread_id, parent, send)
        return True

    def _put_writes_flow(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> Flow[None]:
        """Sends a task's writes now, with those held for their checkpoint."""
        if not writes:
            return None
        thread_id, ns = thread_of(config), ns_of(config)
        key = get_checkpoint_id(config)
        if not key:
            raise ValueError("put_writes needs configurable.checkpoint_id (the checkpoint the writes go to)")
        cached = self._memory.thread(thread_id)
        if (
            cached is not None
            and cached.status == "failed"
            and cached.stop is not None
            and cached.stop.action == "fail"
            and any(c == ERROR and cancelled(v) for c, v in writes)
        ):
            return None  # a task cancelled because another failed in this run
        items = self._writes_items(writes)
        task = HeldTask(task_id, task_path, dict(enumerate(items)))
        yield from self._held_flow((thread_id, ns, key), [task], transition(ns, writes, task_id))
        return None

    def _held_flow(
        self, where: Where, tasks: builtins.list[HeldTask], stop: Stop | None = None
    ) -> Flow[None]:
        """Sends ``tasks`` (a task's writes for ``where``, going at once) after the writes
        held for it, then applies ``stop``. Writes for ``where`` handed over later go at
        once too (counted as under way, so a pause waits for them)."""
        held = self._held.take(where, claim=True)
        try:
            yield from self._tasks_flow(where, held + tasks, stop)  # a task's later writes win
        except BaseException:
            self._held.restore(where, held)
            raise

    def _tasks_flow(
        self, where: Where, tasks: builtins.list[HeldTask], stop: Stop | None = None
    ) -> Flow[None]:
        """Sends ``tasks`` (writes for ``where``) as one ``put_writes`` each, then applies
        ``stop``."""
        thread_id, _, key = where

        def send(thread: Thread) -> Flow[None]:
            checkpoint_id = yield from self._checkpoint_id(thread.execution_id, key)
            if checkpoint_id is None:
                raise Unstored(thread_id, key)
            for task in tasks:
                yield from self._send_writes(checkpoint_id, task.task_id, task.task_path, task.writes())

        if tasks:
            yield from self._write(thread_id, key, send, stop)

    def _get_tuple_flow(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        thread_id, ns = thread_of(config), ns_of(config)
        key = get_checkpoint_id(config)
        if not ns and (cached := self._memory.thread(thread_id)) is not None:
            cached.stop = cached.pending = None  # a run starts by reading its checkpoint: a new run
        for fresh in (False, True):
            thread = yield from self._find(thread_id, fresh=fresh)
            if thread is None:
                return None
            try:
                if key:
                    found = yield from self._by_key(thread.execution_id, key)
                else:
                    spec = specs.checkpoints_list(
                        None,
                        execution_id=thread.execution_id,
                        order="desc",
                        metadata={NS_KEY: ns_value(ns)},
                        limit=1,
                    )
                    page: models.Page[models.Checkpoint] = yield Page(spec)
                    found = page.items[0] if page.items else None
            except errors.NotFound:
                continue  # the execution went: look the thread up again
            if found is None or found.metadata.get(NS_KEY) != ns_value(ns):
                return None
            tup = yield from self._tuple(thread_id, found)
            if tup is None or tup.config["configurable"]["checkpoint_ns"] != ns:
                return None
            return tup
        return None

    def _complete_flow(self, config: RunnableConfig, output: Any) -> Flow[models.Execution]:
        thread_id = thread_of(config)
        thread = yield from self._find(thread_id, fresh=True)
        if thread is None:
            raise errors.NotFound(f"thread {thread_id!r} has no execution", status=404, code="not_found")
        output = specs.OMIT if output is None else specs.jsonable(output, "the output")
        done: models.Execution = yield specs.executions_complete(None, thread.execution_id, output=output)
        thread.status, thread.stop = done.status, None
        return done
