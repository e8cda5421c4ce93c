"""The saver's traffic: which puts and writes of each thread are under way, so that a
thread's writes wait for the ``put`` of their checkpoint (LangGraph sends a step's
writes without waiting for it) and a pause or failure waits for the thread's other
writes; and the per-thread locks that keep a thread's calls in order."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator

from .. import errors
from ._threads import CACHE_SIZE

_STRIPES = 64
#: How long ``put_writes`` waits for the ``put`` of its checkpoint: at most
#: ``_PUT_WAIT`` in all, and ``_PUT_GRACE`` since the thread last had a put or write
#: being sent (LangGraph starts a checkpoint's ``put`` once the one before and its
#: writes are stored, so a thread whose puts run behind its steps sends until its
#: writes' checkpoint is in). Not at all once that ``put`` failed.
_PUT_GRACE, _PUT_WAIT = 2.0, 300.0


class Unstored(Exception):
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


class Traffic:
    """The puts and writes under way, per thread, and the threads' locks."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._putting: dict[tuple[str, str], int] = {}
        self._writing: dict[str, int] = {}
        #: Per thread: its puts and its writes being sent (not those waiting for a put).
        self._sending: dict[str, int] = {}
        self._put: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: Checkpoints whose last put failed (their writes stop waiting at once).
        self._put_failed: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: Per thread: the newest checkpoint id this saver stored (LangGraph's ids grow
        #: with time), so that writes for a newer one wait for its put, unlooked-up.
        self._newest: OrderedDict[str, str] = OrderedDict()
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    @contextlib.contextmanager
    def putting_checkpoint(self, thread_id: str, key: str) -> Iterator[None]:
        """Marks a ``put`` under way, then done when it stored the checkpoint (or
        failed, when no other ``put`` of it is under way)."""
        k = (thread_id, key)
        with self._mutex:
            self._putting[k] = self._putting.get(k, 0) + 1
        stored = False
        try:
            with self.sending_thread(thread_id):
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
                    while len(self._put) > CACHE_SIZE:
                        self._put.popitem(last=False)
                    if key > self._newest.get(thread_id, ""):
                        self._newest[thread_id] = key
                        self._newest.move_to_end(thread_id)
                        while len(self._newest) > CACHE_SIZE:
                            self._newest.popitem(last=False)
                elif k not in self._putting:
                    self._put_failed[k] = None
                    while len(self._put_failed) > CACHE_SIZE:
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

    def sending_thread(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """Counts a put or a write of the thread being sent: LangGraph starts the next
        checkpoint's ``put`` only after it, so writes waiting for that ``put`` wait on."""
        return self._counted(self._sending, thread_id)

    def writing_thread(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """Counts a write of the thread under way (waiting for its lock included)."""
        return self._counted(self._writing, thread_id)

    def others_writing(self, thread_id: str) -> bool:
        """Whether writes of the thread other than the current one are under way: a
        pause or failure waits for the last of them (LangGraph sends a step's writes
        concurrently, and they may reach the saver after the interrupt's)."""
        with self._mutex:
            return self._writing.get(thread_id, 0) > 1

    def ahead(self, thread_id: str, key: str) -> bool:
        """Whether checkpoint ``key`` is newer than any this saver stored for the thread
        and not stored itself: its ``put`` is still to come (LangGraph's ``async``
        durability sends a step's writes before the step's checkpoint is stored), so its
        writes wait for it rather than look it up."""
        with self._mutex:
            newest = self._newest.get(thread_id)
            return newest is not None and key > newest and (thread_id, key) not in self._put

    def _put_waits(self, unstored: Unstored, started: float, idle_since: float) -> float | None:
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

    def await_put(self, unstored: Unstored) -> None:
        started = time.monotonic()
        idle_since = self._put_waits(unstored, started, started)
        while idle_since is not None:
            time.sleep(0.01)
            idle_since = self._put_waits(unstored, started, idle_since)

    async def aawait_put(self, unstored: Unstored) -> None:
        started = time.monotonic()
        idle_since = self._put_waits(unstored, started, started)
        while idle_since is not None:
            await asyncio.sleep(0.01)  # the put may run in another thread
            idle_since = self._put_waits(unstored, started, idle_since)

    def lock(self, thread_id: str) -> threading.Lock:
        return self._locks[hash(thread_id) % _STRIPES]

    def alock(self, thread_id: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._mutex:
            locks = self._alocks.get(loop)
            if locks is None:
                locks = [asyncio.Lock() for _ in range(_STRIPES)]
                self._alocks[loop] = locks
        return locks[hash(thread_id) % _STRIPES]
