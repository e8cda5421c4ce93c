"""``CairnSession``: an OpenAI Agents SDK session whose items live in Cairn."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
from agents.run_context import RunContextWrapper

from cairn import AsyncCairn, Cairn, errors, models
from cairn import _specs as specs
from cairn._runs import (
    Flow,
    Seen,
    arun_on,
    async_workflow_id,
    call,
    check_workflow,
    workflow_id,
    write_running,
)

T = TypeVar("T")

#: The ``format`` of the checkpoint states a session writes.
FORMAT = "cairn.openai_agents.session/1"
#: The largest checkpoint state Cairn takes, as compact JSON (docs/api.md, Limits).
STATE_MAX_BYTES = 4 * 1024 * 1024
#: How many times a write is tried against a session that changed behind it.
_ATTEMPTS = 30


class SessionTooLarge(errors.PayloadTooLarge):
    """The session's items would not fit one Cairn checkpoint (4 MiB of JSON). Nothing
    was stored: the session is as it was. Continue in a new session (seeded, say, with a
    summary of this one), or shorten this one (``pop_item``, ``clear_session``)."""


#: The session's execution was completed or cancelled (through the API, the CLI or the
#: dashboard): it takes no more items. Use a new session id, or ``clear_session()`` to
#: start this one again (the run core's one ended error, :class:`cairn.errors.ExecutionEnded`).
SessionEnded = errors.ExecutionEnded


@dataclass
class _Seen:
    """The session's execution as last read or written."""

    execution_id: str
    status: str
    attempt: int
    checkpoint_id: str | None
    items: list[Any]


@dataclass
class _Sent(Generic[T]):
    """What one send of a write did, on the session as ``on`` saw it: the checkpoint it
    wrote and the items it holds (None: the change changed nothing), and the change's
    result."""

    on: _Seen
    written: tuple[models.Checkpoint, list[Any]] | None
    result: T


def _copy(items: list[Any]) -> list[Any]:
    return cast(list[Any], json.loads(json.dumps(items)))


def _state(items: list[Any]) -> dict[str, Any]:
    return {"format": FORMAT, "items": items}


def _items_of(checkpoint: models.Checkpoint) -> list[Any]:
    state = checkpoint.state or {}
    items = state.get("items")
    if state.get("format") != FORMAT or not isinstance(items, list):
        raise errors.InvalidState(
            f"checkpoint {checkpoint.id} was not written by a CairnSession (no {FORMAT!r} state): "
            "a session's execution takes only CairnSession checkpoints"
        )
    return items


def _check_key(session_id: str) -> None:
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= 256:
        raise ValueError("session_id must be a string of 1 to 256 characters (it is the execution's key)")
    if any((ord(c) < 32 and c not in "\t\n\r") or ord(c) == 127 for c in session_id):
        raise ValueError("session_id must not hold control characters (it is the execution's key)")


_default: Cairn | None = None
_default_lock = threading.Lock()


def _default_client() -> Cairn:
    """One ``Cairn()`` for every session made without a client: one connection pool, and
    the workflow looked up once per process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Cairn()
        return _default


async def _settled(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a write to its end even when the caller is cancelled meanwhile (then raises
    the cancellation), so the session never holds a write of unknown outcome."""
    task = asyncio.ensure_future(coroutine)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller gets
        raise cancelled
    return task.result()


