"""The specs of recovery (see :mod:`cairn._specs`): ``/executions/bulk``, one action on
every execution a filter matches as a job the service runs in rounds, and
``/executions/{id}/replay-preview``, what a replay would run again."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from . import models
from ._specs import OMIT, ListSpec, Spec, _clean, model
from ._transport import call, query_value


def bulk_filter(
    *,
    status: models.ExecutionStatus | None = None,
    workflow_id: str | None = None,
    tags: Mapping[str, str] | None = None,
    failure_group: str | None = None,
    error_type: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> dict[str, Any]:
    """A bulk filter as the API takes it: every condition given must hold."""
    tag = [f"{k}:{v}" for k, v in (tags or {}).items()] or None
    given: dict[str, Any] = {"status": status, "workflow_id": workflow_id, "tag": tag}
    given |= {"failure_group": failure_group, "error_type": error_type}
    given |= {"created_after": created_after, "created_before": created_before}
    return {k: query_value(v) for k, v in _clean(given).items()}


def executions_bulk(
    _: Any,
    action: models.BulkAction,
    *,
    status: models.ExecutionStatus | None = None,
    workflow_id: str | None = None,
    tags: Mapping[str, str] | None = None,
    failure_group: str | None = None,
    error_type: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    idempotency_key: str | None = None,
) -> Spec[models.BulkJob]:
    """Starts a job that replays or cancels every execution the filter matches
    (``POST /executions/bulk``): each at most once, as the single action would (a replay
    costs a credit; ``PaymentRequired`` when the balance cannot pay for them all).
    ``failure_group``: executions with an open failure in the group; ``error_type``:
    executions whose error has this type. Follow it with ``bulk_job``."""
    flt = bulk_filter(
        status=status,
        workflow_id=workflow_id,
        tags=tags,
        failure_group=failure_group,
        error_type=error_type,
        created_after=created_after,
        created_before=created_before,
    )
    body = {"action": action, "filter": flt}
    c = call("POST", "/executions/bulk", body=body, idempotency_key=idempotency_key)
    return Spec(c, model(models.BulkJob))


def executions_bulk_dry_run(
    _: Any,
    action: models.BulkAction,
    *,
    status: models.ExecutionStatus | None = None,
    workflow_id: str | None = None,
    tags: Mapping[str, str] | None = None,
    failure_group: str | None = None,
    error_type: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> Spec[models.BulkDryRun]:
    """What ``bulk`` would act on, changing nothing: how many executions the filter
    matches now, what a replay of them would cost, and the first 20 of them."""
    flt = bulk_filter(
        status=status,
        workflow_id=workflow_id,
        tags=tags,
        failure_group=failure_group,
        error_type=error_type,
        created_after=created_after,
        created_before=created_before,
    )
    body = {"action": action, "filter": flt, "dry_run": True}
    return Spec(call("POST", "/executions/bulk", body=body), model(models.BulkDryRun))


def executions_bulk_job(_: Any, bulk_id: str) -> Spec[models.BulkJob]:
    """A bulk job and its progress (``GET /executions/bulk/{id}``)."""
    return Spec(call("GET", f"/executions/bulk/{bulk_id}"), model(models.BulkJob))


def executions_bulk_jobs(_: Any, *, page_size: int = 100) -> ListSpec[models.BulkJob]:
    """The bulk jobs, newest first (kept 90 days after they end)."""
    return ListSpec("/executions/bulk", {}, "page_size", page_size, models.BulkJob)


def executions_cancel_bulk(
    _: Any, bulk_id: str, *, idempotency_key: str | None = None
) -> Spec[models.BulkJob]:
    """Stops a bulk job: no round starts after; what it did stays done."""
    c = call("POST", f"/executions/bulk/{bulk_id}/cancel", idempotency_key=idempotency_key)
    return Spec(c, model(models.BulkJob))


def executions_replay_preview(
    _: Any, execution_id: str, *, checkpoint_id: str | None = OMIT
) -> Spec[models.ReplayPreview]:
    """What replaying the execution would run again, changing nothing: from its current
    checkpoint by default, from ``checkpoint_id``, or from the start with
    ``checkpoint_id=None`` (as ``replay`` takes it). Steps by checkpoint name, tool calls
    from the ``cairn.tools`` metadata."""
    params: dict[str, Any] = {}
    if checkpoint_id is None:
        params["from_start"] = "true"
    elif checkpoint_id is not OMIT:
        params["checkpoint_id"] = checkpoint_id
    c = call("GET", f"/executions/{execution_id}/replay-preview", params=params)
    return Spec(c, model(models.ReplayPreview))
