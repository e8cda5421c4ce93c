"""``ProcessCheckpointer``: a Semantic Kernel process's state as checkpoints of a Cairn
execution."""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any

from semantic_kernel.processes.kernel_process.kernel_process_step_state_metadata import (
    KernelProcessStateMetadata,
)

from cairn import AsyncCairn, models
from cairn._keyed import KeyedExecutions

#: A checkpoint name's longest form.
_NAME_MAX = 200


class ProcessCheckpointer:
    """Saves and loads Semantic Kernel process states in Cairn.

    - ``client``: an :class:`~cairn.AsyncCairn` (default: one made from the environment,
      ``CAIRN_API_URL`` and ``CAIRN_API_KEY``).
    - ``workflow``: the Cairn workflow (an id, or a name: found, else created as a
      ``semantic_kernel`` workflow).
    - ``tags``: tags every execution it starts gets (see ``Cairn.executions.create``), to
      find them again by tag.

    Each ``key`` (your name for the run, 1 to 256 characters) is an execution of the
    workflow; each :meth:`save` a checkpoint of it holding the process's
    ``KernelProcessStateMetadata`` as JSON (its steps' states, shown on the dashboard).
    :meth:`load` gives back the execution's **current** checkpoint, which a rollback or
    replay (dashboard, ``cairn``, the API) moves; the next :meth:`save` after a rollback
    or a failure replays the execution from there first.
    """

    def __init__(
        self,
        client: AsyncCairn | None = None,
        *,
        workflow: str = "semantic-kernel-processes",
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client if client is not None else AsyncCairn()
        self._runs = KeyedExecutions(self._client, workflow, "semantic_kernel", "semantic-kernel", tags)

    async def save(
        self, metadata: KernelProcessStateMetadata[Any], key: str, *, name: str | None = None
    ) -> models.Checkpoint:
        """The process's state as a new checkpoint of ``key``'s execution (started if it
        has none; replayed first when failed or paused), named ``name`` or after the
        process. One request once the object knows the key; the first: two."""
        state = metadata.model_dump(mode="json", by_alias=True)
        label = name or f"{metadata.name or 'process'} state"
        async with self._runs.lock(key):
            return await self._runs.write(key, state, checkpoint_name=label[:_NAME_MAX])

    async def load(self, key: str) -> KernelProcessStateMetadata[Any] | None:
        """The current checkpoint of ``key``'s execution as the process's state, for
        ``ProcessBuilder.build(state_metadata=...)``; None when there is none. Two
        requests."""
        current = await self._runs.current(key)
        if current is None or current.state is None:
            return None
        return KernelProcessStateMetadata.model_validate(current.state)

    async def fail(self, key: str, error: BaseException, *, step: str | None = None) -> None:
        """Fails ``key``'s execution with ``error`` (``error_type`` from its class,
        ``details.agent_name`` the failing ``step``, ``details.traceback``): for a run
        whose step raised (the local runtime logs it and ends the run). The next
        :meth:`save` replays the execution."""
        tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        await self._runs.fail(key, type(error).__name__, str(error), step, tb)
