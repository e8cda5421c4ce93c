"""The specs of ``/exports`` (see :mod:`cairn._specs`): the tenant's records, or one
workflow's, as gzip JSON Lines in parts, written by the service in rounds."""

from __future__ import annotations

from typing import Any

from . import models
from ._specs import Spec, model
from ._transport import call


def exports_create(_: Any, *, workflow_id: str | None = None) -> Spec[models.Export]:
    """Starts an export (``POST /exports``; needs a full key): every workflow, execution
    (then its checkpoints, with their states) and failure, or only ``workflow_id``'s.
    Follow it with ``get`` until ``status`` is ``"completed"``; ``download`` does both."""
    body = {} if workflow_id is None else {"workflow_id": workflow_id}
    return Spec(call("POST", "/exports", body=body), model(models.Export))


def exports_get(_: Any, export_id: str) -> Spec[models.Export]:
    """An export, its progress and its parts so far (``GET /exports/{id}``)."""
    return Spec(call("GET", f"/exports/{export_id}"), model(models.Export))


def _gzip(raw: Any) -> bytes:
    if not isinstance(raw, bytes):
        raise TypeError("an export part is gzip bytes")
    return raw


def exports_part(_: Any, export_id: str, number: int) -> Spec[bytes]:
    """Part ``number`` (from 1) of an export: its gzip bytes, one JSON record a line."""
    return Spec(call("GET", f"/exports/{export_id}/parts/{number}"), _gzip)
