"""``list`` as a flow: a thread's checkpoints newest first, filtered on their metadata
by the server where it can and checked here exactly; or every thread's of the workflow."""

from __future__ import annotations

import builtins
from collections import deque
from collections.abc import Generator
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import get_checkpoint_id

from .. import _specs as specs
from .. import errors, models
from ._driver import Listing, Op, Out, Page
from ._flows import Flows
from ._metadata import NS_KEY, PARTIAL_KEY, matches, ns_value, server_filter
from ._threads import Thread, thread_of


class Lists:
    """The flow of ``list`` and ``alist``."""

    def __init__(self, flows: Flows) -> None:
        self.flows = flows

    def list_flow(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Listing:
        if limit is not None and limit <= 0:
            return
        left = [limit]
        configurable = (config or {}).get("configurable") or {}
        ns = configurable.get("checkpoint_ns")
        if configurable.get("thread_id") is not None:
            thread_id = thread_of(cast(RunnableConfig, config))
            key = get_checkpoint_id(cast(RunnableConfig, config))
            for fresh in (False, True):
                thread = yield from self.flows._find(thread_id, fresh=fresh)
                if thread is None:
                    return
                if not (yield from self._list_thread(thread_id, thread, ns, key, filter, before, left)):
                    return
            return
        workflow_id = yield from self.flows._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id)
        after: str | None = None
        while True:
            page: models.Page[models.ExecutionSummary] = yield Page(spec, after)
            for execution in page.items:
                if execution.key is None:
                    continue
                thread = self.flows._memory.remember(execution.key, execution)
                yield from self._list_thread(execution.key, thread, ns, None, filter, before, left)
                if left[0] == 0:
                    return
            after = page.after(spec.size)
            if after is None:
                return

    def _list_thread(
        self,
        thread_id: str,
        thread: Thread,
        ns: str | None,
        key: str | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        left: builtins.list[int | None],
    ) -> Generator[Op | Out, Any, bool]:
        """The thread's checkpoints, newest first; ``left[0]``: how many more to yield.
        True when the execution was not found before any was yielded (deleted behind the
        saver: look the thread up again)."""
        produced = False
        execution_id = thread.execution_id
        server = server_filter(filter)
        metadata = dict(server)
        if ns is not None:
            metadata[NS_KEY] = ns_value(ns)
        before_key = get_checkpoint_id(before) if before else None
        starting_after: str | None = None
        older_than: str | None = None  # compare LangGraph ids when the cursor is not stored
        try:
            if before_key:
                cursor = yield from self.flows._by_key(execution_id, before_key)
                if cursor is not None:
                    starting_after = cursor.id
                else:
                    older_than = before_key
            exact = len(server) == len(filter or {}) and older_than is None
            size = min(200, left[0]) if (left[0] is not None and exact) else 100
            spec = specs.checkpoints_list(
                None,
                execution_id=execution_id,
                key=key,
                order="desc",
                metadata=metadata,
                starting_after=starting_after,
                limit=size,
            )
            # Checkpoints whose metadata did not all fit are read too, and checked here.
            partial: deque[models.Checkpoint] = deque()
            if server:
                flagged = {PARTIAL_KEY: "true"} | ({NS_KEY: metadata[NS_KEY]} if ns is not None else {})
                extra = specs.checkpoints_list(
                    None,
                    execution_id=execution_id,
                    key=key,
                    order="desc",
                    metadata=flagged,
                    starting_after=starting_after,
                )
                after: str | None = None
                while True:
                    page: models.Page[models.Checkpoint] = yield Page(extra, after)
                    partial.extend(page.items)
                    after = page.after(extra.size)
                    if after is None:
                        break
            seen: set[str] = set()
            after = None
            while True:
                page = yield Page(spec, after)
                batch: builtins.list[models.Checkpoint] = []
                for checkpoint in page.items:
                    while partial and partial[0].sequence > checkpoint.sequence:
                        batch.append(partial.popleft())
                    batch.append(checkpoint)
                following = page.after(spec.size)
                last = following is None
                if last:
                    batch.extend(partial)
                for checkpoint in batch:
                    if checkpoint.id in seen or checkpoint.key is None:
                        continue
                    seen.add(checkpoint.id)
                    if older_than is not None and checkpoint.key >= older_than:
                        continue
                    tup = yield from self.flows._tuple(thread_id, checkpoint)
                    if tup is None or not matches(tup.metadata, filter):
                        continue
                    if ns is not None and tup.config["configurable"]["checkpoint_ns"] != ns:
                        continue
                    yield Out(tup)
                    produced = True
                    if left[0] is not None:
                        left[0] -= 1
                        if left[0] == 0:
                            return False
                if last:
                    return False
                after = following
        except errors.NotFound:
            self.flows._memory.forget(thread_id)  # the execution went
            return not produced
        return False