class CairnSession:
    """An OpenAI Agents SDK session (``agents.memory.Session``) stored in Cairn.

    ::

        session = CairnSession("ticket-7")   # CAIRN_API_KEY, CAIRN_API_URL
        result = await Runner.run(agent, "Where is my order?", session=session)

    A session is one execution of ``workflow`` (a ``wf_...`` id, or a name: found, else
    created with type ``custom``) whose ``key`` is ``session_id``, started by the first
    write. Every ``add_items`` and ``pop_item`` is a checkpoint (named after the method)
    whose state holds all the session's items, ``{"format": FORMAT, "items": [...]}``, so
    the execution's current checkpoint alone answers ``get_items``: at most 2 requests
    (the execution, then that checkpoint's state when it is not the one this object read
    or wrote last), and a write 1 request, whatever the session's length. A session
    whose items would outgrow one checkpoint (4 MiB of JSON) raises
    :class:`SessionTooLarge` and stays as it was.

    Cairn's tools act on the session: after a rollback (the execution paused at an
    earlier checkpoint) ``get_items`` answers that checkpoint's items, and the next write
    replays the execution from it (``attempt`` + 1, charged as a replay) and continues
    from those items. Writes of one object go one at a time; of two objects writing on
    one state only the first is stored (a checkpoint's ``key`` names the attempt and the
    checkpoint it follows), and the other applies its change again to the session as it
    is. A write that lands on a checkpoint other than the one this object knew (a replay
    from an earlier checkpoint, with or without a rollback, behind it) is superseded at
    once: the change applied to that checkpoint's items is written on top of it (the
    stray stays in the history; the session is the newest checkpoint).
    A write whose caller is cancelled still finishes. ``clear_session`` deletes the
    execution (with its checkpoints); the next write starts a new one. A completed or
    cancelled execution takes no more items (:class:`SessionEnded`).

    ``client`` is an :class:`~cairn.AsyncCairn` (used on the caller's event loop, any
    loop: it keeps connections per loop) or a :class:`~cairn.Cairn`, used from a worker
    thread; ``None``: one ``Cairn()`` from the
    environment shared by every such session of the process. ``session_settings`` as for
    ``SQLiteSession`` (``limit``: the items ``get_items()`` answers by default).
    ``tags`` are given to the session's execution when it starts.
    """

    session_id: str
    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        client: Cairn | AsyncCairn | None = None,
        *,
        workflow: str = "openai-agents-sessions",
        session_settings: SessionSettings | dict[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        _check_key(session_id)
        check_workflow(workflow)
        if client is not None and not isinstance(client, (Cairn, AsyncCairn)):
            raise TypeError(f"client must be a cairn.Cairn or cairn.AsyncCairn, not {type(client).__name__}")
        self.session_id = session_id
        self.workflow = workflow
        self.tags = dict(tags or {})
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self._client: Cairn | AsyncCairn = client if client is not None else _default_client()
        self._seen: _Seen | None = None
        # Moved on by every write's view of the session, so a read answered meanwhile
        # never replaces it with an older one.
        self._generation = 0
        # One write at a time per object, whatever the threads and event loops it is used from.
        self._writing = threading.Lock()

    def __repr__(self) -> str:
        return f"CairnSession({self.session_id!r}, workflow={self.workflow!r})"

    # ---- the Session protocol ----

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The session's items, oldest first: all of them, or the newest ``limit``
        (``0``: none; negative: all), by default ``session_settings.limit``. ``wrapper``
        (the run context the SDK passes) is accepted and not used."""
        limit = resolve_session_limit(limit, self.session_settings)
        seen = await self._read()
        items = seen.items if seen is not None else []
        if limit is not None and limit >= 0:
            items = items[-limit:] if limit > 0 else []
        return cast(list[TResponseInputItem], _copy(items))

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Appends ``items`` (JSON objects) in one checkpoint named ``add_items``; ``[]``
        changes nothing."""
        if not items:
            return
        added = _copy(list(items))  # a TypeError for anything that is not JSON, before any request

        def append(current: list[Any]) -> tuple[list[Any] | None, None]:
            return current + added, None

        await _settled(self._one_at_a_time(self._write("add_items", append)))

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None) -> TResponseInputItem | None:
        """Removes and answers the newest item (``None`` when the session is empty), in
        one checkpoint named ``pop_item``."""
        if self._seen is None or not self._seen.items:
            seen = await self._read()
            if seen is None or not seen.items:
                return None

        def pop(current: list[Any]) -> tuple[list[Any] | None, Any]:
            if not current:
                return None, None
            return current[:-1], current[-1]

        popped = await _settled(self._one_at_a_time(self._write("pop_item", pop)))
        return cast("TResponseInputItem | None", _copy([popped])[0] if popped is not None else None)

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Deletes the session's execution with its checkpoints (the failures recorded on
        it stay), as ``SQLiteSession`` deletes its rows; the next write starts a new
        execution with the same key."""
        await _settled(self._one_at_a_time(self._clear()))

    def close(self) -> None:
        """Does nothing (``SQLiteSession`` has it): the client is the caller's, or the
        process's."""

    async def _one_at_a_time(self, write: Coroutine[Any, Any, T]) -> T:
        """Runs ``write`` once no other write of this object runs. Polled: the writers may
        be on several threads' event loops (an ``asyncio.Event`` is one loop's), and waiting
        must block neither a loop nor the worker threads a sync client runs in."""
        while not self._writing.acquire(blocking=False):  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        try:
            return await write
        finally:
            self._writing.release()

    # ---- the API, through either client ----

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if isinstance(self._client, AsyncCairn):
            return await fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _workflow_id(self) -> str:
        if isinstance(self._client, AsyncCairn):
            return await async_workflow_id(self._client, self.workflow)
        return await asyncio.to_thread(workflow_id, self._client, self.workflow)

    async def _find(self) -> models.ExecutionSummary | None:
        """The session's execution as it is now (1 request)."""
        pager = self._client.executions.list(
            workflow_id=await self._workflow_id(), key=self.session_id, page_size=1
        )
        page: models.Page[models.ExecutionSummary] = await self._call(pager.first_page)
        return page.items[0] if page.items else None

    def _items_flow(self, checkpoint_id: str | None) -> Flow[list[Any]]:
        """The items checkpoint ``checkpoint_id`` holds (none before the first): its state
        is read unless it is the one this object read or wrote last."""
        if checkpoint_id is None:
            return []
        seen = self._seen
        if seen is not None and seen.checkpoint_id == checkpoint_id:
            return seen.items  # a checkpoint never changes
        checkpoint: models.Checkpoint = yield specs.checkpoints_get(None, checkpoint_id, include_state=True)
        return _items_of(checkpoint)

    def _view_flow(self, execution: models.ExecutionSummary) -> Flow[_Seen]:
        items = yield from self._items_flow(execution.current_checkpoint_id)
        return _Seen(
            execution.id, execution.status, execution.attempt, execution.current_checkpoint_id, items
        )

    def _know(self, seen: _Seen | None) -> _Seen | None:
        """A write's view of the session becomes this object's."""
        self._generation += 1
        self._seen = seen
        return seen

    async def _view(self, execution: models.ExecutionSummary) -> _Seen:
        return await arun_on(self._client, self._view_flow(execution))

    async def _read(self) -> _Seen | None:
        """The session as it is now: at most 2 requests. Kept as this object's view
        unless a write changed that view meanwhile (then the write's is newer)."""
        generation = self._generation
        execution = await self._find()
        seen = await self._view(execution) if execution is not None else None
        if self._generation == generation:
            self._seen = seen
        return seen

    def _ended(self, execution_id: str, status: str) -> str:
        return (
            f"session {self.session_id!r} (execution {execution_id}) is {status}: it takes "
            "no more items; use a new session id, or clear_session() to start it again"
        )

    def _start(self, workflow_id: str) -> Flow[models.Execution]:
        return call(
            specs.executions_create(None, workflow_id=workflow_id, key=self.session_id, tags=self.tags)
        )

    def _send(
        self,
        seen: Seen,
        known: _Seen | None,
        name: str,
        change: Callable[[list[Any]], tuple[list[Any] | None, T]],
        write: str,
        superseding: bool,
        execution_id: str,
    ) -> Flow[_Sent[T]]:
        """One send of :meth:`_write`: ``change`` applied to the session as ``seen`` has
        its execution when the write started, replayed or read it again, else as this
        object knew it (``known``), written as a checkpoint named ``name`` with ``write``
        in its metadata, also when the change changes nothing if ``superseding``."""
        if seen.execution is not None:
            on = yield from self._view_flow(seen.execution)
            self._know(on)
        else:  # no call made: the execution is the one known (its id is where ``seen``'s came from)
            on = cast(_Seen, known)
        items, result = change(on.items)
        if items is None:
            if not superseding:
                return _Sent(on, None, result)
            items = on.items  # what the session holds, over the stray
        state = _state(items)
        size = len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())
        if size > STATE_MAX_BYTES:
            raise SessionTooLarge(
                f"session {self.session_id!r} would hold {size} bytes of JSON; a Cairn checkpoint "
                f"holds at most {STATE_MAX_BYTES} (4 MiB), and each holds all of a session's items. "
                "Nothing was stored. Continue in a new session (seeded with a summary of this one, "
                "say), or shorten this one (pop_item, clear_session)",
                status=None,
            )
        metadata = {"items": str(len(items)), "change": str(len(items) - len(on.items)), "write": write}
        checkpoint: models.Checkpoint = yield specs.checkpoints_create(
            None,
            execution_id=execution_id,
            state=state,
            name=name,
            metadata=metadata,
            key=f"{on.attempt}:{on.checkpoint_id or 'start'}",
        )
        return _Sent(on, (checkpoint, items), result)

    async def _write(self, name: str, change: Callable[[list[Any]], tuple[list[Any] | None, T]]) -> T:
        """Applies ``change`` to the session's items as one checkpoint, sent by the run
        core's :func:`~cairn._runs.write_running` (the execution started when the session
        has none, replayed from its current checkpoint when paused or failed: a rollback
        pauses it; one deleted behind this object is started again only when the change
        changes an empty session): 1 request when this object knows the
        session's current checkpoint and the execution runs.

        The checkpoint's ``key`` names the attempt and the checkpoint it follows, so of two
        writers on one state only the first is stored: the other is answered that first
        checkpoint (another ``write`` in its metadata), reads the session again and applies
        its change to it."""
        refused: errors.CairnError | None = None
        superseding = False  # the current checkpoint holds this change on the wrong items
        for attempt in range(_ATTEMPTS):
            if attempt:
                await asyncio.sleep(random.uniform(0, 0.02 * min(attempt, 10)))  # writers apart
            refused = None
            if self._seen is None and change([])[0] is None:
                return change([])[1]  # nothing to change in a session that has no execution
            known = self._seen
            seen = Seen(known.execution_id, known.status) if known is not None else Seen()
            workflow_id = await self._workflow_id()
            write = uuid.uuid4().hex

            start = functools.partial(self._start, workflow_id)
            send = functools.partial(self._send, seen, known, name, change, write, superseding)
            try:
                sent = await arun_on(
                    self._client, write_running(seen, start, send, self._ended, restart=False)
                )
            except errors.ExecutionEnded:
                raise
            except errors.InvalidState as e:  # a replay refused, or the key is a discarded
                refused = e  # checkpoint's, still being deleted
                self._know(await self._read())
                continue
            except errors.NotFound as e:  # deleted behind this object: the session starts again
                refused = e  # (when the change changes an empty session)
                self._know(None)
                continue
            if sent.written is None:
                return sent.result
            (checkpoint, items), on = sent.written, sent.on
            if checkpoint.metadata.get("write") != write:  # another writer's, on the same state
                self._know(await self._read())
                continue
            if checkpoint.parent_checkpoint_id != on.checkpoint_id:
                # Written on a checkpoint this object did not know was current (a replay from
                # an earlier one behind it): this checkpoint holds the change applied to the
                # wrong items. The session is what its parent held; the change is applied to
                # that and written on top (deleting it would make the newest remaining
                # checkpoint current, not its parent, and undo the replay).
                parent_items = await arun_on(self._client, self._items_flow(checkpoint.parent_checkpoint_id))
                self._know(_Seen(on.execution_id, "running", checkpoint.attempt, checkpoint.id, parent_items))
                superseding = True
                continue
            self._know(_Seen(on.execution_id, "running", on.attempt, checkpoint.id, items))
            return sent.result
        if refused is not None:
            raise refused
        raise errors.InvalidState(
            f"session {self.session_id!r} changed behind each of {_ATTEMPTS} writes: it has other writers "
            "at the same moment; try again"
        )

    async def _clear(self) -> None:
        execution = await self._find()
        self._know(None)
        if execution is not None:
            with contextlib.suppress(errors.NotFound):  # deleted meanwhile
                await self._call(self._client.executions.delete, execution.id)
