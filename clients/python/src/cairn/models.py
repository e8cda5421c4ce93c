"""The API's resources as typed models (pydantic v2).

Field names and types follow ``infra/openapi.yaml``; a test compares them, so they
cannot drift. Unknown fields the API may add later are kept (``extra="allow"``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr

WorkflowType = Literal["crewai", "langgraph", "autogen", "semantic_kernel", "custom"]
WorkflowStatus = Literal["draft", "published", "archived"]
ExecutionStatus = Literal["running", "completed", "failed", "cancelled", "paused"]
FailureStatus = Literal["open", "resolved", "ignored"]
CheckpointRetention = Literal["all", "keep_latest", "days"]


class Model(BaseModel):
    """Base of every model."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _raw: dict[str, Any] | None = PrivateAttr(default=None)

    @classmethod
    def from_api(cls, raw: Any) -> Any:
        """The model of an API answer, keeping the answer's own JSON (:meth:`api_json`)."""
        model = cls.model_validate(raw)
        if isinstance(raw, dict):
            model._raw = raw
        return model

    def api_json(self) -> Any:
        """The JSON the API sent, unchanged (else this model as JSON)."""
        return self._raw if self._raw is not None else self.model_dump(mode="json")


class WorkflowRetention(Model):
    """A workflow's own retention, used instead of the tenant's when its executions end
    (fields as in ``/settings/retention``)."""

    executions_days: int | None
    checkpoints: CheckpointRetention
    checkpoints_days: int | None


class WorkflowSummary(Model):
    """A workflow as lists show it (without ``definition``)."""

    id: str
    name: str
    description: str | None
    workflow_type: WorkflowType
    status: WorkflowStatus
    metadata: dict[str, str]
    #: Its own retention, used instead of the tenant's (``None``: the tenant's).
    retention: WorkflowRetention | None
    version: int
    created_at: datetime
    updated_at: datetime


class Workflow(WorkflowSummary):
    """A workflow."""

    definition: dict[str, Any] | None


class ExecutionError(Model):
    """Why an execution failed."""

    error_type: str
    message: str


class ExecutionSummary(Model):
    """An execution as lists show it (without ``input`` and ``output``)."""

    id: str
    workflow_id: str
    status: ExecutionStatus
    error: ExecutionError | None
    cancel_reason: str | None
    key: str | None
    metadata: dict[str, str]
    tags: dict[str, str]
    attempt: int
    current_checkpoint_id: str | None
    checkpoint_count: int
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    #: When the ended execution is deleted (the tenant's retention when it ended).
    expires_at: datetime | None
    #: When all its checkpoints but the one it stands at are deleted, if before.
    checkpoints_expire_at: datetime | None


class Execution(ExecutionSummary):
    """An execution; after a rollback ``discarded_checkpoints`` says how many went."""

    input: Any = None
    output: Any = None
    discarded_checkpoints: int | None = None


class ExecutionDeleted(Model):
    """The answer to a ``DELETE /executions/{id}`` that has more to purge (202)."""

    id: str
    deleted: bool
    remaining: bool


class Checkpoint(Model):
    """A checkpoint; ``state`` only when asked for (``include_state=True``)."""

    id: str
    execution_id: str
    workflow_id: str
    sequence: int
    name: str | None
    key: str | None
    parent_checkpoint_id: str | None
    attempt: int
    metadata: dict[str, str]
    state_size_bytes: int
    created_at: datetime
    state: dict[str, Any] | None = None


class CheckpointWrite(Model):
    """A write attached to a checkpoint: ``(task_id, index)`` -> ``channel``, ``value``."""

    task_id: str
    task_path: str
    index: int
    channel: str
    value: Any


class CheckpointWrites(Model):
    """The writes of a checkpoint, in the order they were first stored."""

    checkpoint_id: str
    items: list[CheckpointWrite]
    total: int


