"""The checkpoint storage protocol, one suite for the framework's storages (the in-memory
and the file one, the references) and Cairn's: the same calls, the same results."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest
from agent_framework import WorkflowCheckpoint, WorkflowCheckpointException

from .conftest import MakeStorage

START = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def checkpoint(
    workflow_name: str, n: int, previous: WorkflowCheckpoint | None = None, **state: object
) -> WorkflowCheckpoint:
    """The framework's checkpoint of superstep ``n``, a second after the one before."""
    return WorkflowCheckpoint(
        workflow_name=workflow_name,
        graph_signature_hash="graph-1",
        checkpoint_id=str(uuid.uuid4()),
        previous_checkpoint_id=previous.checkpoint_id if previous else None,
        timestamp=(START + timedelta(seconds=n)).isoformat(),
        state={"step": n, **state},
        iteration_count=n,
        metadata={"superstep": n},
    )


def same(a: WorkflowCheckpoint, b: WorkflowCheckpoint) -> None:
    assert a.to_dict() == b.to_dict()


async def test_a_saved_checkpoint_loads_as_it_was(make_storage: MakeStorage) -> None:
    storage = make_storage()
    first = checkpoint("pipeline", 0, notes=["plan", "draft"], when=START, tags={"a", "b"})
    assert await storage.save(first) == first.checkpoint_id
    loaded = await make_storage().load(first.checkpoint_id)
    same(loaded, first)
    assert loaded.state["when"] == START  # a datetime, pickled and back
    assert loaded.state["tags"] == {"a", "b"}


async def test_an_unknown_id_is_refused(make_storage: MakeStorage) -> None:
    with pytest.raises(WorkflowCheckpointException):
        await make_storage().load(str(uuid.uuid4()))
    assert await make_storage().delete(str(uuid.uuid4())) is False


async def test_checkpoints_are_listed_and_latest_per_workflow_name(make_storage: MakeStorage) -> None:
    storage = make_storage()
    assert await storage.get_latest(workflow_name="pipeline") is None
    assert await storage.list_checkpoints(workflow_name="pipeline") == []
    c0 = checkpoint("pipeline", 0)
    c1 = checkpoint("pipeline", 1, c0)
    c2 = checkpoint("pipeline", 2, c1)
    other = checkpoint("other", 5)
    for c in (c0, c1, other, c2):
        await storage.save(c)
    reader = make_storage()
    listed = await reader.list_checkpoints(workflow_name="pipeline")
    assert sorted(c.checkpoint_id for c in listed) == sorted(
        [c0.checkpoint_id, c1.checkpoint_id, c2.checkpoint_id]
    )
    for found in listed:
        same(found, next(c for c in (c0, c1, c2) if c.checkpoint_id == found.checkpoint_id))
    ids = await reader.list_checkpoint_ids(workflow_name="pipeline")
    assert sorted(ids) == sorted(c.checkpoint_id for c in listed)
    latest = await reader.get_latest(workflow_name="pipeline")
    assert latest is not None
    same(latest, c2)
    assert [c.checkpoint_id for c in await reader.list_checkpoints(workflow_name="other")] == [
        other.checkpoint_id
    ]


async def test_a_deleted_checkpoint_is_gone(make_storage: MakeStorage) -> None:
    storage = make_storage()
    c0 = checkpoint("pipeline", 0)
    c1 = checkpoint("pipeline", 1, c0)
    await storage.save(c0)
    await storage.save(c1)
    assert await make_storage().delete(c1.checkpoint_id) is True
    assert await make_storage().delete(c1.checkpoint_id) is False
    with pytest.raises(WorkflowCheckpointException):
        await storage.load(c1.checkpoint_id)
    assert await storage.list_checkpoint_ids(workflow_name="pipeline") == [c0.checkpoint_id]
    latest = await storage.get_latest(workflow_name="pipeline")
    assert latest is not None
    same(latest, c0)


async def test_saving_an_id_again_replaces_it(make_storage: MakeStorage) -> None:
    storage = make_storage()
    c0 = checkpoint("pipeline", 0, draft="first")
    await storage.save(c0)
    await storage.save(c0)  # the same again: one checkpoint
    changed = WorkflowCheckpoint.from_dict({**c0.to_dict(), "state": {"draft": "second"}})
    await storage.save(changed)
    same(await make_storage().load(c0.checkpoint_id), changed)
    assert await storage.list_checkpoint_ids(workflow_name="pipeline") == [c0.checkpoint_id]


@dataclass
class NotRegistered:
    """A type of the application's that decoding may not make unless allowed."""

    value: int


async def test_a_checkpoint_that_could_not_be_restored_is_refused_at_save(
    make_storage: MakeStorage, backend: str
) -> None:
    if backend == "memory":
        pytest.skip("the in-memory storage keeps objects as they are: it encodes nothing")
    storage = make_storage()
    refused = checkpoint("pipeline", 0, value=NotRegistered(1))
    with pytest.raises(WorkflowCheckpointException):
        await storage.save(refused)
    assert await storage.list_checkpoints(workflow_name="pipeline") == []
