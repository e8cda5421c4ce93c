"""The execution's status as the graph runs: which writes pause it (an interrupt) or
fail it (an error no handler takes), and the ``fail`` body of an error."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.types import ERROR, INTERRUPT

from ..tracing import failure_of
from ._text import text

#: LangGraph's channel of the node an error is routed to (an error handler takes it).
ERROR_SOURCE_NODE = "__error_source_node__"
_ERROR_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


@dataclass(frozen=True)
class Stop:
    """A pause or failure the saver applied (and applies again to a late write)."""

    action: str  # "pause" or "fail"
    failure: dict[str, Any] | None = None
    #: A failure only because the task was cancelled (another task of the step failed).
    cancelled: bool = False

    def outranks(self, other: Stop | None) -> bool:
        """Whether this stop replaces ``other``: a real error replaces an interrupt or a
        cancellation; nothing else replaces the first."""
        if other is None:
            return True
        return self.action == "fail" and not self.cancelled and (other.action == "pause" or other.cancelled)


def failure(value: Any, task_id: str) -> dict[str, Any]:
    """The ``fail`` body for a value written to the ERROR channel."""
    if isinstance(value, BaseException):
        body = failure_of(value)
        if value.__traceback__ is None:
            body["details"].pop("traceback", None)
        if not _ERROR_TYPE.fullmatch(body["error_type"]):
            body["error_type"] = "AGENT_ERROR"
    else:
        message = text(str(value), 4096).strip() or "the task failed"
        body = {"error_type": "AGENT_ERROR", "message": message, "details": {}}
    body["details"].update(task_id=task_id, channel=ERROR)
    return body


def cancelled(value: Any) -> bool:
    return isinstance(value, (asyncio.CancelledError, concurrent.futures.CancelledError))


def transition(ns: str, writes: Sequence[tuple[str, Any]], task_id: str) -> Stop | None:
    """What storing these writes does to the execution."""
    if ns:
        return None  # the parent task writes the same to the root namespace
    channels = {channel for channel, _ in writes}
    if ERROR in channels and ERROR_SOURCE_NODE not in channels:
        value = next(v for c, v in writes if c == ERROR)
        return Stop("fail", failure(value, task_id), cancelled=cancelled(value))
    if INTERRUPT in channels:
        return Stop("pause")
    return None
