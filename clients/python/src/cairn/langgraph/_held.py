"""Writes held for the ``put`` that ends their step: LangGraph stores a step's writes on
the step's checkpoint, then the next checkpoint, whose parent that is. The saver holds
a step's plain writes and sends them with that ``put`` (``pending_writes`` of
``POST /checkpoints``: one request and one transaction for the step), and sends them on
their own when no such ``put`` claims them within :data:`HOLD_SECONDS`, before a read
of the thread, at ``close`` and at exit."""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

#: How long writes wait for the ``put`` that ends their step before they are sent alone.
HOLD_SECONDS = 1.0
#: How long writes for a checkpoint not stored yet are kept for it (LangGraph's savers
#: take writes before their checkpoint): sent again, less and less often, until then.
ORPHAN_SECONDS = 600.0
#: The most a ``put`` carries: the API takes 100 tasks and 1,000 writes, and about
#: 1 MiB of writes keeps a checkpoint and its writes well inside one request.
MAX_TASKS, MAX_WRITES, MAX_BYTES = 100, 1000, 1 << 20

Where = tuple[str, str, str]  # thread_id, checkpoint_ns, checkpoint id


@dataclass
class HeldTask:
    """A task's writes, by index (a task's later writes replace its earlier ones)."""

    task_id: str
    task_path: str
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    size: int = 0
    #: When it was first held.
    born: float = field(default_factory=time.monotonic)

    def writes(self) -> list[dict[str, Any]]:
        return list(self.items.values())

    def body(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "task_path": self.task_path, "writes": self.writes()}


@dataclass
class _Batch:
    since: float
    tasks: dict[str, HeldTask] = field(default_factory=dict)

    def counts(self) -> tuple[int, int, int]:
        tasks = self.tasks.values()
        return len(self.tasks), sum(len(t.items) for t in tasks), sum(t.size for t in tasks)


def fits(tasks: list[HeldTask]) -> bool:
    """Whether one ``put`` carries these writes."""
    writes, size = sum(len(t.items) for t in tasks), sum(t.size for t in tasks)
    return len(tasks) <= MAX_TASKS and writes <= MAX_WRITES and size <= MAX_BYTES


class Held:
    """The writes held per checkpoint, and the thread that sends those nobody claims."""

    def __init__(self, flush: Callable[[Where], None]) -> None:
        self._mutex = threading.Condition()
        self._batches: dict[Where, _Batch] = {}
        #: Per thread and namespace, the newest checkpoint stored (LangGraph's ids grow
        #: with time): writes for an older one have missed their ``put`` and go now.
        self._newest: dict[tuple[str, str], str] = {}
        #: Checkpoints whose writes a ``put`` took: later ones go at once.
        self._claimed: OrderedDict[Where, None] = OrderedDict()
        #: Checkpoints whose writes are being flushed (a ``put`` after them waits).
        self._flushing: set[Where] = set()
        self._flush = flush
        self._thread: threading.Thread | None = None
        self._closed = False
        _all.add(self)

    def hold(
        self, where: Where, task_id: str, task_path: str, items: list[dict[str, Any]], size: int
    ) -> bool:
        """Holds a task's writes for ``where``; False (nothing held) when the batch would
        pass what one ``put`` carries: then they go now, with what is held."""
        with self._mutex:
            if self._closed or where in self._claimed or where[2] < self._newest.get(where[:2], ""):
                return False
            batch = self._batches.get(where)
            tasks, writes, total = batch.counts() if batch is not None else (0, 0, 0)
            old = batch.tasks.get(task_id) if batch is not None else None
            if (
                (old is None and tasks + 1 > MAX_TASKS)
                or writes + len(items) > MAX_WRITES
                or total + size > MAX_BYTES
            ):
                return False
            if batch is None:
                batch = self._batches[where] = _Batch(time.monotonic())
            task = batch.tasks.setdefault(task_id, HeldTask(task_id, task_path))
            task.task_path = task_path
            task.items.update((item["index"], item) for item in items)
            task.size += size
            self._wake()
            return True

    def _wake(self) -> None:
        """Starts the timer thread, or has it look again (the mutex held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cairn-held-writes", daemon=True)
            self._thread.start()
        self._mutex.notify()

    def stored(self, where: Where) -> None:
        """Notes checkpoint ``where`` stored (by a ``put``)."""
        with self._mutex:
            if where[2] > self._newest.get(where[:2], ""):
                if len(self._newest) >= 10_000:
                    self._newest.clear()
                self._newest[where[:2]] = where[2]

    def take(self, where: Where, *, claim: bool = False) -> list[HeldTask]:
        """The writes held for ``where``, no longer held; with ``claim`` (a ``put`` of the
        checkpoint after it takes them), writes for ``where`` that come later go at once."""
        with self._mutex:
            batch = self._batches.pop(where, None)
            if claim:
                self._claimed[where] = None
                while len(self._claimed) > 10_000:
                    self._claimed.popitem(last=False)
        return list(batch.tasks.values()) if batch is not None else []

    def restore(self, where: Where, tasks: list[HeldTask], wait: float = 0.0) -> None:
        """Holds ``tasks`` again (their request failed): the next ``put`` sends them, or
        the timer, ``wait`` seconds later than it would. Writes held meanwhile for the
        same task win."""
        if not tasks:
            return
        with self._mutex:
            self._claimed.pop(where, None)
            batch = self._batches.setdefault(where, _Batch(time.monotonic() + wait))
            for task in tasks:
                batch.tasks.setdefault(task.task_id, task)
            self._wake()

    @contextlib.contextmanager
    def flushing(self, where: Where) -> Iterator[None]:
        """Marks a flush of ``where`` under way (taking, sending, restoring)."""
        with self._mutex:
            self._flushing.add(where)
        try:
            yield
        finally:
            with self._mutex:
                self._flushing.discard(where)
                self._mutex.notify_all()

    def wait_flush(self, where: Where) -> None:
        """Waits for a flush of ``where`` under way: a ``put`` after ``where`` then takes
        what it did not send, and is never stored before them."""
        with self._mutex:
            while where in self._flushing:
                self._mutex.wait()

    def is_flushing(self, where: Where) -> bool:
        with self._mutex:
            return where in self._flushing

    def held(self, thread_id: str | None = None) -> list[Where]:
        """Where writes are held (of one thread, or all)."""
        with self._mutex:
            return [w for w in self._batches if thread_id is None or w[0] == thread_id]

    def take_thread(self, thread_id: str) -> None:
        """Forgets the thread's held writes (the thread is deleted)."""
        with self._mutex:
            for where in [w for w in self._batches if w[0] == thread_id]:
                del self._batches[where]

    def flush_all(self) -> None:
        """Sends every held write now (``close``, exit)."""
        for where in self.held():
            self._send(where)

    def close(self) -> None:
        self.flush_all()
        with self._mutex:
            self._closed = True
            self._mutex.notify()

    def _send(self, where: Where) -> None:
        # A failed flush restores what it could not send: tried again later or at exit.
        with contextlib.suppress(Exception):
            self._flush(where)

    def _run(self) -> None:
        while True:
            with self._mutex:
                if self._closed or not self._batches:
                    self._thread = None  # started again by the next hold
                    return
                now = time.monotonic()
                due = [w for w, b in self._batches.items() if now - b.since >= HOLD_SECONDS]
                if not due:
                    first = min(b.since for b in self._batches.values())
                    self._mutex.wait(HOLD_SECONDS - (now - first))
                    continue
            for where in due:
                self._send(where)


_all: weakref.WeakSet[Held] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for held in list(_all):
        held.flush_all()
