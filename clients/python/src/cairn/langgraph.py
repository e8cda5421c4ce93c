"""LangGraph checkpoints in Cairn: :class:`CairnSaver`, a LangGraph checkpointer
(``BaseCheckpointSaver``) on the Cairn API, sync and async.

::

    from cairn.langgraph import CairnSaver

    saver = CairnSaver(workflow="support-agent")     # CAIRN_API_KEY, CAIRN_API_URL
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "ticket-7"}})

Install it with ``pip install 'cairn-client[langgraph]'``.

**Where things go.** ``workflow`` is a workflow id (``wf_...``) or a name (found by name,
else created with ``workflow_type="langgraph"``). A LangGraph thread is one execution of
that workflow whose ``key`` is the thread id, started idempotently by the first write. A
LangGraph checkpoint is a Cairn checkpoint whose ``key`` is the checkpoint id, named
after its source and step (``"loop 3"``), whose state is a JSON object::

    {"format": "cairn.langgraph/1", "checkpoint_ns": "", "parent_checkpoint_id": "1ef...",
     "checkpoint": {"v": 4, "id": "1ef...", "ts": "...", "channel_values": {...},
                    "channel_versions": {...}, "versions_seen": {...}, ...},
     "metadata": {"source": "loop", "step": 3, "parents": {}, ...}}

Values that are plain JSON (dicts with string keys, lists, strings, integers, finite
floats, booleans, None) are stored as they are, so a Cairn user can read the states;
anything else (bytes, tuples, sets, messages, models, ...) is stored as
``{"__cairn_typed__": [type, base64]}`` from the saver's ``serde``. Every checkpoint
holds all its channel values (no blobs shared between checkpoints), so a state, typed
values included, must fit Cairn's 4 MiB. Pending writes are the checkpoint's Cairn
writes, under ``(task_id, index)`` as LangGraph's savers key them, read back in
LangGraph's order (``writes_sort_key``). The checkpoint's Cairn ``metadata`` holds the
namespace (``checkpoint_ns``) and the LangGraph metadata keys with scalar values,
JSON-encoded (``source: '"loop"'``, ``step: '3'``), so ``list(filter=...)`` filters on
the server; the filter is always checked again on the stored metadata, exactly (a
checkpoint whose metadata did not all fit is flagged ``langgraph_partial`` and read
too).

**The execution's status** (a decision; Cairn shows it on the dashboard):

- A thread's execution stays running between runs (a thread is a conversation):
  ``saver.complete(config, output=...)`` completes it for good; a completed or cancelled
  execution takes no more writes (:class:`ThreadEnded`).
- Every write (``put``, ``put_writes``) needs the execution running. When it is paused
  or failed, the saver first replays it from the Cairn checkpoint of the checkpoint the
  config points at (from the start when it points at none): it is running again, its
  ``attempt`` one more, and the replay is charged as any replay. A write that finds the
  status changed behind the saver (409, e.g. an operator rolled it back: paused) reads
  the execution, replays it when paused or failed, and is sent once more.
- After storing writes of the root namespace that hold an interrupt (``interrupt()``),
  the saver pauses the execution; after writes that hold an error (a node raised, and
  no error handler takes it), it fails it: ``error_type`` from the exception's class in
  upper snake case (else ``AGENT_ERROR``), its message, ``details`` with the
  ``task_id``, the ``channel`` and the ``traceback`` (a failure is recorded). A
  subgraph's interrupts and errors reach the root namespace through its parent task, so
  they count once. Resuming (``Command(resume=...)``) or retrying (``invoke(None,
  config)``) replays the execution: attempt 2, 3, ... Cairn allows 50 attempts per
  execution, so a thread can be resumed or retried 49 times. Static breakpoints
  (``interrupt_before``/``interrupt_after``) write no interrupt: the execution stays
  running.
- LangGraph sends a step's writes concurrently, without waiting for the ``put`` of
  their checkpoint: ``put_writes`` waits for that ``put`` while this saver sends the
  thread's checkpoints or writes (up to 5 minutes; 2 s once it sends none; not once
  that ``put`` failed), and a pause or failure waits for the thread's other writes under
  way in this saver, then is applied once. A write of the same run that reaches the
  saver after it (a parallel task that was still running) is stored (a replay) and the
  pause or failure applied again (a failure then is recorded twice); errors of tasks
  cancelled because another failed are not stored. A run starts by reading its thread's checkpoint
  (``get_tuple`` of the root namespace): that ends "the same run".

``delete_thread`` deletes the execution (its checkpoints and writes); ``copy_thread``
starts the target thread's execution and copies the checkpoints oldest first, with
their ids, metadata, parents and writes. ``prune`` deletes every checkpoint of the
threads but the newest per namespace (``keep_latest``) or the threads (``delete``);
``delete_for_runs`` deletes the checkpoints whose metadata names one of the runs in
every thread of the workflow (a read of each thread per run: LangGraph names runs
without their threads). A checkpoint id is stored once: putting it again changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import concurrent.futures
import contextlib
import hashlib
import json
import math
import re
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from . import _specs as specs
from . import errors, models
from ._client import AsyncCairn, Cairn
from .tracing import failure_of

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
except ImportError as e:  # pragma: no cover
    raise ImportError("cairn.langgraph needs LangGraph: pip install 'cairn-client[langgraph]'") from e

__all__ = ["FORMAT", "TYPED", "CairnSaver", "ThreadEnded"]

T = TypeVar("T")

#: The marker of a value stored with the saver's serde: ``{TYPED: [type, base64]}``.
TYPED = "__cairn_typed__"
#: The ``format`` of the states the saver writes.
FORMAT = "cairn.langgraph/1"
#: The Cairn metadata key of the checkpoint namespace (its value JSON-encoded).
NS_KEY = "checkpoint_ns"
#: The Cairn metadata key set when some LangGraph metadata did not fit Cairn's metadata
#: (a list with a metadata filter reads these checkpoints too, and checks them itself).
PARTIAL_KEY = "langgraph_partial"
#: LangGraph's channel of the node an error is routed to (an error handler takes it).
ERROR_SOURCE_NODE = "__error_source_node__"
#: Indexed first, so they always fit.
_FIRST_KEYS = ("source", "step", "run_id")
_RESERVED = frozenset({NS_KEY, PARTIAL_KEY})
#: Cairn's metadata bounds: keys, characters of a key and of a value, bytes of JSON
#: (with room to spare for the partial flag).
_MAX_KEYS, _KEY_CHARS, _VALUE_CHARS, _MAX_BYTES = 50, 40, 500, 16 * 1024 - 256
_KEY_MAX = 256
_WRITES_PER_REQUEST = 1000
#: Plain JSON deeper than this is stored typed (the API parses at most 128 levels).
_MAX_DEPTH = 64
_WORKFLOW_ID = re.compile(r"wf_[0-9A-Za-z]+")
_ERROR_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_CACHE_SIZE = 10_000
_STRIPES = 64
#: How long ``put_writes`` waits for the ``put`` of its checkpoint: at most
#: ``_PUT_WAIT`` in all, and ``_PUT_GRACE`` since the thread last had a put or write
#: being sent (LangGraph starts a checkpoint's ``put`` once the one before and its
#: writes are stored, so a thread whose puts run behind its steps sends until its
#: writes' checkpoint is in). Not at all once that ``put`` failed.
_PUT_GRACE, _PUT_WAIT = 2.0, 300.0


class ThreadEnded(errors.InvalidState):
    """The thread's execution is completed or cancelled: it takes no more writes."""

    code = "thread_ended"


