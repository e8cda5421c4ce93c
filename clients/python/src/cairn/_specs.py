"""What each API route is asked for: one function per route, written once and served by
both the sync and the async client (see ``_resources.py``), and how an answer is read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from . import models
from ._transport import Call, call, query_value, state_size_check

R = TypeVar("R")
M = TypeVar("M", bound=models.Model)

#: An argument left out of the request (unlike ``None``, which may mean JSON null).
OMIT: Any = object()


@dataclass(frozen=True)
class Spec(Generic[R]):
    """A call and how to read its answer."""

    call: Call
    parse: Callable[[Any], R]


@dataclass(frozen=True)
class ListSpec(Generic[M]):
    """A list route: its first page's call, how to ask for the page after an id, its items."""

    path: str
    params: dict[str, Any]
    size_param: str
    size: int
    item: type[M]

    def page_call(self, after: str | None) -> Call:
        params = dict(self.params)
        params[self.size_param] = self.size
        if after is not None:
            params["starting_after"] = after
        return call("GET", self.path, params=params)


def model(cls: type[M]) -> Callable[[Any], M]:
    def parse(raw: Any) -> M:
        parsed: M = cls.from_api(raw)
        return parsed

    return parse


def read_page(item: type[M], raw: Any) -> models.Page[M]:
    """A page of a list, whose items keep the API's own JSON (:meth:`~cairn.models.Model.api_json`)."""
    page: models.Page[M] = models.Page[item].model_validate(raw)  # type: ignore[valid-type]
    for parsed, original in zip(page.items, raw.get("items", []), strict=False):
        if isinstance(original, dict):
            parsed._raw = original
    return page


def _nothing(_: Any) -> None:
    return None


def _body(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not OMIT}


def jsonable(value: Any, what: str) -> Any:
    """``value`` as JSON the API accepts: pydantic models and dataclasses are converted."""
    import dataclasses
    import json

    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{what} must be JSON (dicts, lists, strings, numbers, booleans, None): {e}"
        ) from None
    return value


# ---- executions ----


