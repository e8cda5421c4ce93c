"""The specs of ``/failures/groups`` (see :mod:`cairn._specs`): the failures of one
cause, listed, read and settled together."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from . import models
from ._specs import ListSpec, Spec, _clean, model
from ._transport import call


def failures_groups(
    _: Any,
    *,
    status: models.FailureStatus | None = None,
    workflow_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = 200,
) -> ListSpec[models.FailureGroup]:
    """The failure groups, the most recently seen first (``GET /failures/groups``):
    ``created_after`` keeps groups last seen after it, ``created_before`` groups first
    seen before it."""
    params: dict[str, Any] = {"status": status, "workflow_id": workflow_id}
    params |= {"created_after": created_after, "created_before": created_before}
    return ListSpec("/failures/groups", _clean(params), "limit", limit, models.FailureGroup)


def failures_group(_: Any, group_id: str) -> Spec[models.FailureGroup]:
    """One failure group with its counts."""
    return Spec(call("GET", f"/failures/groups/{group_id}"), model(models.FailureGroup))


def failures_resolve_group(
    _: Any, group_id: str, *, idempotency_key: str | None = None
) -> Spec[models.FailureGroupSettled]:
    """Resolves the group's open failures, at most 100 a call (``remaining``: call again)."""
    c = call("POST", f"/failures/groups/{group_id}/resolve", idempotency_key=idempotency_key)
    return Spec(c, model(models.FailureGroupSettled))


def failures_ignore_group(
    _: Any, group_id: str, *, idempotency_key: str | None = None
) -> Spec[models.FailureGroupSettled]:
    """Ignores the group's open failures, at most 100 a call (``remaining``: call again)."""
    c = call("POST", f"/failures/groups/{group_id}/ignore", idempotency_key=idempotency_key)
    return Spec(c, model(models.FailureGroupSettled))