class _Unstored(Exception):
    """``put_writes`` found no checkpoint to attach its writes to (not yet: LangGraph
    sends a checkpoint's writes without waiting for its ``put``)."""

    def __init__(self, thread_id: str, key: str) -> None:
        super().__init__(key)
        self.thread_id, self.key = thread_id, key

    def not_found(self) -> errors.NotFound:
        return errors.NotFound(
            f"checkpoint {self.key} of thread {self.thread_id!r} is not stored (or was rolled back)",
            status=404,
            code="not_found",
        )


# ---- values ----


def _utf8(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON that reads back as the same Python value."""
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is str:
        return _utf8(value)
    if kind is int:
        return bool(-(2**63) <= value < 2**64)
    if kind is float:
        return math.isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is list:
        return all(_plain(v, depth + 1) for v in value)
    if kind is dict:
        return TYPED not in value and all(
            type(k) is str and _utf8(k) and _plain(v, depth + 1) for k, v in value.items()
        )
    return False


def _key_ok(key: str) -> bool:
    """A key the API accepts (execution and checkpoint keys, task ids, channels)."""
    return 1 <= len(key) <= _KEY_MAX and _utf8(key) and not any(_control(c) for c in key)


def _control(c: str) -> bool:
    return c < " " or "\x7f" <= c <= "\x9f"


def _text(s: str, limit: int) -> str:
    """``s`` without control characters, at most ``limit`` characters."""
    return "".join(" " if _control(c) else c for c in s)[:limit]


# ---- metadata ----


def _json_str(s: str) -> str | None:
    return json.dumps(s, ensure_ascii=False) if _utf8(s) else None


def _index_value(value: Any) -> str | None:
    """How a stored scalar is indexed: equal Python scalars get equal strings (``3`` and
    ``3.0`` both ``"3"``), except booleans (``"true"``) and None (``"null"``)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is str:
        return _json_str(value)
    if kind is int:
        return str(value) if value.bit_length() <= 1024 else None
    if kind is float:
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    return None


def _filter_value(value: Any) -> str | None:
    """The indexed string every stored value equal to ``value`` has, or None when the
    server cannot filter on it (None matches a missing key; ``True == 1 == 1.0``)."""
    kind = type(value)
    if kind is str:
        return _json_str(value)
    if kind is int and value not in (0, 1):
        return _index_value(value)
    if kind is float and math.isfinite(value) and value not in (0.0, 1.0):
        return _index_value(value)
    return None


def _indexable_key(key: Any) -> bool:
    return (
        type(key) is str
        and key not in _RESERVED
        and 1 <= len(key) <= _KEY_CHARS
        and _utf8(key)
        and not any(c < " " for c in key)
    )


def _ns_value(ns: str) -> str:
    """The namespace as the Cairn metadata holds it: JSON, or a digest when too long."""
    value = _json_str(ns)
    if value is None or len(value) > _VALUE_CHARS:
        return "sha256:" + hashlib.sha256(ns.encode("utf-8", "surrogatepass")).hexdigest()
    return value


def _entry_bytes(key: str, value: str) -> int:
    """Bytes of ``"key":"value",`` in compact JSON."""
    return len(json.dumps({key: value}, separators=(",", ":"), ensure_ascii=False).encode()) - 1


def _index(ns: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """The Cairn metadata of a checkpoint: the namespace, then the scalar LangGraph
    metadata that fits (``source``, ``step``, ``run_id`` first); the partial flag when
    some that could be filtered on did not fit."""
    index = {NS_KEY: _ns_value(ns)}
    size = 2 + _entry_bytes(NS_KEY, index[NS_KEY])
    first = [k for k in _FIRST_KEYS if k in metadata]
    partial = False
    for key in first + sorted(k for k in metadata if k not in _FIRST_KEYS and isinstance(k, str)):
        if not _indexable_key(key):
            continue
        value = metadata[key]
        if type(value) in (dict, list, tuple, set, frozenset, bytes, bytearray):
            continue  # never equal to a scalar filter
        text = _index_value(value)
        if text is None:
            partial = True  # an object that may equal a scalar (an enum, numpy, Decimal)
            continue
        if len(text) > _VALUE_CHARS:
            continue  # equal to no filter value that fits
        grown = size + _entry_bytes(key, text)
        if len(index) >= _MAX_KEYS - 1 or grown > _MAX_BYTES:
            partial = True
            continue
        index[key], size = text, grown
    if partial:
        index[PARTIAL_KEY] = "true"
    return index


def _name(metadata: Mapping[str, Any], ns: str) -> str | None:
    source, step = metadata.get("source"), metadata.get("step")
    if not isinstance(source, str) or type(step) is not int:
        return None
    name = f"{source} {step}" + (f" in {ns}" if ns else "")
    return _text(name, 200).strip() or None


def _matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(metadata.get(k) == v for k, v in filter.items())


def _server_filter(filter: Mapping[str, Any] | None) -> dict[str, str]:
    """The part of a metadata filter the server can apply exactly."""
    out: dict[str, str] = {}
    for key, value in (filter or {}).items():
        text = _filter_value(value)
        if _indexable_key(key) and text is not None and len(text) <= _VALUE_CHARS:
            out[key] = text
    return out


# ---- status ----


@dataclass(frozen=True)
class _Stop:
    """A pause or failure the saver applied (and applies again to a late write)."""

    action: str  # "pause" or "fail"
    failure: dict[str, Any] | None = None
    #: A failure only because the task was cancelled (another task of the step failed).
    cancelled: bool = False

    def outranks(self, other: _Stop | None) -> bool:
        """Whether this stop replaces ``other``: a real error replaces an interrupt or a
        cancellation; nothing else replaces the first."""
        if other is None:
            return True
        return self.action == "fail" and not self.cancelled and (other.action == "pause" or other.cancelled)


@dataclass
class _Thread:
    """What the saver knows of a thread's execution."""

    execution_id: str
    status: str
    #: The pause or failure the saver applied in the current run.
    stop: _Stop | None = None
    #: One to apply once the thread's writes under way have finished.
    pending: _Stop | None = None


def _failure(value: Any, task_id: str) -> dict[str, Any]:
    """The ``fail`` body for a value written to the ERROR channel."""
    if isinstance(value, BaseException):
        body = failure_of(value)
        if value.__traceback__ is None:
            body["details"].pop("traceback", None)
        if not _ERROR_TYPE.fullmatch(body["error_type"]):
            body["error_type"] = "AGENT_ERROR"
    else:
        message = _text(str(value), 4096).strip() or "the task failed"
        body = {"error_type": "AGENT_ERROR", "message": message, "details": {}}
    body["details"].update(task_id=task_id, channel=ERROR)
    return body


def _cancelled(value: Any) -> bool:
    return isinstance(value, (asyncio.CancelledError, concurrent.futures.CancelledError))


def _transition(ns: str, writes: Sequence[tuple[str, Any]], task_id: str) -> _Stop | None:
    """What storing these writes does to the execution."""
    if ns:
        return None  # the parent task writes the same to the root namespace
    channels = {channel for channel, _ in writes}
    if ERROR in channels and ERROR_SOURCE_NODE not in channels:
        value = next(v for c, v in writes if c == ERROR)
        return _Stop("fail", _failure(value, task_id), cancelled=_cancelled(value))
    if INTERRUPT in channels:
        return _Stop("pause")
    return None


# ---- the IO a flow asks for ----


@dataclass(frozen=True)
class _Page:
    """One page of a list."""

    spec: specs.ListSpec[Any]
    after: str | None = None


@dataclass(frozen=True)
class _Delete:
    """``executions.delete`` (its DELETE loop)."""

    execution_id: str


@dataclass(frozen=True)
class _Out:
    """An item a listing flow yields to its caller."""

    item: CheckpointTuple


_Op = specs.Spec[Any] | _Page | _Delete
_Flow = Generator[_Op, Any, T]
_Listing = Generator[_Op | _Out, Any, None]


def _perform(client: Cairn, op: _Op) -> Any:
    if isinstance(op, _Page):
        return client.api.page(op.spec, op.after)
    if isinstance(op, _Delete):
        client.executions.delete(op.execution_id)
        return None
    return client.api.answer(op)


async def _aperform(client: AsyncCairn, op: _Op) -> Any:
    if isinstance(op, _Page):
        return await client.api.page(op.spec, op.after)
    if isinstance(op, _Delete):
        await client.executions.delete(op.execution_id)
        return None
    return await client.api.answer(op)


class CairnSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer on Cairn (see :mod:`cairn.langgraph`).

    ``client`` and ``async_client`` default to ``Cairn()`` from the environment
    (``CAIRN_API_KEY``, ``CAIRN_API_URL``); when only one is given, the other is made
    with its settings. ``workflow`` is a workflow id (``wf_...``) or name. ``serde``
    serializes the values that are not plain JSON (LangGraph's ``JsonPlusSerializer``
    by default).
    """

    def __init__(
        self,
        client: Cairn | None = None,
        *,
        workflow: str,
        async_client: AsyncCairn | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if not workflow:
            raise ValueError("workflow must be a workflow id (wf_...) or a name")
        if client is None and async_client is None:
            client = Cairn()
            self._owned: builtins.list[Any] = [client]
        else:
            self._owned = []
        self.client = client
        self.async_client = async_client
        self.workflow = workflow
        self._workflow_id: str | None = workflow if _WORKFLOW_ID.fullmatch(workflow) else None
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._checkpoints: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._mutex = threading.Lock()
        self._putting: dict[tuple[str, str], int] = {}
        self._writing: dict[str, int] = {}
        #: Per thread: its puts and its writes being sent (not those waiting for a put).
        self._sending: dict[str, int] = {}
        self._put: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: Checkpoints whose last put failed (their writes stop waiting at once).
        self._put_failed: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, builtins.list[asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

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
        """Closes the sync client the saver made (not one it was given)."""
        for owned in self._owned:
            if isinstance(owned, Cairn):
                owned.close()

    async def aclose(self) -> None:
        """Closes the clients the saver made (not ones it was given)."""
        for owned in self._owned:
            if isinstance(owned, AsyncCairn):
                await owned.close()
            else:
                owned.close()

    # ---- drivers: a flow is a generator of API calls, run sync or async ----

    def _run(self, flow: _Flow[T]) -> T:
        client = self._sync_client()
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
                value = _perform(client, op)
            except errors.CairnError as e:
                error = e

    async def _arun(self, flow: _Flow[T]) -> T:
        client = self._async_client()
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
                value = await _aperform(client, op)
            except errors.CairnError as e:
                error = e

    def _iterate(self, flow: _Listing) -> Iterator[CheckpointTuple]:
        client = self._sync_client()
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    step = flow.send(value) if error is None else flow.throw(error)
                except StopIteration:
                    return
                value, error = None, None
                if isinstance(step, _Out):
                    yield step.item
                    continue
                try:
                    value = _perform(client, step)
                except errors.CairnError as e:
                    error = e
        finally:
            flow.close()

    async def _aiterate(self, flow: _Listing) -> AsyncIterator[CheckpointTuple]:
        client = self._async_client()
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    step = flow.send(value) if error is None else flow.throw(error)
                except StopIteration:
                    return
                value, error = None, None
                if isinstance(step, _Out):
                    yield step.item
                    continue
                try:
                    value = await _aperform(client, step)
                except errors.CairnError as e:
                    error = e
        finally:
            flow.close()

    @contextlib.contextmanager
    def _putting_checkpoint(self, thread_id: str, key: str) -> Iterator[None]:
        """Marks a ``put`` under way, then done when it stored the checkpoint (or
        failed, when no other ``put`` of it is under way)."""
        k = (thread_id, key)
        with self._mutex:
            self._putting[k] = self._putting.get(k, 0) + 1
        stored = False
        try:
            with self._sending_thread(thread_id):
                yield
            stored = True
        finally:
            with self._mutex:
                self._putting[k] -= 1
                if not self._putting[k]:
                    del self._putting[k]
                if stored:
                    self._put_failed.pop(k, None)
                    self._put[k] = None
                    while len(self._put) > _CACHE_SIZE:
                        self._put.popitem(last=False)
                elif k not in self._putting:
                    self._put_failed[k] = None
                    while len(self._put_failed) > _CACHE_SIZE:
                        self._put_failed.popitem(last=False)

    @contextlib.contextmanager
    def _counted(self, counts: dict[str, int], thread_id: str) -> Iterator[None]:
        """Counts the thread in ``counts`` while the block runs (absent at zero)."""
        with self._mutex:
            counts[thread_id] = counts.get(thread_id, 0) + 1
        try:
            yield
        finally:
            with self._mutex:
                counts[thread_id] -= 1
                if not counts[thread_id]:
                    del counts[thread_id]

    def _sending_thread(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """Counts a put or a write of the thread being sent: LangGraph starts the next
        checkpoint's ``put`` only after it, so writes waiting for that ``put`` wait on."""
        return self._counted(self._sending, thread_id)

    def _writing_thread(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """Counts a write of the thread under way (waiting for its lock included)."""
        return self._counted(self._writing, thread_id)

    def _others_writing(self, thread_id: str) -> bool:
        """Whether writes of the thread other than the current one are under way: a
        pause or failure waits for the last of them (LangGraph sends a step's writes
        concurrently, and they may reach the saver after the interrupt's)."""
        with self._mutex:
            return self._writing.get(thread_id, 0) > 1

    def _put_waits(self, unstored: _Unstored, started: float, idle_since: float) -> float | None:
        """Whether to wait more for the ``put`` of the checkpoint ``put_writes`` needs:
        None when not (it is stored, it failed, or the wait is over), else since when the
        thread has had nothing being sent (now, while it has: LangGraph stores a thread's
        checkpoints, and the writes before each, one after another)."""
        k = (unstored.thread_id, unstored.key)
        now = time.monotonic()
        with self._mutex:
            if k in self._put:
                return None
            putting, failed = k in self._putting, k in self._put_failed
            busy = unstored.thread_id in self._sending
        if now - started >= _PUT_WAIT or (failed and not putting):
            return None
        if busy:
            return now
        return idle_since if now - idle_since < _PUT_GRACE else None

    def _await_put(self, unstored: _Unstored) -> None:
        started = time.monotonic()
        idle_since = self._put_waits(unstored, started, started)
        while idle_since is not None:
            time.sleep(0.01)
            idle_since = self._put_waits(unstored, started, idle_since)

    async def _aawait_put(self, unstored: _Unstored) -> None:
        started = time.monotonic()
        idle_since = self._put_waits(unstored, started, started)
        while idle_since is not None:
            await asyncio.sleep(0.01)  # the put may run in another thread
            idle_since = self._put_waits(unstored, started, idle_since)

    def _lock(self, thread_id: str) -> threading.Lock:
        return self._locks[hash(thread_id) % _STRIPES]

    def _alock(self, thread_id: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._mutex:
            locks = self._alocks.get(loop)
            if locks is None:
                locks = [asyncio.Lock() for _ in range(_STRIPES)]
                self._alocks[loop] = locks
        return locks[hash(thread_id) % _STRIPES]

    # ---- values ----

    def _encode(self, value: Any) -> Any:
        """``value`` as JSON: as it is when plain, else typed with the serde."""
        if _plain(value):
            return value
        kind, data = self.serde.dumps_typed(value)
        return {TYPED: [kind, base64.b64encode(data).decode("ascii")]}

    def _decode(self, value: Any) -> Any:
        if type(value) is dict and len(value) == 1 and TYPED in value:
            kind, data = value[TYPED]
            return self.serde.loads_typed((kind, base64.b64decode(data)))
        return value

    def _state(
        self, checkpoint: Checkpoint, metadata: Mapping[str, Any], ns: str, parent: str | None
    ) -> dict[str, Any]:
        stored: dict[str, Any] = {}
        for field, value in checkpoint.items():
            if field == "channel_values":
                values = cast(dict[str, Any], value)
                stored[field] = {channel: self._encode(v) for channel, v in values.items()}
            else:
                stored[field] = self._encode(value)
        return {
            "format": FORMAT,
            "checkpoint_ns": ns,
            "parent_checkpoint_id": parent,
            "checkpoint": stored,
            "metadata": {key: self._encode(v) for key, v in metadata.items()},
        }

    def _tuple_of(
        self, thread_id: str, state: Any, writes: Sequence[models.CheckpointWrite]
    ) -> CheckpointTuple | None:
        if not isinstance(state, dict) or not isinstance(state.get("checkpoint"), dict):
            return None  # not a checkpoint this saver wrote
        stored: dict[str, Any] = state["checkpoint"]
        if not isinstance(stored.get("id"), str):
            return None
        checkpoint: dict[str, Any] = {}
        for field, value in stored.items():
            if field == "channel_values" and isinstance(value, dict):
                checkpoint[field] = {channel: self._decode(v) for channel, v in value.items()}
            else:
                checkpoint[field] = self._decode(value)
        metadata = {key: self._decode(v) for key, v in (state.get("metadata") or {}).items()}
        ns = state.get("checkpoint_ns") or ""
        parent = state.get("parent_checkpoint_id")
        ordered = sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.index))
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint["id"]),
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=metadata,  # type: ignore[arg-type]
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=[(w.task_id, w.channel, self._decode(w.value)) for w in ordered],
        )

    # ---- caches ----

    def _cached(self, thread_id: str) -> _Thread | None:
        with self._mutex:
            thread = self._threads.get(thread_id)
            if thread is not None:
                self._threads.move_to_end(thread_id)
            return thread

    def _remember(self, thread_id: str, execution: models.ExecutionSummary) -> _Thread:
        with self._mutex:
            thread = self._threads.get(thread_id)
            if thread is None or thread.execution_id != execution.id:
                thread = _Thread(execution.id, execution.status)
                self._threads[thread_id] = thread
                while len(self._threads) > _CACHE_SIZE:
                    self._threads.popitem(last=False)
            else:
                thread.status = execution.status
            return thread

    def _forget(self, thread_id: str) -> None:
        with self._mutex:
            thread = self._threads.pop(thread_id, None)
            if thread is not None:
                for key in [k for k in self._checkpoints if k[0] == thread.execution_id]:
                    del self._checkpoints[key]

    def _remember_checkpoint(self, execution_id: str, key: str, checkpoint_id: str) -> None:
        with self._mutex:
            self._checkpoints[(execution_id, key)] = checkpoint_id
            while len(self._checkpoints) > _CACHE_SIZE:
                self._checkpoints.popitem(last=False)

    def _forget_checkpoints(self, execution_id: str) -> None:
        with self._mutex:
            for key in [k for k in self._checkpoints if k[0] == execution_id]:
                del self._checkpoints[key]

    # ---- flows: lookups ----

    def _workflow_flow(self) -> _Flow[str]:
        if self._workflow_id is not None:
            return self._workflow_id
        spec = specs.workflows_list(None)
        after: str | None = None
        found: str | None = None
        while found is None:
            page: models.Page[models.WorkflowSummary] = yield _Page(spec, after)
            found = next((w.id for w in page.items if w.name == self.workflow), None)
            after = page.after(spec.size)
            if after is None:
                break
        if found is None:
            created: models.Workflow = yield specs.workflows_create(
                None, name=self.workflow, workflow_type="langgraph"
            )
            found = created.id
        self._workflow_id = found
        return found

    def _find(self, thread_id: str, *, fresh: bool = False) -> _Flow[_Thread | None]:
        """The thread's execution, if it has one."""
        if not fresh and (thread := self._cached(thread_id)) is not None:
            return thread
        workflow_id = yield from self._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id, key=thread_id)
        page: models.Page[models.ExecutionSummary] = yield _Page(spec)
        if not page.items:
            self._forget(thread_id)
            return None
        return self._remember(thread_id, page.items[0])

    def _by_key(self, execution_id: str, key: str) -> _Flow[models.Checkpoint | None]:
        spec = specs.checkpoints_list(None, execution_id=execution_id, key=key, limit=1)
        page: models.Page[models.Checkpoint] = yield _Page(spec)
        found = page.items[0] if page.items else None
        if found is not None:
            self._remember_checkpoint(execution_id, key, found.id)
        return found

    def _checkpoint_id(self, execution_id: str, key: str) -> _Flow[str | None]:
        """The Cairn id of the execution's checkpoint with this LangGraph id."""
        with self._mutex:
            cached = self._checkpoints.get((execution_id, key))
        if cached is not None:
            return cached
        found = yield from self._by_key(execution_id, key)
        return found.id if found is not None else None

    def _tuple(self, thread_id: str, checkpoint: models.Checkpoint) -> _Flow[CheckpointTuple | None]:
        """The LangGraph tuple of a Cairn checkpoint (None when it is gone meanwhile)."""
        try:
            full: models.Checkpoint = yield specs.checkpoints_get(None, checkpoint.id, include_state=True)
            writes: models.CheckpointWrites = yield specs.checkpoints_list_writes(None, checkpoint.id)
        except errors.NotFound:
            return None
        return self._tuple_of(thread_id, full.state, writes.items)

    # ---- flows: the status of the execution ----

    def _resume(self, thread_id: str, thread: _Thread, at: str | None) -> _Flow[bool]:
        """Makes the execution running: a replay when paused or failed. Whether it
        replayed."""
        if thread.status in ("completed", "cancelled"):
            raise ThreadEnded(
                f"thread {thread_id!r} (execution {thread.execution_id}) is {thread.status}: "
                "it takes no more checkpoints; use a new thread_id",
                status=409,
            )
        if thread.status == "running":
            return False
        point: Any = None  # from the start
        if at is not None:
            found = yield from self._by_key(thread.execution_id, at)
            point = found.id if found is not None else specs.OMIT  # else from its current checkpoint
        try:
            replayed: models.Execution = yield specs.executions_replay(
                None, thread.execution_id, checkpoint_id=point
            )
        except errors.InvalidState:
            current: models.Execution = yield specs.executions_get(None, thread.execution_id)
            thread.status = current.status
            if thread.status == "running":
                return False
            if thread.status in ("completed", "cancelled"):
                return (yield from self._resume(thread_id, thread, at))
            raise
        thread.status = replayed.status
        return True

    def _apply(self, thread: _Thread, stop: _Stop) -> _Flow[None]:
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
        self,
        thread_id: str,
        at: str | None,
        send: Callable[[_Thread], _Flow[T]],
        stop: _Stop | None = None,
        *,
        again: bool = True,
    ) -> _Flow[T]:
        """Runs ``send`` on a running execution of the thread (started, or replayed from
        ``at``), once more after a 409 or 404 (status or execution changed behind the
        saver), then applies ``stop``, or again the stop of this run after a replay."""
        thread = self._cached(thread_id)
        if thread is None:
            workflow_id = yield from self._workflow_flow()
            started: models.Execution = yield specs.executions_create(
                None, workflow_id=workflow_id, key=thread_id
            )
            thread = self._remember(thread_id, started)
        replayed = yield from self._resume(thread_id, thread, at)
        try:
            result = yield from send(thread)
        except (errors.InvalidState, errors.NotFound) as e:
            if isinstance(e, ThreadEnded) or not again:
                raise
            self._forget_checkpoints(thread.execution_id)
            try:
                current: models.Execution = yield specs.executions_get(None, thread.execution_id)
            except errors.NotFound:  # deleted behind the saver: the thread starts again
                self._forget(thread_id)
                return (yield from self._write(thread_id, at, send, stop, again=False))
            thread = self._remember(thread_id, current)
            replayed = (yield from self._resume(thread_id, thread, at)) or replayed
            result = yield from send(thread)
        if stop is not None:
            if stop.outranks(thread.pending):
                thread.pending = stop
        elif replayed and thread.stop is not None and thread.pending is None:
            thread.pending = thread.stop  # a late write of the run: its stop again
        if thread.pending is not None and not self._others_writing(thread_id):
            pending, thread.pending = thread.pending, None
            yield from self._apply(thread, pending)
        return result

    # ---- flows: the saver's methods ----

    def _put_flow(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> _Flow[RunnableConfig]:
        thread_id, ns = _thread_of(config), _ns_of(config)
        parent = get_checkpoint_id(config)
        key = str(checkpoint["id"])
        if not _key_ok(key):
            raise ValueError(f"checkpoint id {key!r} must be 1 to 256 characters without control characters")
        meta = dict(get_checkpoint_metadata(config, metadata))
        state = self._state(checkpoint, meta, ns, parent)
        index = _index(ns, meta)
        name = _name(meta, ns)

        def send(thread: _Thread) -> _Flow[models.Checkpoint]:
            stored: models.Checkpoint = yield specs.checkpoints_create(
                None,
                execution_id=thread.execution_id,
                state=state,
                name=name if name is not None else specs.OMIT,
                metadata=index,
                key=key,
            )
            if stored.metadata.get(NS_KEY) != index[NS_KEY]:
                raise ValueError(
                    f"checkpoint {key} of thread {thread_id!r} is stored in another namespace already"
                )
            self._remember_checkpoint(thread.execution_id, key, stored.id)
            return stored

        yield from self._write(thread_id, parent, send)
        return _config(thread_id, ns, key)

    def _put_writes_flow(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> _Flow[None]:
        if not writes:
            return None
        thread_id, ns = _thread_of(config), _ns_of(config)
        key = get_checkpoint_id(config)
        if not key:
            raise ValueError("put_writes needs configurable.checkpoint_id (the checkpoint the writes go to)")
        cached = self._cached(thread_id)
        if (
            cached is not None
            and cached.status == "failed"
            and cached.stop is not None
            and cached.stop.action == "fail"
            and any(c == ERROR and _cancelled(v) for c, v in writes)
        ):
            return None  # a task cancelled because another failed in this run
        items = [
            {"index": WRITES_IDX_MAP.get(channel, i), "channel": channel, "value": self._encode(value)}
            for i, (channel, value) in enumerate(writes)
        ]

        def send(thread: _Thread) -> _Flow[None]:
            checkpoint_id = yield from self._checkpoint_id(thread.execution_id, key)
            if checkpoint_id is None:
                raise _Unstored(thread_id, key)
            for start in range(0, len(items), _WRITES_PER_REQUEST):
                yield specs.checkpoints_put_writes(
                    None,
                    checkpoint_id,
                    task_id=task_id,
                    task_path=task_path,
                    writes=items[start : start + _WRITES_PER_REQUEST],
                )

        yield from self._write(thread_id, key, send, _transition(ns, writes, task_id))
        return None

    def _get_tuple_flow(self, config: RunnableConfig) -> _Flow[CheckpointTuple | None]:
        thread_id, ns = _thread_of(config), _ns_of(config)
        key = get_checkpoint_id(config)
        if not ns and (cached := self._cached(thread_id)) is not None:
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
                        metadata={NS_KEY: _ns_value(ns)},
                        limit=1,
                    )
                    page: models.Page[models.Checkpoint] = yield _Page(spec)
                    found = page.items[0] if page.items else None
            except errors.NotFound:
                continue  # the execution went: look the thread up again
            if found is None or found.metadata.get(NS_KEY) != _ns_value(ns):
                return None
            tup = yield from self._tuple(thread_id, found)
            if tup is None or tup.config["configurable"]["checkpoint_ns"] != ns:
                return None
            return tup
        return None

    def _list_flow(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Listing:
        if limit is not None and limit <= 0:
            return
        left = [limit]
        configurable = (config or {}).get("configurable") or {}
        ns = configurable.get("checkpoint_ns")
        if configurable.get("thread_id") is not None:
            thread_id = _thread_of(cast(RunnableConfig, config))
            key = get_checkpoint_id(cast(RunnableConfig, config))
            for fresh in (False, True):
                thread = yield from self._find(thread_id, fresh=fresh)
                if thread is None:
                    return
                if not (yield from self._list_thread(thread_id, thread, ns, key, filter, before, left)):
                    return
            return
        workflow_id = yield from self._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id)
        after: str | None = None
        while True:
            page: models.Page[models.ExecutionSummary] = yield _Page(spec, after)
            for execution in page.items:
                if execution.key is None:
                    continue
                thread = self._remember(execution.key, execution)
                yield from self._list_thread(execution.key, thread, ns, None, filter, before, left)
                if left[0] == 0:
                    return
            after = page.after(spec.size)
            if after is None:
                return

    def _list_thread(
        self,
        thread_id: str,
        thread: _Thread,
        ns: str | None,
        key: str | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        left: builtins.list[int | None],
    ) -> Generator[_Op | _Out, Any, bool]:
        """The thread's checkpoints, newest first; ``left[0]``: how many more to yield.
        True when the execution was not found before any was yielded (deleted behind the
        saver: look the thread up again)."""
        produced = False
        execution_id = thread.execution_id
        server = _server_filter(filter)
        metadata = dict(server)
        if ns is not None:
            metadata[NS_KEY] = _ns_value(ns)
        before_key = get_checkpoint_id(before) if before else None
        starting_after: str | None = None
        older_than: str | None = None  # compare LangGraph ids when the cursor is not stored
        try:
            if before_key:
                cursor = yield from self._by_key(execution_id, before_key)
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
                    page: models.Page[models.Checkpoint] = yield _Page(extra, after)
                    partial.extend(page.items)
                    after = page.after(extra.size)
                    if after is None:
                        break
            seen: set[str] = set()
            after = None
            while True:
                page = yield _Page(spec, after)
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
                    tup = yield from self._tuple(thread_id, checkpoint)
                    if tup is None or not _matches(tup.metadata, filter):
                        continue
                    if ns is not None and tup.config["configurable"]["checkpoint_ns"] != ns:
                        continue
                    yield _Out(tup)
                    produced = True
                    if left[0] is not None:
                        left[0] -= 1
                        if left[0] == 0:
                            return False
                if last:
                    return False
                after = following
        except errors.NotFound:
            self._forget(thread_id)  # the execution went
            return not produced
        return False

    def _delete_flow(self, thread_id: str) -> _Flow[None]:
        thread = yield from self._find(thread_id, fresh=True)
        if thread is None:
            return None
        with contextlib.suppress(errors.NotFound):
            yield _Delete(thread.execution_id)
        self._forget(thread_id)
        return None

    def _copy_flow(self, source: str, target: str) -> _Flow[None]:
        thread = yield from self._find(source, fresh=True)
        if thread is None:
            return None
        spec = specs.checkpoints_list(None, execution_id=thread.execution_id, order="asc")
        after: str | None = None
        while True:
            page: models.Page[models.Checkpoint] = yield _Page(spec, after)
            for checkpoint in page.items:
                if checkpoint.key is not None:
                    yield from self._copy_one(target, checkpoint)
            after = page.after(spec.size)
            if after is None:
                return None

    def _copy_one(self, target: str, checkpoint: models.Checkpoint) -> _Flow[None]:
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

        def send(thread: _Thread) -> _Flow[None]:
            stored: models.Checkpoint = yield specs.checkpoints_create(
                None,
                execution_id=thread.execution_id,
                state=state,
                name=checkpoint.name if checkpoint.name is not None else specs.OMIT,
                metadata=checkpoint.metadata,
                key=key,
            )
            self._remember_checkpoint(thread.execution_id, key, stored.id)
            for (task_id, task_path), items in by_task.items():
                for start in range(0, len(items), _WRITES_PER_REQUEST):
                    yield specs.checkpoints_put_writes(
                        None,
                        stored.id,
                        task_id=task_id,
                        task_path=task_path,
                        writes=items[start : start + _WRITES_PER_REQUEST],
                    )

        yield from self._write(target, parent if isinstance(parent, str) else None, send)
        return None

    def _checkpoints_of(
        self, execution_id: str, metadata: Mapping[str, str] | None = None
    ) -> _Flow[builtins.list[models.Checkpoint]]:
        """Every checkpoint of the execution, newest first (with a metadata filter)."""
        spec = specs.checkpoints_list(
            None, execution_id=execution_id, order="desc", metadata=metadata or None
        )
        found: builtins.list[models.Checkpoint] = []
        after: str | None = None
        while True:
            page: models.Page[models.Checkpoint] = yield _Page(spec, after)
            found.extend(page.items)
            after = page.after(spec.size)
            if after is None:
                return found

    def _delete_checkpoints(self, execution_id: str, doomed: Sequence[models.Checkpoint]) -> _Flow[None]:
        """Deletes these checkpoints with their writes, newest first (so that the
        execution's current checkpoint moves back one at a time)."""
        for checkpoint in sorted(doomed, key=lambda c: c.sequence, reverse=True):
            with contextlib.suppress(errors.NotFound):
                yield specs.checkpoints_delete(None, checkpoint.id)
        self._forget_checkpoints(execution_id)
        return None

    def _prune_flow(self, thread_id: str, strategy: str) -> _Flow[None]:
        if strategy == "delete":
            yield from self._delete_flow(thread_id)
            return None
        if strategy != "keep_latest":
            raise ValueError(f"strategy must be 'keep_latest' or 'delete', not {strategy!r}")
        thread = yield from self._find(thread_id, fresh=True)
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

    def _delete_runs_flow(self, run_ids: Sequence[str]) -> _Flow[None]:
        """The checkpoints whose metadata names one of the runs, in every thread of the
        workflow: LangGraph names runs without their threads, and Cairn indexes
        checkpoints per execution, so this reads each thread (once per run)."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return None
        workflow_id = yield from self._workflow_flow()
        spec = specs.executions_list(None, workflow_id=workflow_id)
        after: str | None = None
        while True:
            page: models.Page[models.ExecutionSummary] = yield _Page(spec, after)
            for execution in page.items:
                if execution.key is None:
                    continue
                doomed: dict[str, models.Checkpoint] = {}
                for run_id in sorted(wanted):
                    value = _index_value(run_id)
                    if value is None:
                        continue
                    for checkpoint in (yield from self._checkpoints_of(execution.id, {"run_id": value})):
                        doomed[checkpoint.id] = checkpoint
                # Checkpoints whose metadata did not all fit are checked one by one.
                for checkpoint in (yield from self._checkpoints_of(execution.id, {PARTIAL_KEY: "true"})):
                    if checkpoint.id in doomed:
                        continue
                    tup = yield from self._tuple(execution.key, checkpoint)
                    if tup is not None and tup.metadata.get("run_id") in wanted:
                        doomed[checkpoint.id] = checkpoint
                yield from self._delete_checkpoints(execution.id, builtins.list(doomed.values()))
            after = page.after(spec.size)
            if after is None:
                return None

    def _complete_flow(self, config: RunnableConfig, output: Any) -> _Flow[models.Execution]:
        thread_id = _thread_of(config)
        thread = yield from self._find(thread_id, fresh=True)
        if thread is None:
            raise errors.NotFound(f"thread {thread_id!r} has no execution", status=404, code="not_found")
        output = specs.OMIT if output is None else specs.jsonable(output, "the output")
        done: models.Execution = yield specs.executions_complete(None, thread.execution_id, output=output)
        thread.status, thread.stop = done.status, None
        return done

    # ---- BaseCheckpointSaver ----

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint (a Cairn checkpoint keyed by its id) on the thread's execution."""
        thread_id = _thread_of(config)
        with (
            self._writing_thread(thread_id),
            self._putting_checkpoint(thread_id, str(checkpoint["id"])),
            self._lock(thread_id),
        ):
            return self._run(self._put_flow(config, checkpoint, metadata))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id = _thread_of(config)
        with self._writing_thread(thread_id), self._putting_checkpoint(thread_id, str(checkpoint["id"])):
            async with self._alock(thread_id):
                return await self._arun(self._put_flow(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores a task's writes on the checkpoint of ``config``; an interrupt pauses
        the execution, an error fails it (see the module's documentation)."""
        thread_id = _thread_of(config)
        with self._writing_thread(thread_id):
            try:
                with self._sending_thread(thread_id), self._lock(thread_id):
                    self._run(self._put_writes_flow(config, writes, task_id, task_path))
            except _Unstored as unstored:
                self._await_put(unstored)
                try:
                    with self._sending_thread(thread_id), self._lock(thread_id):
                        self._run(self._put_writes_flow(config, writes, task_id, task_path))
                except _Unstored as again:
                    raise again.not_found() from None

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id = _thread_of(config)
        with self._writing_thread(thread_id):
            try:
                with self._sending_thread(thread_id):
                    async with self._alock(thread_id):
                        await self._arun(self._put_writes_flow(config, writes, task_id, task_path))
            except _Unstored as unstored:
                await self._aawait_put(unstored)
                try:
                    with self._sending_thread(thread_id):
                        async with self._alock(thread_id):
                            await self._arun(self._put_writes_flow(config, writes, task_id, task_path))
                except _Unstored as again:
                    raise again.not_found() from None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (its ``checkpoint_id``, else the newest of its
        namespace), with its pending writes; None when there is none."""
        return self._run(self._get_tuple_flow(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(self._get_tuple_flow(config))

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
        return self._iterate(self._list_flow(config, filter, before, limit))

    def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        return self._aiterate(self._list_flow(config, filter, before, limit))

    def delete_thread(self, thread_id: str) -> None:
        """Deletes the thread's execution with its checkpoints and writes (none: nothing)."""
        thread_id = _thread_key(thread_id)
        with self._lock(thread_id):
            self._run(self._delete_flow(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        thread_id = _thread_key(thread_id)
        async with self._alock(thread_id):
            await self._arun(self._delete_flow(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies a thread's checkpoints, oldest first, with their ids, metadata,
        parents and writes, to the target thread (its execution started if need be)."""
        source, target = _thread_key(source_thread_id), _thread_key(target_thread_id)
        with self._lock(target):
            self._run(self._copy_flow(source, target))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = _thread_key(source_thread_id), _thread_key(target_thread_id)
        async with self._alock(target):
            await self._arun(self._copy_flow(source, target))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: each thread keeps its newest checkpoint per namespace (with its
        writes), the others are deleted; ``delete``: the threads are deleted."""
        for thread_id in [_thread_key(t) for t in thread_ids]:
            with self._lock(thread_id):
                self._run(self._prune_flow(thread_id, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in [_thread_key(t) for t in thread_ids]:
            async with self._alock(thread_id):
                await self._arun(self._prune_flow(thread_id, strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) whose metadata names one of these
        runs, in every thread of the workflow: a read of each thread per run, so meant
        for occasional clean-up."""
        self._run(self._delete_runs_flow(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(self._delete_runs_flow(run_ids))

    def complete(self, config: RunnableConfig, output: Any = None) -> models.Execution:
        """Completes the thread's execution with ``output`` (JSON): the thread is done
        for good (later writes raise :class:`ThreadEnded`)."""
        thread_id = _thread_of(config)
        with self._lock(thread_id):
            return self._run(self._complete_flow(config, output))

    async def acomplete(self, config: RunnableConfig, output: Any = None) -> models.Execution:
        thread_id = _thread_of(config)
        async with self._alock(thread_id):
            return await self._arun(self._complete_flow(config, output))


# ---- configs ----


C = TypeVar("C", Cairn, AsyncCairn)


def _like(kind: type[C], other: Cairn | AsyncCairn) -> C:
    """A client of ``kind`` with ``other``'s settings (the saver's missing twin)."""
    s = other.api.settings
    url, retries, elapsed = s.base_url, s.max_retries, s.max_elapsed
    return kind(s.api_key, base_url=url, timeout=s.timeout, max_retries=retries, max_elapsed=elapsed)


def _thread_key(thread_id: Any) -> str:
    key = str(thread_id)
    if not _key_ok(key):
        raise ValueError(f"thread_id {key!r} must be 1 to 256 characters without control characters")
    return key


def _thread_of(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise ValueError('the config needs configurable.thread_id: {"configurable": {"thread_id": "..."}}')
    return _thread_key(thread_id)


def _ns_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