class WritesStored(Model):
    """The answer to storing writes: ``total`` writes are now on the checkpoint."""

    checkpoint_id: str
    total: int


ResolvedBy = Literal["replay", "request"]


class FailureSummary(Model):
    """A failure as lists show it."""

    id: str
    execution_id: str
    workflow_id: str
    error_type: str
    message: str
    status: FailureStatus
    created_at: datetime
    resolved_at: datetime | None
    #: ``replay`` (its execution completed after a replay), ``request``, or ``None``.
    resolved_by: ResolvedBy | None
    #: Failures of the same workflow, error type, agent and fingerprint share it.
    group_id: str
    #: The message with what varies between failures of one cause replaced.
    fingerprint: str


class RecoveryCommand(Model):
    """A recovery step recorded with a failure."""

    id: str
    type: str
    status: str


class Failure(FailureSummary):
    """A failure with its details (traceback, agent, task) and recovery commands."""

    details: dict[str, Any]
    recovery_commands: list[RecoveryCommand]


class FailureStats(Model):
    """Failure counts and the 30-day failure rate."""

    total_failures: int
    open_failures: int
    resolved_failures: int
    ignored_failures: int
    failure_rate_last_30_days: float


class FailureSettled(Model):
    """The answer to resolve and ignore."""

    id: str
    status: FailureStatus
    resolved_at: datetime | None = None
    message: str


class FailureGroupCounts(Model):
    """A failure group's failures by status now."""

    total: int
    open: int
    resolved: int
    ignored: int


class FailureGroup(Model):
    """The failures of one cause: one workflow's, with the same error type, agent and
    fingerprint (``status``: open while any is open, else resolved while any is)."""

    id: str
    status: FailureStatus
    workflow_id: str
    error_type: str
    agent_name: str | None
    fingerprint: str
    sample_message: str
    counts: FailureGroupCounts
    #: A resolved group's: ``replay`` when replays resolved it by themselves, else ``request``.
    resolved_by: ResolvedBy | None
    first_seen: datetime
    last_seen: datetime
    #: Its failures made in each of the last 24 clock hours (UTC), oldest first: the last
    #: is the current hour so far.
    failures_per_hour: list[int]


class CheckpointBrief(Model):
    """A checkpoint named in a replay preview."""

    id: str
    sequence: int
    name: str | None
    attempt: int
    created_at: datetime


class NamedCount(Model):
    """A step or tool, and how often it was recorded."""

    name: str
    count: int


class ReplayPreview(Model):
    """What a replay would run again: the checkpoints recorded after the one it starts
    from, as steps (by name) and tool calls; whether it would be accepted now."""

    object: Literal["replay_preview"]
    execution_id: str
    status: ExecutionStatus
    replayable: bool
    refused: str | None
    from_checkpoint: CheckpointBrief | None
    credits: int
    checkpoints_after: int
    more: bool
    steps: list[NamedCount]
    tool_calls: list[NamedCount]
    checkpoints: list[CheckpointBrief]


BulkAction = Literal["replay", "cancel"]
BulkStatus = Literal["running", "completed", "failed", "cancelled"]


class BulkFilter(Model):
    """Which executions a bulk job acts on: every condition given holds (``tag``: each
    ``key:value``)."""

    status: ExecutionStatus | None = None
    workflow_id: str | None = None
    tag: list[str] | str | None = None
    failure_group: str | None = None
    error_type: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


class BulkJob(Model):
    """A bulk job: ``matched`` when it started, and what it has reached so far
    (``done``, ``skipped`` and ``failed``, each with the reasons)."""

    id: str
    action: BulkAction
    filter: BulkFilter
    status: BulkStatus
    matched: int
    done: int
    skipped: int
    skipped_by_reason: dict[str, int]
    failed: int
    failed_by_reason: dict[str, int]
    credits_needed: int
    error: str | None
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    object: Literal["bulk_job"]

    @property
    def reached(self) -> int:
        """Executions the job has reached (done, skipped or failed)."""
        return self.done + self.skipped + self.failed


