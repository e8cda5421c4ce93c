""":class:`CairnSaver`: LangGraph's ``BaseCheckpointSaver`` interface, sync and async,
each method running its flow (``_flows``, ``_listing``, ``_housekeeping``) on the
saver's clients under the thread's lock."""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import errors, models
from .._client import AsyncCairn, Cairn
from . import _held
from ._driver import Flow, aiterate, arun, iterate, run
from ._flows import Flows
from ._held import Where
from ._housekeeping import Housekeeping
from ._listing import Lists
from ._status import ERROR_SOURCE_NODE
from ._threads import ns_of, thread_key, thread_of
from ._traffic import Unstored

C = TypeVar("C", Cairn, AsyncCairn)
_log = logging.getLogger("cairn.langgraph")


def _thread_or_all(config: RunnableConfig | None) -> str | None:
    """The thread a read names, or None (every thread of the workflow)."""
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if thread_id is None else thread_key(thread_id)


def _like(kind: type[C], other: Cairn | AsyncCairn) -> C:
    """A client of ``kind`` with ``other``'s settings (the saver's missing twin)."""
    s = other.api.settings
    url, retries, elapsed = s.base_url, s.max_retries, s.max_elapsed
    return kind(s.api_key, base_url=url, timeout=s.timeout, max_retries=retries, max_elapsed=elapsed)


