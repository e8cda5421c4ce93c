"""The specs of ``/workflows`` (see :mod:`cairn._specs`): what tenants register and
start executions of."""

from __future__ import annotations

from typing import Any

from . import models
from ._specs import OMIT, ListSpec, Spec, _body, _clean, _nothing, model
from ._transport import call


def _retention(value: models.WorkflowRetention | dict[str, Any] | None) -> Any:
    """A workflow's own retention as the API takes it (``OMIT`` and ``None`` as given)."""
    if isinstance(value, models.WorkflowRetention):
        return value.model_dump(mode="json")
    return value


def workflows_create(
    _: Any,
    *,
    name: str,
    workflow_type: models.WorkflowType,
    description: str | None = OMIT,
    definition: dict[str, Any] | None = OMIT,
    metadata: dict[str, str] | None = OMIT,
    status: models.WorkflowStatus | None = OMIT,
    retention: models.WorkflowRetention | dict[str, Any] | None = OMIT,
    idempotency_key: str | None = None,
) -> Spec[models.Workflow]:
    """Registers a workflow (``POST /workflows``); ``retention``: its own, used instead
    of the tenant's when its executions end (``ValidationFailed`` beyond the plan)."""
    body = _body(
        name=name,
        workflow_type=workflow_type,
        description=description,
        definition=definition,
        metadata=metadata,
        status=status,
        retention=_retention(retention),
    )
    return Spec(
        call("POST", "/workflows", body=body, idempotency_key=idempotency_key), model(models.Workflow)
    )


def workflows_get(_: Any, workflow_id: str) -> Spec[models.Workflow]:
    """One workflow (``GET /workflows/{id}``)."""
    return Spec(call("GET", f"/workflows/{workflow_id}"), model(models.Workflow))


def workflows_update(
    _: Any,
    workflow_id: str,
    *,
    name: str = OMIT,
    description: str | None = OMIT,
    workflow_type: models.WorkflowType = OMIT,
    definition: dict[str, Any] | None = OMIT,
    metadata: dict[str, str] = OMIT,
    status: models.WorkflowStatus = OMIT,
    retention: models.WorkflowRetention | dict[str, Any] | None = OMIT,
    if_version: int | None = None,
) -> Spec[models.Workflow]:
    """Changes a workflow (``PUT /workflows/{id}``); ``if_version`` sends ``If-Match``;
    ``retention=None`` takes its own retention away (the tenant's applies)."""
    body = _body(
        name=name,
        description=description,
        workflow_type=workflow_type,
        definition=definition,
        metadata=metadata,
        status=status,
        retention=_retention(retention),
    )
    headers = {"If-Match": f'"{if_version}"'} if if_version is not None else None
    return Spec(call("PUT", f"/workflows/{workflow_id}", body=body, headers=headers), model(models.Workflow))


def workflows_delete(_: Any, workflow_id: str, *, if_version: int | None = None) -> Spec[None]:
    """Deletes a workflow (``DELETE /workflows/{id}``)."""
    headers = {"If-Match": f'"{if_version}"'} if if_version is not None else None
    return Spec(call("DELETE", f"/workflows/{workflow_id}", headers=headers), _nothing)


def workflows_list(
    _: Any,
    *,
    status: models.WorkflowStatus | None = None,
    workflow_type: models.WorkflowType | None = None,
    name: str | None = None,
    page_size: int = 100,
) -> ListSpec[models.WorkflowSummary]:
    """The workflows, newest first (``GET /workflows``); ``name``: only that exact name."""
    params = _clean({"status": status, "workflow_type": workflow_type, "name": name})
    return ListSpec("/workflows", params, "page_size", page_size, models.WorkflowSummary)
