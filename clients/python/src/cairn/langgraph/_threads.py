"""The thread/execution mapping: a LangGraph thread is the execution of the saver's
workflow whose ``key`` is the thread id, and a LangGraph checkpoint the Cairn checkpoint
of that execution whose ``key`` is the checkpoint id. Here: the thread and namespace of a
config, a config of a checkpoint, and what the saver remembers of threads and
checkpoints between calls."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from .. import errors, models
from ._status import Stop
from ._text import key_ok

#: How many threads, and how many checkpoint ids, the saver remembers (the newest).
CACHE_SIZE = 10_000


#: The thread's execution is completed or cancelled: it takes no more writes (the run
#: core's one ended error, :class:`cairn.errors.ExecutionEnded`).
ThreadEnded = errors.ExecutionEnded


def thread_key(thread_id: Any) -> str:
    key = str(thread_id)
    if not key_ok(key):
        raise ValueError(f"thread_id {key!r} must be 1 to 256 characters without control characters")
    return key


def thread_of(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise ValueError('the config needs configurable.thread_id: {"configurable": {"thread_id": "..."}}')
    return thread_key(thread_id)


def ns_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def checkpoint_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


@dataclass
class Thread:
    """What the saver knows of a thread's execution."""

    execution_id: str
    status: str
    #: The pause or failure the saver applied in the current run.
    stop: Stop | None = None
    #: One to apply once the thread's writes under way have finished.
    pending: Stop | None = None


class Memory:
    """The threads the saver has seen (their executions) and the Cairn ids of their
    checkpoints, the newest :data:`CACHE_SIZE` of each."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        self._checkpoints: OrderedDict[tuple[str, str], str] = OrderedDict()

    def thread(self, thread_id: str) -> Thread | None:
        with self._mutex:
            thread = self._threads.get(thread_id)
            if thread is not None:
                self._threads.move_to_end(thread_id)
            return thread

    def remember(self, thread_id: str, execution: models.ExecutionSummary) -> Thread:
        return self.keep(thread_id, execution.id, execution.status)

    def keep(self, thread_id: str, execution_id: str, status: str) -> Thread:
        """The thread's execution is ``execution_id``, in ``status``: its :class:`Thread`
        (a new one when it was another execution's)."""
        with self._mutex:
            thread = self._threads.get(thread_id)
            if thread is None or thread.execution_id != execution_id:
                thread = Thread(execution_id, status)
                self._threads[thread_id] = thread
                while len(self._threads) > CACHE_SIZE:
                    self._threads.popitem(last=False)
            else:
                thread.status = status
                self._threads.move_to_end(thread_id)
            return thread

    def forget(self, thread_id: str) -> None:
        with self._mutex:
            thread = self._threads.pop(thread_id, None)
            if thread is not None:
                for key in [k for k in self._checkpoints if k[0] == thread.execution_id]:
                    del self._checkpoints[key]

    def checkpoint(self, execution_id: str, key: str) -> str | None:
        """The Cairn id of the execution's checkpoint with this LangGraph id, if known."""
        with self._mutex:
            return self._checkpoints.get((execution_id, key))

    def remember_checkpoint(self, execution_id: str, key: str, checkpoint_id: str) -> None:
        with self._mutex:
            self._checkpoints[(execution_id, key)] = checkpoint_id
            while len(self._checkpoints) > CACHE_SIZE:
                self._checkpoints.popitem(last=False)

    def forget_checkpoints(self, execution_id: str) -> None:
        with self._mutex:
            for key in [k for k in self._checkpoints if k[0] == execution_id]:
                del self._checkpoints[key]
