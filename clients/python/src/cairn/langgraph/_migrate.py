""":func:`migrate`: copies LangGraph threads from any saver into another (into Cairn:
a :class:`CairnSaver`), checkpoint by checkpoint, oldest first, with their ids,
metadata, parents, channel versions and pending writes, so that a thread continues
where it was under the new saver."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ._saver import CairnSaver


@dataclass(frozen=True)
class Migrated:
    """What :func:`migrate` copied, and the threads it left alone: their Cairn execution
    had moved on (paused, failed or completed in Cairn), so history from the source
    must not change it."""

    threads: int
    checkpoints: int
    writes: int
    skipped: tuple[str, ...] = ()


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    return dict(config.get("configurable", {}))


def _tuples(source: BaseCheckpointSaver[Any], thread_ids: Sequence[str] | None) -> Iterable[CheckpointTuple]:
    if thread_ids is None:
        yield from source.list(None)
        return
    for thread_id in thread_ids:
        yield from source.list({"configurable": {"thread_id": thread_id}})


def migrate(
    source: BaseCheckpointSaver[Any],
    target: BaseCheckpointSaver[Any],
    thread_ids: Sequence[str] | None = None,
) -> Migrated:
    """Copies the threads ``thread_ids`` (default: every thread ``source.list(None)``
    finds) from ``source`` into ``target``.

    A thread's checkpoints are copied oldest first, whatever their namespace:
    ``target.put`` with the checkpoint's own id, metadata, parent and every
    channel version, then ``target.put_writes`` with its pending writes, a call per task
    in the order the source lists them. Into a :class:`CairnSaver`, a thread is one
    execution (started by its first checkpoint) and stays running: writes that hold an
    interrupt or an error are stored as history, without pausing or failing it (see
    :meth:`CairnSaver.import_tuple`); a thread whose execution is no longer running (it
    moved on in Cairn) is left alone and named in ``skipped``. Nothing is deleted from
    ``source``. Running it again copies nothing twice (a :class:`CairnSaver` stores a
    checkpoint id once, and a task's writes under the same keys)."""
    by_thread: dict[str, list[CheckpointTuple]] = defaultdict(list)
    for t in _tuples(source, thread_ids):
        by_thread[str(_configurable(t.config)["thread_id"])].append(t)
    checkpoints = writes = 0
    skipped: list[str] = []
    for thread_id, found in sorted(by_thread.items()):
        # Oldest first across the thread's namespaces, as they were made: a saver lists
        # newest first, and LangGraph's ids (uuid6) grow with time.
        for t in sorted(found, key=lambda t: str(t.checkpoint["id"])):
            if isinstance(target, CairnSaver):
                if not target.import_tuple(t):
                    skipped.append(thread_id)
                    break
            else:
                parent = _configurable(t.parent_config) if t.parent_config else {}
                c = _configurable(t.config)
                config: RunnableConfig = {
                    "configurable": {"thread_id": thread_id, "checkpoint_ns": c.get("checkpoint_ns", "")}
                }
                if parent.get("checkpoint_id"):
                    config["configurable"]["checkpoint_id"] = parent["checkpoint_id"]
                versions = dict(t.checkpoint.get("channel_versions", {}))
                stored = target.put(config, t.checkpoint, t.metadata, versions)
                by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
                for task_id, channel, value in t.pending_writes or []:
                    by_task[task_id].append((channel, value))
                for task_id, task_writes in by_task.items():
                    target.put_writes(stored, task_writes, task_id)
            checkpoints += 1
            writes += len(t.pending_writes or [])
    copied = len(by_thread) - len(skipped)
    return Migrated(threads=copied, checkpoints=checkpoints, writes=writes, skipped=tuple(skipped))
