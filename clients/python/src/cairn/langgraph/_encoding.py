"""How a LangGraph checkpoint is a Cairn checkpoint state, and back: plain JSON values as
they are, anything else typed with the saver's ``serde`` (see :mod:`cairn.langgraph`)."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import models
from ._text import utf8
from ._threads import checkpoint_config

#: The marker of a value stored with the saver's serde: ``{TYPED: [type, base64]}``.
TYPED = "__cairn_typed__"
#: The ``format`` of the states the saver writes.
FORMAT = "cairn.langgraph/1"
#: Plain JSON deeper than this is stored typed (the API parses at most 128 levels).
MAX_DEPTH = 64


def plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON that reads back as the same Python value."""
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is str:
        return utf8(value)
    if kind is int:
        return bool(-(2**63) <= value < 2**64)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if kind is list:
        return all(plain(v, depth + 1) for v in value)
    if kind is dict:
        return TYPED not in value and all(
            type(k) is str and utf8(k) and plain(v, depth + 1) for k, v in value.items()
        )
    return False


def encode(serde: SerializerProtocol, value: Any) -> Any:
    """``value`` as JSON: as it is when plain, else typed with the serde."""
    if plain(value):
        return value
    kind, data = serde.dumps_typed(value)
    return {TYPED: [kind, base64.b64encode(data).decode("ascii")]}


def decode(serde: SerializerProtocol, value: Any) -> Any:
    if type(value) is dict and len(value) == 1 and TYPED in value:
        kind, data = value[TYPED]
        return serde.loads_typed((kind, base64.b64decode(data)))
    return value


def checkpoint_state(
    serde: SerializerProtocol,
    checkpoint: Checkpoint,
    metadata: Mapping[str, Any],
    ns: str,
    parent: str | None,
) -> dict[str, Any]:
    """The Cairn checkpoint state of a LangGraph checkpoint."""
    stored: dict[str, Any] = {}
    for field, value in checkpoint.items():
        if field == "channel_values":
            values = cast(dict[str, Any], value)
            stored[field] = {channel: encode(serde, v) for channel, v in values.items()}
        else:
            stored[field] = encode(serde, value)
    return {
        "format": FORMAT,
        "checkpoint_ns": ns,
        "parent_checkpoint_id": parent,
        "checkpoint": stored,
        "metadata": {key: encode(serde, v) for key, v in metadata.items()},
    }


def checkpoint_tuple(
    serde: SerializerProtocol, thread_id: str, state: Any, writes: Sequence[models.CheckpointWrite]
) -> CheckpointTuple | None:
    """The LangGraph tuple of a Cairn checkpoint of the thread (its state and writes);
    None when the state is not one this saver wrote."""
    if not isinstance(state, dict) or not isinstance(state.get("checkpoint"), dict):
        return None
    stored: dict[str, Any] = state["checkpoint"]
    if not isinstance(stored.get("id"), str):
        return None
    checkpoint: dict[str, Any] = {}
    for field, value in stored.items():
        if field == "channel_values" and isinstance(value, dict):
            checkpoint[field] = {channel: decode(serde, v) for channel, v in value.items()}
        else:
            checkpoint[field] = decode(serde, value)
    metadata = {key: decode(serde, v) for key, v in (state.get("metadata") or {}).items()}
    ns = state.get("checkpoint_ns") or ""
    parent = state.get("parent_checkpoint_id")
    ordered = sorted(writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.index))
    return CheckpointTuple(
        config=checkpoint_config(thread_id, ns, checkpoint["id"]),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=checkpoint_config(thread_id, ns, parent) if parent else None,
        pending_writes=[(w.task_id, w.channel, decode(serde, w.value)) for w in ordered],
    )
