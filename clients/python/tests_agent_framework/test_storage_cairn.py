"""What only Cairn's storage does: the checkpoints as Cairn shows them, their signature,
the cost of a lookup by id, and the tenant's walls."""

from __future__ import annotations

import uuid

import pytest
from agent_framework import WorkflowCheckpoint, WorkflowCheckpointException

from cairn import AsyncCairn
from cairn.agent_framework import CairnCheckpointStorage

from .conftest import URL, Requests, tenant_key
from .test_storage_behaviour import checkpoint


async def test_a_workflow_name_is_an_execution_and_each_checkpoint_a_checkpoint_of_it(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    storage = CairnCheckpointStorage(async_client, workflow=workflow_name)
    c0 = checkpoint("pipeline", 0)
    c1 = checkpoint("pipeline", 1, c0)
    await storage.save(c0)
    await storage.save(c1)
    (workflow,) = [w async for w in async_client.workflows.list() if w.name == workflow_name]
    assert workflow.workflow_type == "custom"
    page = await async_client.executions.list(workflow_id=workflow.id, key="pipeline").first_page()
    (execution,) = page.items
    assert execution.status == "running"
    listed = [c async for c in async_client.checkpoints.list(execution_id=execution.id)]
    assert [(c.key, c.name, c.metadata["iteration"]) for c in listed] == [
        (c0.checkpoint_id, "superstep 0", "0"),
        (c1.checkpoint_id, "superstep 1", "1"),
    ]
    assert listed[1].metadata["previous_checkpoint_id"] == c0.checkpoint_id
    assert listed[1].parent_checkpoint_id == listed[0].id
    full = await async_client.checkpoints.get(listed[1].id, include_state=True)
    assert full.state is not None
    assert full.state["checkpoint"]["checkpoint_id"] == c1.checkpoint_id  # readable JSON
    assert full.state["signature"].startswith("hmac-sha256=")


async def test_load_and_delete_take_two_requests(
    async_client: AsyncCairn, requests_sent: Requests, workflow_name: str
) -> None:
    storage = CairnCheckpointStorage(async_client, workflow=workflow_name)
    c0 = checkpoint("pipeline", 0)
    await storage.save(c0)
    requests_sent.clear()
    await CairnCheckpointStorage(async_client, workflow=workflow_name).load(c0.checkpoint_id)
    assert requests_sent.sent == [
        "GET /api/v1/checkpoints",
        f"GET /api/v1/checkpoints/{_cairn_id(requests_sent)}",
    ]
    requests_sent.clear()
    assert await storage.delete(c0.checkpoint_id) is True
    assert len(requests_sent) == 2, requests_sent.sent
    requests_sent.clear()
    assert await storage.delete(c0.checkpoint_id) is False
    assert len(requests_sent) == 1, requests_sent.sent


def _cairn_id(requests_sent: Requests) -> str:
    return requests_sent.sent[-1].rsplit("/", 1)[-1]


async def test_a_checkpoint_not_signed_with_the_storage_secret_is_not_decoded(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    mine = CairnCheckpointStorage(async_client, workflow=workflow_name, signing_secret="s3cret")
    c0 = checkpoint("pipeline", 0)
    await mine.save(c0)
    # Another secret (or the default, derived from the API key): refused, not unpickled.
    for other in (
        CairnCheckpointStorage(async_client, workflow=workflow_name, signing_secret="other"),
        CairnCheckpointStorage(async_client, workflow=workflow_name),
    ):
        with pytest.raises(WorkflowCheckpointException, match="not signed"):
            await other.load(c0.checkpoint_id)
        assert await other.list_checkpoints(workflow_name="pipeline") == []
        assert await other.list_checkpoint_ids(workflow_name="pipeline") == [c0.checkpoint_id]

    # States written through the API with the tenant's key but without the secret: a
    # pickled value the storage would otherwise unpickle, signed with the genuine
    # checkpoint's signature, a made-up one, or none.
    execution_id = await mine._runs.execution_id("pipeline")
    (genuine,) = (await async_client.checkpoints.list(execution_id=execution_id).first_page()).items
    state = (await async_client.checkpoints.get(genuine.id, include_state=True)).state
    assert state is not None
    for signature in (state["signature"], "hmac-sha256=" + "0" * 64, None):
        forged_id = str(uuid.uuid4())
        forged = {
            **state["checkpoint"],
            "checkpoint_id": forged_id,
            "state": {"x": {"__pickled__": "gASVAAAA"}},
        }
        body = {"checkpoint": forged} if signature is None else {"checkpoint": forged, "signature": signature}
        await async_client.checkpoints.create(execution_id=execution_id, state=body, key=forged_id)
        with pytest.raises(WorkflowCheckpointException, match="not signed"):
            await mine.load(forged_id)
    # The genuine one still loads.
    assert (await mine.load(c0.checkpoint_id)).checkpoint_id == c0.checkpoint_id


async def test_a_signed_checkpoint_under_another_key_is_refused(
    async_client: AsyncCairn, workflow_name: str
) -> None:
    """A genuine signed state copied under another checkpoint id is not that checkpoint."""
    storage = CairnCheckpointStorage(async_client, workflow=workflow_name, signing_secret="s3cret")
    c0 = checkpoint("pipeline", 0)
    await storage.save(c0)
    execution_id = await storage._runs.execution_id("pipeline")
    (summary,) = (await async_client.checkpoints.list(execution_id=execution_id).first_page()).items
    state = (await async_client.checkpoints.get(summary.id, include_state=True)).state
    assert state is not None
    copied = str(uuid.uuid4())
    await async_client.checkpoints.create(execution_id=execution_id, state=state, key=copied)
    with pytest.raises(WorkflowCheckpointException, match="holds checkpoint"):
        await storage.load(copied)


async def test_another_tenant_finds_nothing(async_client: AsyncCairn, workflow_name: str) -> None:
    c0 = checkpoint("pipeline", 0)
    await CairnCheckpointStorage(async_client, workflow=workflow_name, signing_secret="shared").save(c0)
    async with AsyncCairn(tenant_key(10, name="agent-framework stranger"), base_url=URL) as stranger:
        theirs = CairnCheckpointStorage(stranger, workflow=workflow_name, signing_secret="shared")
        with pytest.raises(WorkflowCheckpointException, match="No checkpoint"):
            await theirs.load(c0.checkpoint_id)
        assert await theirs.delete(c0.checkpoint_id) is False
        assert await theirs.get_latest(workflow_name="pipeline") is None
    assert isinstance(
        await CairnCheckpointStorage(async_client, workflow=workflow_name, signing_secret="shared").load(
            c0.checkpoint_id
        ),
        WorkflowCheckpoint,
    )


def test_an_empty_secret_is_refused(async_client: AsyncCairn) -> None:
    with pytest.raises(ValueError, match="signing_secret"):
        CairnCheckpointStorage(async_client, signing_secret="")