class BulkDryRun(Model):
    """What a bulk job would act on: how many executions match now, what replaying them
    would cost, and the first 20 (newest first)."""

    action: BulkAction
    filter: BulkFilter
    matched: int
    credits_needed: int
    executions: list[ExecutionSummary]
    object: Literal["bulk_dry_run"]


ExportStatus = Literal["running", "completed", "failed"]


class ExportPart(Model):
    """One part of an export: gzip JSON Lines of at most 4,500,000 bytes."""

    number: int
    url: str
    bytes: int
    lines: int


class ExportCounts(Model):
    """Records an export has written, by kind."""

    workflows: int
    executions: int
    checkpoints: int
    failures: int


class Export(Model):
    """An export of the tenant's records (or one workflow's): its parts so far, whole
    when ``status`` is ``"completed"``; deleted at ``expires_at``."""

    id: str
    workflow_id: str | None
    status: ExportStatus
    error: str | None
    counts: ExportCounts
    parts: list[ExportPart]
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    expires_at: datetime
    object: Literal["export"]


class FailureGroupSettled(FailureGroup):
    """A group after resolve or ignore: ``settled`` by this call, ``remaining`` open
    failures left (call again)."""

    settled: int
    remaining: bool


class StatusCounts(Model):
    """Executions of a bucket by the status they have now."""

    running: int
    completed: int
    failed: int
    cancelled: int
    paused: int


class ExecutionBucket(Model):
    """One hour or day of :class:`ExecutionStats`."""

    start: datetime
    end: datetime
    total: int
    by_status: StatusCounts
    failures: int


class ExecutionStats(Model):
    """Executions started and failures recorded per hour or day
    (``GET /executions/stats``). ``created_after`` and ``created_before`` are where the
    first bucket starts and the last ends."""

    bucket: Literal["hour", "day"]
    created_after: datetime
    created_before: datetime
    total: int
    failures: int
    buckets: list[ExecutionBucket]


class UsageBucket(Model):
    """One hour or day of :class:`Usage`."""

    start: datetime
    end: datetime
    credits: int
    charges: int


class Usage(Model):
    """Credits used per hour or day (``GET /billing/usage``)."""

    bucket: Literal["hour", "day"]
    created_after: datetime
    created_before: datetime
    credits: int
    charges: int
    buckets: list[UsageBucket]


class Balance(Model):
    """The credit balance (1 credit = US$0.01)."""

    credits_balance: int
    balance_usd: float


class Transaction(Model):
    """A ledger entry."""

    id: str
    type: Literal["topup", "usage", "subscription", "refund", "dispute"]
    amount: int
    currency: str
    credits_before: int
    credits_after: int
    description: str
    payment_status: str | None
    created_at: datetime


class TopUp(Model):
    """A started top-up: complete the payment with ``client_secret``."""

    client_secret: str
    payment_intent_id: str
    amount_cents: int
    credits: int


class Subscription(Model):
    """The tenant's subscription."""

    subscription_id: str
    plan_id: Literal["developer", "pro", "enterprise"]
    status: Literal["active", "trialing", "past_due", "cancelled", "cancel_at_period_end"]
    current_period_start: datetime | None
    current_period_end: datetime | None
    cancel_at_period_end: bool


class CheckoutSession(Model):
    """Where to send the customer to subscribe."""

    checkout_url: str


class PortalSession(Model):
    """Where the customer manages billing."""

    portal_url: str


class SubscriptionCancelled(Model):
    """The answer to cancelling a subscription."""

    subscription_id: str
    status: str
    message: str


Scope = Literal[
    "*",
    "workflows:read",
    "workflows:write",
    "executions:read",
    "executions:write",
    "checkpoints:read",
    "checkpoints:write",
    "failures:read",
    "failures:write",
    "billing:read",
    "billing:write",
    "keys:read",
    "keys:write",
    "webhooks:read",
    "webhooks:write",
]