def executions_create(
    _: Any,
    *,
    workflow_id: str,
    input: Any = OMIT,
    metadata: dict[str, str] | None = OMIT,
    key: str | None = None,
    idempotency_key: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Spec[models.Execution]:
    """Starts an execution and charges it (``POST /executions``).

    ``key`` (1 to 256 characters, no control characters) is unique within the workflow:
    when an execution of ``workflow_id`` already has it, that execution is answered as
    it is now, whatever its status, and nothing is charged or changed (the rest of the
    call is ignored). ``tags`` (at most 16) stay with the execution; lists filter by them.
    """
    tagged = _given(dict(tags) if tags else None)
    body = _body(workflow_id=workflow_id, input=input, metadata=metadata, key=_given(key), tags=tagged)
    return Spec(
        call("POST", "/executions", body=body, idempotency_key=idempotency_key), model(models.Execution)
    )


def executions_get(_: Any, execution_id: str) -> Spec[models.Execution]:
    """One execution with its input and output (``GET /executions/{id}``)."""
    return Spec(call("GET", f"/executions/{execution_id}"), model(models.Execution))


def _series(
    bucket: Literal["hour", "day"], created_after: datetime | None, created_before: datetime | None
) -> dict[str, Any]:
    return _clean({"bucket": bucket, "created_after": created_after, "created_before": created_before})


def executions_stats(
    _: Any,
    *,
    bucket: Literal["hour", "day"] = "day",
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> Spec[models.ExecutionStats]:
    """Executions started (by their status now) and failures recorded per UTC hour or
    day (``GET /executions/stats``). Without a window: the last 24 hours by hour, or the
    last 30 days by day; every whole bucket the window touches is answered."""
    c = call("GET", "/executions/stats", params=_series(bucket, created_after, created_before))
    return Spec(c, model(models.ExecutionStats))


def executions_list(
    _: Any,
    *,
    status: models.ExecutionStatus | None = None,
    workflow_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    key: str | None = None,
    page_size: int = 100,
    tags: Mapping[str, str] | None = None,
) -> ListSpec[models.ExecutionSummary]:
    """The executions, newest first (``GET /executions``); with ``key`` (and ``workflow_id``)
    the one execution of the workflow with that key, if any; with ``tags``, those with all."""
    tag = [f"{k}:{v}" for k, v in (tags or {}).items()] or None
    params: dict[str, Any] = {"status": status, "workflow_id": workflow_id, "key": key, "tag": tag}
    params |= {"created_after": created_after, "created_before": created_before}
    return ListSpec("/executions", _clean(params), "page_size", page_size, models.ExecutionSummary)


def _deleted(raw: Any) -> models.ExecutionDeleted | None:
    if raw is None:
        return None
    answer: models.ExecutionDeleted = models.ExecutionDeleted.from_api(raw)
    return answer


def executions_delete(_: Any, execution_id: str) -> Spec[models.ExecutionDeleted | None]:
    """One ``DELETE /executions/{id}``: ``None`` once everything is gone (204), else the
    202 answer (the purge has more to do: send it again). ``executions.delete`` loops."""
    return Spec(call("DELETE", f"/executions/{execution_id}"), _deleted)


def _action(
    execution_id: str, action: str, body: dict[str, Any], idempotency_key: str | None
) -> Spec[models.Execution]:
    return Spec(
        call(
            "POST",
            f"/executions/{execution_id}/{action}",
            body=body,
            has_body=True,
            idempotency_key=idempotency_key,
        ),
        model(models.Execution),
    )


def executions_complete(
    _: Any, execution_id: str, *, output: Any = OMIT, idempotency_key: str | None = None
) -> Spec[models.Execution]:
    """Completes a running execution with its output."""
    return _action(execution_id, "complete", _body(output=output), idempotency_key)


def executions_fail(
    _: Any,
    execution_id: str,
    *,
    error_type: str,
    message: str,
    details: dict[str, Any] | None = OMIT,
    idempotency_key: str | None = None,
) -> Spec[models.Execution]:
    """Fails a running execution and records a failure."""
    body = _body(error_type=error_type, message=message, details=details)
    return _action(execution_id, "fail", body, idempotency_key)


def executions_pause(
    _: Any, execution_id: str, *, idempotency_key: str | None = None
) -> Spec[models.Execution]:
    """Pauses a running execution."""
    return _action(execution_id, "pause", {}, idempotency_key)


def executions_cancel(
    _: Any, execution_id: str, *, reason: str | None = OMIT, idempotency_key: str | None = None
) -> Spec[models.Execution]:
    """Cancels a running or paused execution."""
    return _action(execution_id, "cancel", _body(reason=reason), idempotency_key)


def executions_replay(
    _: Any, execution_id: str, *, checkpoint_id: str | None = OMIT, idempotency_key: str | None = None
) -> Spec[models.Execution]:
    """Replays a failed or paused execution: from its current checkpoint by default,
    from ``checkpoint_id``, or from the start with ``checkpoint_id=None``."""
    return _action(execution_id, "replay", _body(checkpoint_id=checkpoint_id), idempotency_key)


def executions_rollback(
    _: Any, execution_id: str, *, checkpoint_id: str, idempotency_key: str | None = None
) -> Spec[models.Execution]:
    """Rolls an execution back to one of its checkpoints (later ones are deleted)."""
    return _action(execution_id, "rollback", {"checkpoint_id": checkpoint_id}, idempotency_key)


# ---- checkpoints ----


def checkpoints_create(
    _: Any,
    *,
    execution_id: str,
    state: dict[str, Any],
    name: str | None = OMIT,
    metadata: dict[str, str] | None = OMIT,
    key: str | None = None,
    pending_writes: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Spec[models.Checkpoint]:
    """Records a checkpoint of a running execution (the state is checked against the
    4 MiB limit before it is sent, and sent gzip-compressed when large).

    ``key`` (1 to 256 characters, no control characters) is unique within the execution:
    a checkpoint that has it is answered, unchanged. ``pending_writes`` (``{"checkpoint_id",
    "tasks": [{"task_id", "task_path", "writes"}]}``) go to an earlier checkpoint with it.
    """
    state = jsonable(state, "a checkpoint state")
    if not isinstance(state, dict):
        raise TypeError("a checkpoint state must be a JSON object (a dict)")
    state_size_check(state)
    pending = OMIT if pending_writes is None else jsonable(dict(pending_writes), "the pending writes")
    if pending is not OMIT:
        state_size_check(pending, "the pending writes")
    given = {"name": name, "metadata": metadata, "key": _given(key), "pending_writes": pending}
    body = _body(execution_id=execution_id, state=state, **given)
    return Spec(
        call("POST", "/checkpoints", body=body, idempotency_key=idempotency_key), model(models.Checkpoint)
    )


def checkpoints_get(_: Any, checkpoint_id: str, *, include_state: bool = False) -> Spec[models.Checkpoint]:
    """One checkpoint, with its state when ``include_state``."""
    params = {"include_state": True} if include_state else None
    return Spec(call("GET", f"/checkpoints/{checkpoint_id}", params=params), model(models.Checkpoint))


def checkpoints_delete(_: Any, checkpoint_id: str) -> Spec[None]:
    """Deletes a checkpoint with its state, key and writes (``DELETE /checkpoints/{id}``);
    deleting the execution's current one makes the one before it current, or none."""
    return Spec(call("DELETE", f"/checkpoints/{checkpoint_id}"), _nothing)


def checkpoints_list(
    _: Any,
    *,
    execution_id: str | None = None,
    workflow_id: str | None = None,
    key: str | None = None,
    order: Literal["asc", "desc"] | None = None,
    metadata: Mapping[str, str] | None = None,
    starting_after: str | None = None,
    limit: int = 200,
) -> ListSpec[models.Checkpoint]:
    """An execution's checkpoints, by sequence (``GET /checkpoints``): oldest first, or
    newest first with ``order="desc"``.

    ``key`` gives the one checkpoint with that key, if any; ``metadata`` keeps the
    checkpoints whose metadata has every given entry (exact string equality, sent as
    ``metadata[NAME]=VALUE``); ``starting_after`` starts after that checkpoint in the
    list's order (with ``desc``: the checkpoints older than it).

    With ``workflow_id`` and ``key`` instead of ``execution_id``: the checkpoints with
    that key in any execution of the workflow (one per execution at most), for a
    framework that knows a checkpoint by its key alone; ``order``, ``metadata`` and
    ``starting_after`` are not taken then (422).
    """
    params: dict[str, Any] = {
        "execution_id": execution_id,
        "workflow_id": workflow_id,
        "key": key,
        "order": order,
        "starting_after": starting_after,
    }
    for name, value in (metadata or {}).items():
        params[f"metadata[{name}]"] = value
    return ListSpec("/checkpoints", _clean(params), "limit", limit, models.Checkpoint)


def checkpoints_put_writes(
    _: Any,
    checkpoint_id: str,
    *,
    task_id: str,
    writes: Sequence[Mapping[str, Any]],
    task_path: str = "",
    idempotency_key: str | None = None,
) -> Spec[models.WritesStored]:
    """Stores writes on a checkpoint (``POST /checkpoints/{id}/writes``).

    Each write is ``{"index": int, "channel": str, "value": <any JSON>}``, stored under
    ``(task_id, index)``: a write already stored there is replaced, so sending the same
    writes again stores them once. The checkpoint's execution must be running.
    """
    items = [{"index": w["index"], "channel": w["channel"], "value": w.get("value")} for w in writes]
    items = jsonable(items, "the writes")
    state_size_check(items, "the writes document")
    body = {"task_id": task_id, "task_path": task_path, "writes": items}
    c = call("POST", f"/checkpoints/{checkpoint_id}/writes", body=body, idempotency_key=idempotency_key)
    return Spec(c, model(models.WritesStored))


def checkpoints_list_writes(_: Any, checkpoint_id: str) -> Spec[models.CheckpointWrites]:
    """The writes of a checkpoint, in the order they were first stored."""
    return Spec(call("GET", f"/checkpoints/{checkpoint_id}/writes"), model(models.CheckpointWrites))


# ---- failures ----


def failures_get(_: Any, failure_id: str) -> Spec[models.Failure]:
    """One failure with its details and recovery commands."""
    return Spec(call("GET", f"/failures/{failure_id}"), model(models.Failure))


def failures_list(
    _: Any,
    *,
    status: models.FailureStatus | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = 200,
    group_id: str | None = None,
) -> ListSpec[models.FailureSummary]:
    """The failures, newest first (``GET /failures``); ``group_id``: one group's."""
    params = {"status": status, "group_id": group_id, "created_after": created_after}
    params |= {"created_before": created_before}
    return ListSpec("/failures", _clean(params), "limit", limit, models.FailureSummary)


def failures_stats(_: Any) -> Spec[models.FailureStats]:
    """Counts by status and the 30-day failure rate."""
    return Spec(call("GET", "/failures/stats"), model(models.FailureStats))


def failures_resolve(
    _: Any, failure_id: str, *, idempotency_key: str | None = None
) -> Spec[models.FailureSettled]:
    """Marks a failure resolved."""
    c = call("POST", f"/failures/{failure_id}/resolve", idempotency_key=idempotency_key)
    return Spec(c, model(models.FailureSettled))


def failures_ignore(
    _: Any, failure_id: str, *, idempotency_key: str | None = None
) -> Spec[models.FailureSettled]:
    """Marks an open failure ignored."""
    c = call("POST", f"/failures/{failure_id}/ignore", idempotency_key=idempotency_key)
    return Spec(c, model(models.FailureSettled))


# ---- billing ----


def billing_balance(_: Any) -> Spec[models.Balance]:
    """The credit balance."""
    return Spec(call("GET", "/billing/balance"), model(models.Balance))


def billing_usage(
    _: Any,
    *,
    bucket: Literal["hour", "day"] = "day",
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> Spec[models.Usage]:
    """Credits used per UTC hour or day (``GET /billing/usage``); the window as in
    :func:`executions_stats`."""
    c = call("GET", "/billing/usage", params=_series(bucket, created_after, created_before))
    return Spec(c, model(models.Usage))


def billing_transactions(
    _: Any, *, type: str | None = None, page_size: int = 100
) -> ListSpec[models.Transaction]:
    """The ledger, newest first (``GET /billing/transactions``)."""
    return ListSpec(
        "/billing/transactions", _clean({"type": type}), "page_size", page_size, models.Transaction
    )


def billing_topup(_: Any, *, amount_cents: int, idempotency_key: str | None = None) -> Spec[models.TopUp]:
    """Starts a top-up (a Stripe PaymentIntent); credits arrive once it is paid."""
    c = call("POST", "/billing/topup", body={"amount_cents": amount_cents}, idempotency_key=idempotency_key)
    return Spec(c, model(models.TopUp))


def billing_create_checkout(
    _: Any, *, plan_id: str, return_url: str, idempotency_key: str | None = None
) -> Spec[models.CheckoutSession]:
    """A Stripe Checkout page to subscribe to ``plan_id``."""
    body = {"plan_id": plan_id, "return_url": return_url}
    c = call("POST", "/billing/subscriptions/create-checkout", body=body, idempotency_key=idempotency_key)
    return Spec(c, model(models.CheckoutSession))


def billing_subscription(_: Any) -> Spec[models.Subscription]:
    """The tenant's subscription (``NotFound`` without one)."""
    return Spec(call("GET", "/billing/subscriptions/status"), model(models.Subscription))


def billing_portal(
    _: Any, *, return_url: str, idempotency_key: str | None = None
) -> Spec[models.PortalSession]:
    """A Stripe billing portal page."""
    c = call(
        "POST",
        "/billing/subscriptions/portal",
        body={"return_url": return_url},
        idempotency_key=idempotency_key,
    )
    return Spec(c, model(models.PortalSession))


def billing_cancel_subscription(
    _: Any, *, immediately: bool = False, idempotency_key: str | None = None
) -> Spec[models.SubscriptionCancelled]:
    """Cancels the subscription at the end of the period, or ``immediately``."""
    params = {"immediately": True} if immediately else None
    c = call("POST", "/billing/subscriptions/cancel", params=params, idempotency_key=idempotency_key)
    return Spec(c, model(models.SubscriptionCancelled))


# ---- keys ----


def _keys(raw: Any) -> list[models.Key]:
    return list(read_page(models.Key, raw).items)


def keys_list(
    _: Any, *, limit: int | None = None, starting_after: str | None = None
) -> Spec[list[models.Key]]:
    """The tenant's API keys, newest first, revoked ones included (``GET /keys``): up to
    ``limit`` (default and at most 100, every live key a tenant may hold), those made
    before key ``starting_after`` when given; each with its ``prefix``, never its secret."""
    return Spec(
        call("GET", "/keys", params=_clean({"limit": limit, "starting_after": starting_after})), _keys
    )


def keys_create(
    _: Any,
    *,
    name: str,
    scopes: list[models.Scope] | None = None,
    expires_at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Spec[models.KeyCreated]:
    """Creates an API key of the tenant (``POST /keys``). Its secret, ``key``, is in this
    answer only (Cairn keeps its SHA-256); it is ``None`` when the answer is the replay of
    a request already made with the same ``idempotency_key`` (a retry whose first answer
    was lost): that key's secret is gone, revoke it and create another.

    ``scopes`` restricts it (``["executions:read", "checkpoints:write"]``; absent: the
    scopes of the key that creates it, which must hold every scope it gives);
    ``expires_at`` (timezone-aware) is when it stops working."""
    body: dict[str, Any] = {"name": name}
    if scopes is not None:
        body["scopes"] = list(scopes)
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise ValueError("expires_at must be timezone-aware, such as datetime.now(timezone.utc)")
        body["expires_at"] = query_value(expires_at)
    c = call("POST", "/keys", body=body, idempotency_key=idempotency_key)
    return Spec(c, model(models.KeyCreated))


def keys_revoke(_: Any, key_id: str) -> Spec[None]:
    """Revokes an API key (``DELETE /keys/{id}``): from then on it authenticates nothing
    (``Unauthorized``). Revoking a revoked key changes nothing; the tenant's last live key
    cannot be revoked (``InvalidState``: create another first)."""
    return Spec(call("DELETE", f"/keys/{key_id}"), _nothing)


# ---- webhook endpoints ----


def _endpoints(raw: Any) -> list[models.WebhookEndpoint]:
    return [models.WebhookEndpoint.from_api(item) for item in raw.get("items", [])]


def webhook_endpoints_list(_: Any) -> Spec[list[models.WebhookEndpoint]]:
    """The tenant's webhook endpoints, newest first (at most 16), never their secrets."""
    return Spec(call("GET", "/webhook-endpoints"), _endpoints)


def webhook_endpoints_create(
    _: Any,
    *,
    url: str,
    event_types: Sequence[str] | None = None,
    workflow_id: str | None = None,
    description: str | None = None,
    idempotency_key: str | None = None,
) -> Spec[models.WebhookEndpointWithSecret]:
    """Registers ``url`` (https, a public host) for the tenant's events: those of
    ``event_types`` (all when left out) and of ``workflow_id`` (any when left out). The
    answer's ``secret`` (``whsec_...``) verifies the signatures and is shown this once."""
    body = _body(
        url=url,
        event_types=list(event_types) if event_types is not None else OMIT,
        workflow_id=workflow_id if workflow_id is not None else OMIT,
        description=description if description is not None else OMIT,
    )
    c = call("POST", "/webhook-endpoints", body=body, idempotency_key=idempotency_key)
    return Spec(c, model(models.WebhookEndpointWithSecret))


def webhook_endpoints_get(_: Any, endpoint_id: str) -> Spec[models.WebhookEndpoint]:
    """One endpoint (``disabled_reason`` says why Cairn disabled it)."""
    return Spec(call("GET", f"/webhook-endpoints/{endpoint_id}"), model(models.WebhookEndpoint))


def webhook_endpoints_update(
    _: Any,
    endpoint_id: str,
    *,
    url: str = OMIT,
    event_types: Sequence[str] = OMIT,
    workflow_id: str | None = OMIT,
    description: str | None = OMIT,
    enabled: bool = OMIT,
) -> Spec[models.WebhookEndpoint]:
    """Changes what is given (``None`` clears ``workflow_id`` or ``description``);
    ``enabled=True`` clears why Cairn disabled it."""
    body = _body(
        url=url,
        event_types=list(event_types) if event_types is not OMIT else OMIT,
        workflow_id=workflow_id,
        description=description,
        enabled=enabled,
    )
    c = call("PATCH", f"/webhook-endpoints/{endpoint_id}", body=body)
    return Spec(c, model(models.WebhookEndpoint))


def webhook_endpoints_delete(_: Any, endpoint_id: str) -> Spec[None]:
    """Deletes an endpoint; nothing more is sent to it."""
    return Spec(call("DELETE", f"/webhook-endpoints/{endpoint_id}"), _nothing)


def webhook_endpoints_rotate_secret(_: Any, endpoint_id: str) -> Spec[models.WebhookEndpointWithSecret]:
    """A new secret (in the answer, this once); the old one keeps signing beside it for
    24 hours, so receivers can switch without missing a message."""
    c = call("POST", f"/webhook-endpoints/{endpoint_id}/rotate-secret", body={})
    return Spec(c, model(models.WebhookEndpointWithSecret))


def webhook_endpoints_test(_: Any, endpoint_id: str) -> Spec[models.WebhookTestSent]:
    """Sends a signed ``webhook.test`` event to this endpoint alone."""
    c = call("POST", f"/webhook-endpoints/{endpoint_id}/test", body={})
    return Spec(c, model(models.WebhookTestSent))


def webhook_endpoints_deliveries(
    _: Any, endpoint_id: str, *, limit: int = 20, starting_after: str | None = None
) -> Spec[models.WebhookDeliveryPage]:
    """One page of the endpoint's deliveries with their attempts, newest first."""
    params: dict[str, Any] = {"limit": limit}
    if starting_after is not None:
        params["starting_after"] = starting_after
    c = call("GET", f"/webhook-endpoints/{endpoint_id}/deliveries", params=params)
    return Spec(c, model(models.WebhookDeliveryPage))


def webhook_endpoints_retry(_: Any, endpoint_id: str, delivery_id: str) -> Spec[models.WebhookDelivery]:
    """Makes a delivery due again at once (its attempts so far stay listed)."""
    c = call("POST", f"/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry", body={})
    return Spec(c, model(models.WebhookDelivery))


def _clean(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _given(value: Any) -> Any:
    """``value``, or left out of the body when ``None``."""
    return OMIT if value is None else value