class CairnSaver(Flows):
    """A LangGraph checkpointer on Cairn (see :mod:`cairn.langgraph`).

    ``client`` and ``async_client`` default to ``Cairn()`` from the environment
    (``CAIRN_API_KEY``, ``CAIRN_API_URL``); when only one is given, the other is made
    with its settings. ``workflow`` is a workflow id (``wf_...``) or name. ``serde``
    serializes the values that are not plain JSON (LangGraph's ``JsonPlusSerializer``
    by default). ``tags`` are given to every thread's execution when it starts.
    """

    def __init__(
        self,
        client: Cairn | None = None,
        *,
        workflow: str,
        async_client: AsyncCairn | None = None,
        serde: SerializerProtocol | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(workflow=workflow, serde=serde, tags=tags)
        if client is None and async_client is None:
            client = Cairn()
            self._owned: builtins.list[Any] = [client]
        else:
            self._owned = []
        self.client = client
        self.async_client = async_client
        self._mutex = threading.Lock()
        self._flushing = threading.Lock()
        # The saver's parts, each on the flows it shares: composed, not inherited.
        self._lists = Lists(self)
        self._housekeeping = Housekeeping(self)

    def __repr__(self) -> str:
        return f"CairnSaver(workflow={self.workflow!r})"

    # ---- clients ----

    def _sync_client(self) -> Cairn:
        with self._mutex:
            if self.client is None:
                assert self.async_client is not None
                self.client = _like(Cairn, self.async_client)
                self._owned.append(self.client)
            return self.client

    def _async_client(self) -> AsyncCairn:
        with self._mutex:
            if self.async_client is None:
                assert self.client is not None
                self.async_client = _like(AsyncCairn, self.client)
                self._owned.append(self.async_client)
            return self.async_client

    def close(self) -> None:
        """Sends the writes it holds, then closes the sync client the saver made (not one
        it was given)."""
        self._held.close()
        for owned in self._owned:
            if isinstance(owned, Cairn):
                owned.close()

    async def aclose(self) -> None:
        """Sends the writes it holds, then closes the clients the saver made (not ones it
        was given)."""
        await asyncio.to_thread(self._held.close)
        for owned in self._owned:
            if isinstance(owned, AsyncCairn):
                await owned.close()
            else:
                owned.close()

    # ---- BaseCheckpointSaver ----

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint (a Cairn checkpoint keyed by its id) on the thread's execution."""
        thread_id = thread_of(config)
        self._after_flush(config)
        with (
            self._traffic.writing_thread(thread_id),
            self._traffic.putting_checkpoint(thread_id, str(checkpoint["id"])),
            self._traffic.lock(thread_id),
        ):
            return run(self._sync_client(), self._put_flow(config, checkpoint, metadata))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id = thread_of(config)
        await self._aafter_flush(config)
        with (
            self._traffic.writing_thread(thread_id),
            self._traffic.putting_checkpoint(thread_id, str(checkpoint["id"])),
        ):
            async with self._traffic.alock(thread_id):
                return await arun(self._async_client(), self._put_flow(config, checkpoint, metadata))

    def _holds(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> bool:
        """Holds plain writes for the ``put`` that ends their step (see ``_held``);
        False for writes that go now: an interrupt, an error, a resume, one that an error
        handler waits for, more than a ``put`` carries, writes whose step's ``put`` has
        gone, and a late write of a run the saver paused or failed."""
        key = get_checkpoint_id(config)
        if not key or not writes or any(c in WRITES_IDX_MAP or c == ERROR_SOURCE_NODE for c, _ in writes):
            return False
        thread = self._memory.thread(thread_of(config))
        if thread is not None and thread.status != "running":
            return False  # a late write of a run this saver paused or failed: as before, at once
        items = self._writes_items(writes)
        size = len(json.dumps(items, separators=(",", ":"), default=str))
        return self._held.hold((thread_of(config), ns_of(config), key), task_id, task_path, items, size)

    def _send_now(self, thread_id: str, key: str | None, flow: Callable[[], Flow[None]]) -> None:
        """Runs a writes flow once the ``put`` of its checkpoint is in (LangGraph sends a
        step's writes without waiting for it)."""
        with self._traffic.writing_thread(thread_id):
            if key and self._traffic.ahead(thread_id, key):
                self._traffic.await_put(Unstored(thread_id, key))
            try:
                with self._traffic.sending_thread(thread_id), self._traffic.lock(thread_id):
                    run(self._sync_client(), flow())
            except Unstored as unstored:
                self._traffic.await_put(unstored)
                try:
                    with self._traffic.sending_thread(thread_id), self._traffic.lock(thread_id):
                        run(self._sync_client(), flow())
                except Unstored as again:
                    raise again.not_found() from None

    async def _asend_now(self, thread_id: str, key: str | None, flow: Callable[[], Flow[None]]) -> None:
        with self._traffic.writing_thread(thread_id):
            if key and self._traffic.ahead(thread_id, key):
                await self._traffic.aawait_put(Unstored(thread_id, key))
            try:
                with self._traffic.sending_thread(thread_id):
                    async with self._traffic.alock(thread_id):
                        await arun(self._async_client(), flow())
            except Unstored as unstored:
                await self._traffic.aawait_put(unstored)
                try:
                    with self._traffic.sending_thread(thread_id):
                        async with self._traffic.alock(thread_id):
                            await arun(self._async_client(), flow())
                except Unstored as again:
                    raise again.not_found() from None

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores a task's writes on the checkpoint of ``config``: plain writes with the
        next checkpoint (or within a second), an interrupt or error at once, pausing or
        failing the execution (see the module's documentation)."""
        if self._holds(config, writes, task_id, task_path):
            return
        flow = partial(self._put_writes_flow, config, writes, task_id, task_path)
        self._send_now(thread_of(config), get_checkpoint_id(config), flow)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if self._holds(config, writes, task_id, task_path):
            return
        flow = partial(self._put_writes_flow, config, writes, task_id, task_path)
        await self._asend_now(thread_of(config), get_checkpoint_id(config), flow)

    def _flush_held(self, where: Where) -> None:
        """Sends the writes held for ``where`` on their own (the timer: nobody claimed them)."""
        with self._flushing:
            self._flush_one(where)

    def _flush_one(self, where: Where) -> None:
        """Sends what is held for ``where`` (``_flushing`` held). Refused for now (the
        checkpoint not stored yet, the API throttling or down, no credits for the replay
        a paused run needs, a key refused), it is held again, tried less and less often,
        for up to ``ORPHAN_SECONDS``; refused for good (the thread ended), dropped."""
        with self._held.flushing(where):
            tasks = self._held.take(where)
            if not tasks:
                return
            try:
                self._send_now(where[0], where[2], partial(self._tasks_flow, where, tasks))
            except (
                errors.NotFound,
                errors.RateLimited,
                errors.InternalError,
                errors.Unavailable,
                errors.APIConnectionError,
                errors.InsufficientCredits,
                errors.Unauthorized,
            ) as e:
                age = time.monotonic() - min(t.born for t in tasks)
                if age < _held.ORPHAN_SECONDS:
                    self._held.restore(where, tasks, wait=min(60.0, age))
                else:
                    _log.warning("writes of thread %r for checkpoint %s dropped: %s", where[0], where[2], e)
            except errors.CairnError as e:  # refused for good: the thread ended, or the writes
                _log.warning("writes of thread %r for checkpoint %s dropped: %s", where[0], where[2], e)
            except BaseException:
                self._held.restore(where, tasks)
                raise

    def _flush_thread(self, thread_id: str | None) -> None:
        """Sends the writes held for the thread (every thread: None) before a read, once
        a flush of the timer under way is done (one flush at a time)."""
        if not self._held.held(thread_id):
            return
        with self._flushing:
            for where in self._held.held(thread_id):
                self._flush_one(where)

    def _after_flush(self, config: RunnableConfig) -> None:
        """Waits for a flush under way of the writes of this ``put``'s parent."""
        parent = get_checkpoint_id(config)
        if parent:
            self._held.wait_flush((thread_of(config), ns_of(config), parent))

    async def _aafter_flush(self, config: RunnableConfig) -> None:
        parent = get_checkpoint_id(config)
        where = (thread_of(config), ns_of(config), parent or "")
        if parent and self._held.is_flushing(where):
            await asyncio.to_thread(self._held.wait_flush, where)

    def _forget_held(self, thread_id: str) -> None:
        with self._flushing:  # no flush under way sends them after
            self._held.take_thread(thread_id)

    async def _aflush_thread(self, thread_id: str | None) -> None:
        if self._held.held(thread_id):
            await asyncio.to_thread(self._flush_thread, thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The next version of a channel: integers, as this saver writes them; a thread
        migrated from a saver that writes strings (``"<32-digit integer>.<random>"``:
        InMemorySaver, SqliteSaver, PostgresSaver) goes on with strings of that form, its
        integer prefix plus one, as InMemorySaver does (versions of a thread are compared,
        so they keep one type)."""
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return super().get_next_version(current, channel)

    def import_tuple(self, t: CheckpointTuple) -> bool:
        """Stores another saver's checkpoint with its pending writes (see
        :func:`cairn.langgraph.migrate`): as ``put`` and ``put_writes`` would, without the
        pauses and failures those writes would call for in a run. False, and nothing
        stored, when the thread's execution is no longer running (it moved on in Cairn)."""
        thread_id = thread_of(t.config)
        with self._traffic.writing_thread(thread_id), self._traffic.lock(thread_id):
            return run(self._sync_client(), self._import_flow(t))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (its ``checkpoint_id``, else the newest of its
        namespace), with its pending writes; None when there is none."""
        self._flush_thread(thread_of(config))
        return run(self._sync_client(), self._get_tuple_flow(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self._aflush_thread(thread_of(config))
        return await arun(self._async_client(), self._get_tuple_flow(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of the thread of ``config`` (and its namespace when
        given), else of every thread of the workflow; ``filter`` on the metadata,
        ``before`` a checkpoint, at most ``limit``."""
        self._flush_thread(_thread_or_all(config))
        return iterate(self._sync_client(), self._lists.list_flow(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        await self._aflush_thread(_thread_or_all(config))
        async for item in aiterate(
            self._async_client(), self._lists.list_flow(config, filter, before, limit)
        ):
            yield item

    def delete_thread(self, thread_id: str) -> None:
        """Deletes the thread's execution with its checkpoints and writes (none: nothing)."""
        thread_id = thread_key(thread_id)
        self._forget_held(thread_id)
        with self._traffic.lock(thread_id):
            run(self._sync_client(), self._housekeeping.delete_flow(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        thread_id = thread_key(thread_id)
        await asyncio.to_thread(self._forget_held, thread_id)
        async with self._traffic.alock(thread_id):
            await arun(self._async_client(), self._housekeeping.delete_flow(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies a thread's checkpoints, oldest first, with their ids, metadata,
        parents and writes, to the target thread (its execution started if need be)."""
        source, target = thread_key(source_thread_id), thread_key(target_thread_id)
        self._flush_thread(source)
        with self._traffic.lock(target):
            run(self._sync_client(), self._housekeeping.copy_flow(source, target))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = thread_key(source_thread_id), thread_key(target_thread_id)
        await self._aflush_thread(source)
        async with self._traffic.alock(target):
            await arun(self._async_client(), self._housekeeping.copy_flow(source, target))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: each thread keeps its newest checkpoint per namespace (with its
        writes), the others are deleted; ``delete``: the threads are deleted."""
        for thread_id in [thread_key(t) for t in thread_ids]:
            self._flush_thread(thread_id)
            with self._traffic.lock(thread_id):
                run(self._sync_client(), self._housekeeping.prune_flow(thread_id, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in [thread_key(t) for t in thread_ids]:
            await self._aflush_thread(thread_id)
            async with self._traffic.alock(thread_id):
                await arun(self._async_client(), self._housekeeping.prune_flow(thread_id, strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) whose metadata names one of these
        runs, in every thread of the workflow: a read of each thread per run, so meant
        for occasional clean-up."""
        run(self._sync_client(), self._housekeeping.delete_runs_flow(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await arun(self._async_client(), self._housekeeping.delete_runs_flow(run_ids))

    def complete(self, config: RunnableConfig, output: Any = None) -> models.Execution:
        """Completes the thread's execution with ``output`` (JSON): the thread is done
        for good (later writes raise :class:`ThreadEnded`)."""
        thread_id = thread_of(config)
        with self._traffic.lock(thread_id):
            return run(self._sync_client(), self._complete_flow(config, output))

    async def acomplete(self, config: RunnableConfig, output: Any = None) -> models.Execution:
        thread_id = thread_of(config)
        async with self._traffic.alock(thread_id):
            return await arun(self._async_client(), self._complete_flow(config, output))