class Key(Model):
    """An API key of the tenant, as lists show it: its ``prefix`` (first 10 characters),
    never its secret. ``name`` is ``None`` for keys made before keys had names.
    ``scopes`` says what it may do (``["*"]``: everything); from ``expires_at`` on, if
    set, it is refused."""

    id: str
    name: str | None
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    scopes: list[str]
    expires_at: datetime | None


class KeyCreated(Key):
    """A new API key with its secret, ``key``: shown this once (``None`` in the answer to
    a retried request, an ``Idempotency-Key`` replay)."""

    key: str | None


WebhookEventType = Literal[
    "execution.started",
    "execution.completed",
    "execution.failed",
    "execution.paused",
    "execution.cancelled",
    "execution.replayed",
    "execution.rolled_back",
    "failure.created",
    "failure.resolved",
    "failure.ignored",
    "credits.added",
    "credits.low",
    "checkpoint.created",
]


class WebhookEndpoint(Model):
    """Where the tenant's events are posted, signed as Standard Webhooks specifies.
    ``event_types`` empty: every type but the opt-in ``checkpoint.created``.
    ``disabled_reason`` says why Cairn disabled it (410 Gone, or five days of failed
    attempts)."""

    id: str
    url: str
    description: str | None
    event_types: list[WebhookEventType]
    workflow_id: str | None
    enabled: bool
    disabled_reason: str | None
    failing_since: datetime | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


class WebhookEndpointWithSecret(WebhookEndpoint):
    """An endpoint with its signing secret (``whsec_...``), shown this once: when it is
    created and when its secret is rotated (``None`` in an ``Idempotency-Key`` replay)."""

    secret: str | None


class WebhookAttempt(Model):
    """One attempt of a delivery: the receiver's ``status_code`` (``None`` when it did
    not answer), how long it took, and why it failed."""

    at: datetime
    status_code: int | None
    latency_ms: int
    error: str | None


class WebhookDelivery(Model):
    """One event's delivery to one endpoint, with its attempts. ``event_id`` is every
    attempt's ``webhook-id`` header."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: Literal["pending", "succeeded", "failed"]
    attempt_count: int
    attempts: list[WebhookAttempt]
    next_attempt_at: datetime | None
    created_at: datetime
    payload: dict[str, Any]


class WebhookDeliveryPage(Model):
    """A page of an endpoint's deliveries, newest first."""

    items: list[WebhookDelivery]
    has_more: bool


class WebhookTestSent(Model):
    """A test event on its way: its id and its delivery's."""

    event_id: str
    delivery_id: str


T = TypeVar("T", bound=Model)


class Page(Model, Generic[T]):
    """One page of a list and the ``total`` of the whole list."""

    items: list[T]
    total: int
    #: Checkpoint lists say where the next page starts (``None`` at the end): a
    #: metadata-filtered page may hold fewer items than asked, even none, and not be last.
    next_starting_after: str | None = None

    def after(self, size: int) -> str | None:
        """Where the page after this one starts, for a list of pages of ``size``; ``None``
        when this one is the last."""
        if "next_starting_after" in self.model_fields_set:
            return self.next_starting_after
        if len(self.items) < size or not self.items:
            return None
        return str(getattr(self.items[-1], "id"))  # noqa: B009 (every listed model has an id)


class Retention(Model):
    """How long the tenant's ended executions and their checkpoints are kept
    (``/settings/retention``). ``executions_days`` ``None``: as long as the plan allows
    (``max_executions_days``); ``effective_executions_days`` is what applies."""

    executions_days: int | None
    checkpoints: CheckpointRetention
    checkpoints_days: int | None
    plan: str | None
    max_executions_days: int
    effective_executions_days: int
    updated_at: datetime | None
    object: Literal["retention"]
