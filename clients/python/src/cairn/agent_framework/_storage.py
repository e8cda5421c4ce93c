"""Agent Framework's ``CheckpointStorage`` on Cairn.

An Agent Framework workflow name is a Cairn execution keyed by that name (in the Cairn
workflow ``workflow``), and each framework checkpoint a Cairn checkpoint keyed by the
framework's checkpoint id, its state the checkpoint as the framework encodes it (JSON,
with pickled values in base64) and an HMAC-SHA256 signature of it. A checkpoint is
found by its id alone with ``GET /checkpoints?workflow_id=…&key=…``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import traceback
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from agent_framework import (
    Workflow,
    WorkflowCheckpoint,
    WorkflowCheckpointException,
    WorkflowErrorDetails,
    WorkflowEvent,
)

# The framework's own encoding, as its FileCheckpointStorage uses it (pinned by the extra).
from agent_framework._workflows._checkpoint_encoding import decode_checkpoint_value, encode_checkpoint_value

from cairn import AsyncCairn, errors, models
from cairn._keyed import ExecutionEnded, KeyedExecutions, usable_key

#: What a signature starts with: the scheme, so that another can follow.
_SCHEME = "hmac-sha256="
#: The message a default signing secret is derived with from the client's API key.
_DERIVATION = b"cairn.agent_framework: the key that signs workflow checkpoints"
#: Checkpoints whose states a listing reads at once.
_READS_AT_ONCE = 8


def _canonical(encoded: Any) -> bytes:
    """The bytes a signature covers: the encoded checkpoint as canonical JSON (sorted
    keys, no spaces), which the JSON Cairn stores and returns gives back whole."""
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class CairnCheckpointStorage:
    """Agent Framework's workflow checkpoint storage on Cairn.

    Pass it where the framework takes a storage: ``WorkflowBuilder(...,
    checkpoint_storage=storage)`` or ``workflow.run(..., checkpoint_storage=storage)``;
    resume with ``workflow.run(checkpoint_id=..., checkpoint_storage=storage)``.

    - ``client``: an :class:`~cairn.AsyncCairn` (default: one made from the environment,
      ``CAIRN_API_URL`` and ``CAIRN_API_KEY``).
    - ``workflow``: the Cairn workflow (an id, or a name: found, else created).
    - ``signing_secret``: signs every checkpoint written and is required of every
      checkpoint read, since decoding one may unpickle values (default: derived from the
      client's API key, so a checkpoint written under another key is refused: pass one
      secret to every process that shares checkpoints, and keep it as you keep the key).
    - ``allowed_checkpoint_types``: further ``"module:qualname"`` types decoding may make,
      as for the framework's ``FileCheckpointStorage``.
    - ``tags``: tags every execution it starts gets (see ``Cairn.executions.create``), to
      find them again by tag.

    Cairn decides where a run resumes: :meth:`get_latest` is the execution's current
    checkpoint, which a replay or rollback (dashboard, ``cairn``, the API) moves.
    """

    def __init__(
        self,
        client: AsyncCairn | None = None,
        *,
        workflow: str = "agent-framework",
        signing_secret: str | bytes | None = None,
        allowed_checkpoint_types: list[str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client if client is not None else AsyncCairn()
        self._runs = KeyedExecutions(self._client, workflow, "custom", "agent-framework", tags)
        if signing_secret is None:
            api_key = self._client._settings.api_key.encode()
            secret = hmac.new(api_key, _DERIVATION, hashlib.sha256).digest()
        else:
            secret = signing_secret.encode() if isinstance(signing_secret, str) else signing_secret
        if not secret:
            raise ValueError("signing_secret must not be empty")
        self._secret = secret
        self._allowed_types = frozenset(allowed_checkpoint_types or [])

    # ---- the framework's CheckpointStorage ----

    async def save(self, checkpoint: WorkflowCheckpoint) -> str:
        """Stores ``checkpoint`` as a checkpoint of its workflow name's execution, keyed by
        its id, and returns the id. Saving an id again with other content replaces it."""
        encoded = encode_checkpoint_value(checkpoint.to_dict())
        try:  # refuse at save time what could not be loaded, as FileCheckpointStorage does
            decode_checkpoint_value(encoded, allowed_types=self._allowed_types)
        except Exception as e:
            raise WorkflowCheckpointException(
                f"Checkpoint {checkpoint.checkpoint_id} cannot be restored under this storage's "
                "allowed types; refusing to save."
            ) from e
        signature = self._sign(encoded)
        state = {"checkpoint": encoded, "signature": signature}
        # The signature in the metadata too: a key already taken answers the checkpoint as
        # recorded, which is this one exactly when the signatures match.
        metadata = {
            "signature": signature,
            "workflow_name": checkpoint.workflow_name[:500],
            "iteration": str(checkpoint.iteration_count),
            "graph_signature_hash": checkpoint.graph_signature_hash[:500],
        }
        if checkpoint.previous_checkpoint_id is not None:
            metadata["previous_checkpoint_id"] = checkpoint.previous_checkpoint_id[:500]
        name = checkpoint.workflow_name
        async with self._runs.lock(name):
            for _ in range(2):
                try:
                    written = await self._runs.write(
                        name,
                        state,
                        checkpoint_name=f"superstep {checkpoint.iteration_count}",
                        metadata=metadata,
                        key=checkpoint.checkpoint_id,
                        resume_from=checkpoint.previous_checkpoint_id,
                    )
                except ExecutionEnded as e:
                    raise WorkflowCheckpointException(str(e)) from e
                if written.metadata.get("signature") == signature:
                    return checkpoint.checkpoint_id
                # The id was saved before with other content: replaced.
                await self._client.checkpoints.delete(written.id)
        raise WorkflowCheckpointException(f"Checkpoint {checkpoint.checkpoint_id} could not be saved")

    async def load(self, checkpoint_id: str) -> WorkflowCheckpoint:
        """The checkpoint ``checkpoint_id`` (two requests: its key, then its state).

        Raises ``WorkflowCheckpointException`` when there is none, or when it is not
        signed with this storage's secret."""
        found = await self._find(checkpoint_id)
        if found is None:
            raise WorkflowCheckpointException(f"No checkpoint found with ID {checkpoint_id}")
        try:
            full = await self._client.checkpoints.get(found.id, include_state=True)
        except errors.NotFound:
            raise WorkflowCheckpointException(f"No checkpoint found with ID {checkpoint_id}") from None
        checkpoint = self._open(full)
        if checkpoint.checkpoint_id != checkpoint_id:
            raise WorkflowCheckpointException(
                f"Cairn checkpoint {full.id} (key {checkpoint_id}) holds checkpoint "
                f"{checkpoint.checkpoint_id}"
            )
        return checkpoint

    async def list_checkpoints(self, *, workflow_name: str) -> list[WorkflowCheckpoint]:
        """Every checkpoint of ``workflow_name`` that this storage can open, oldest first."""
        listed = await self._listed(workflow_name)
        gate = asyncio.Semaphore(_READS_AT_ONCE)

        async def read(summary: models.Checkpoint) -> WorkflowCheckpoint | None:
            async with gate:
                try:
                    return self._open(await self._client.checkpoints.get(summary.id, include_state=True))
                except (errors.NotFound, WorkflowCheckpointException):
                    return None  # deleted meanwhile, or not this storage's to open

        read_all = await asyncio.gather(*(read(c) for c in listed))
        return [c for c in read_all if c is not None]

    async def list_checkpoint_ids(self, *, workflow_name: str) -> list[str]:
        """The ids of ``workflow_name``'s checkpoints, oldest first (their keys; their
        states are not read)."""
        return [c.key for c in await self._listed(workflow_name) if c.key is not None]

    async def get_latest(self, *, workflow_name: str) -> WorkflowCheckpoint | None:
        """The execution's current checkpoint: the newest one saved, or the point of a
        replay or rollback made since. None when there is none."""
        current = await self._runs.current(workflow_name)
        return None if current is None else self._open(current)

    async def delete(self, checkpoint_id: str) -> bool:
        """Deletes ``checkpoint_id``: True, or False when there is none (two requests)."""
        found = await self._find(checkpoint_id)
        if found is None:
            return False
        try:
            await self._client.checkpoints.delete(found.id)
        except errors.NotFound:
            return False
        return True

    # ---- failures ----

    async def track(
        self, workflow: Workflow | str, events: AsyncIterable[WorkflowEvent[Any]]
    ) -> AsyncIterator[WorkflowEvent[Any]]:
        """Passes on the events of a streamed run (``workflow.run(..., stream=True)``) and
        fails the workflow's execution when the run fails: ``error_type`` from the
        exception's class (``TimeoutError`` -> ``TIMEOUT_ERROR``), its message, and
        ``details`` with ``agent_name`` (the failing executor's or agent's id),
        ``exception`` (the class) and ``traceback``. What the run raises is raised again;
        a failure Cairn does not take is logged, never raised in its place."""
        name = workflow if isinstance(workflow, str) else workflow.name
        failed_in: str | None = None
        failed: WorkflowErrorDetails | None = None
        try:
            async for event in events:
                if event.type == "executor_failed":
                    failed_in = event.executor_id
                elif event.type == "failed" and event.details is not None:
                    failed = event.details  # recorded at the end, with the traceback
                yield event
        except Exception as e:
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            agent = (failed.executor_id if failed else None) or failed_in
            await self._runs.fail(name, type(e).__name__, str(e), agent, tb)
            raise
        if failed is not None:  # a failure the run reported without raising it
            agent = failed.executor_id or failed_in
            await self._runs.fail(name, failed.error_type, failed.message, agent, failed.traceback)

    # ---- Cairn ----

    async def _find(self, checkpoint_id: str) -> models.Checkpoint | None:
        """The Cairn checkpoint keyed ``checkpoint_id`` in this storage's workflow."""
        if not usable_key(checkpoint_id):
            return None  # no checkpoint has such a key
        page = await self._client.checkpoints.list(
            workflow_id=await self._runs.workflow_id(), key=checkpoint_id
        ).first_page()
        return page.items[0] if page.items else None

    async def _listed(self, workflow_name: str) -> list[models.Checkpoint]:
        execution = await self._runs.find(workflow_name)
        if execution is None:
            return []
        return [c async for c in self._client.checkpoints.list(execution_id=execution.id)]

    # ---- signing ----

    def _sign(self, encoded: Any) -> str:
        return _SCHEME + hmac.new(self._secret, _canonical(encoded), hashlib.sha256).hexdigest()

    def _open(self, checkpoint: models.Checkpoint) -> WorkflowCheckpoint:
        """The framework checkpoint a Cairn checkpoint holds, once its signature holds."""
        state = checkpoint.state or {}
        encoded, signature = state.get("checkpoint"), state.get("signature")
        if not isinstance(signature, str) or not hmac.compare_digest(signature, self._sign(encoded)):
            raise WorkflowCheckpointException(
                f"Cairn checkpoint {checkpoint.id} is not signed with this storage's secret: it was not "
                "written by CairnCheckpointStorage with this signing_secret (or API key), and is not decoded"
            )
        decoded = decode_checkpoint_value(encoded, allowed_types=self._allowed_types)
        return WorkflowCheckpoint.from_dict(decoded)
