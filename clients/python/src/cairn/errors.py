"""Every way a call to Cairn can fail, as typed exceptions.

The API answers problems as RFC 9457 problem details with a stable ``code``; each code
is a subclass of :class:`CairnError`, so callers catch what they can handle::

    try:
        client.executions.replay(execution_id)
    except cairn.errors.InvalidState as e:
        print(e.detail)
"""

from __future__ import annotations

from typing import Any


class CairnError(Exception):
    """A call that did not succeed.

    ``status`` is the HTTP status (``None`` when no answer arrived), ``code`` the API's
    problem code, ``detail`` its explanation, ``request_id`` the id to quote to support,
    ``errors`` the field errors of a 422, ``required_scope`` the scope a 403 needed.
    """

    code: str = "error"

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        errors: list[dict[str, str]] | None = None,
        retry_after: float | None = None,
        required_scope: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        if code is not None:
            self.code = code
        self.request_id = request_id
        self.errors = errors or []
        self.retry_after = retry_after
        self.required_scope = required_scope

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        status = f"{self.status} " if self.status is not None else ""
        fields = "".join(f"\n  {e.get('field')}: {e.get('message')}" for e in self.errors)
        return f"{status}{self.code}: {self.detail}{where}{fields}"


class MalformedRequest(CairnError):
    """400: the body is not JSON or not the expected content type."""

    code = "malformed_request"


class Unauthorized(CairnError):
    """401: the API key is missing, unknown or revoked."""

    code = "unauthorized"


class InsufficientScope(CairnError):
    """403: the API key's scopes do not include the one the request needs
    (``required_scope``, such as ``executions:write``); nothing was done."""

    code = "insufficient_scope"


class InsufficientCredits(CairnError):
    """402: a start or replay needs more credits than the balance holds."""

    code = "insufficient_credits"


class NotFound(CairnError):
    """404: no such resource for this API key (another tenant's ids are unknown too)."""

    code = "not_found"


class MethodNotAllowed(CairnError):
    """405."""

    code = "method_not_allowed"


class InvalidState(CairnError):
    """409: the resource's current state does not allow the change."""

    code = "invalid_state"


class IdempotencyInProgress(CairnError):
    """409: a request with the same Idempotency-Key is still being processed."""

    code = "idempotency_in_progress"


class VersionMismatch(CairnError):
    """412: the resource changed since the version given (If-Match)."""

    code = "version_mismatch"


class PayloadTooLarge(CairnError):
    """413: a body or state over its limit (also raised before sending)."""

    code = "payload_too_large"


class ValidationFailed(CairnError):
    """422: fields that are invalid, all of them in ``errors``."""

    code = "validation_failed"


class IdempotencyKeyReused(CairnError):
    """422: the same Idempotency-Key was used for a different request."""

    code = "idempotency_key_reused"


class ExecutionEnded(InvalidState, RuntimeError):
    """The run's execution is completed or cancelled (through the API, the command line
    or the dashboard) and takes no more checkpoints, raised by every integration before
    it writes: a LangGraph thread, a CrewAI flow, an Agents SDK session, a keyed run of
    Agent Framework, AutoGen or Semantic Kernel. Delete the execution (or use a new
    key) to start over. An :class:`InvalidState`, and a ``RuntimeError`` as it was
    (``cairn.langgraph.ThreadEnded``, ``cairn.crewai.FlowEnded``,
    ``cairn.openai_agents.SessionEnded`` and ``ExecutionEnded`` of the others are its
    names there)."""

    code = "execution_ended"


class RateLimited(CairnError):
    """429: over the tenant's request rate; ``retry_after`` says when to try again."""

    code = "rate_limited"


class InternalError(CairnError):
    """500: a bug in the service (quote ``request_id``)."""

    code = "internal"


class PaymentProcessorError(CairnError):
    """502: Stripe failed or refused."""

    code = "payment_processor_error"


class Unavailable(CairnError):
    """503: a dependency of the service is unavailable; retry later."""

    code = "unavailable"


class APIConnectionError(CairnError):
    """No answer: the connection failed or timed out."""

    code = "connection_error"


class InsecureURL(CairnError):
    """A plain ``http://`` base URL to a host that is not this machine: the API key
    would cross the network in clear. Use ``https://``, or opt in with
    ``allow_insecure=True`` (``--insecure``, ``CAIRN_ALLOW_INSECURE=1``) for a private
    network you trust. Raised before anything is sent."""

    code = "insecure_url"


class LoopMismatch(CairnError):
    """An :class:`~cairn.AsyncCairn` given its own ``http_client`` used in an event loop
    other than the one that first used it (an ``httpx.AsyncClient``'s connections belong
    to one loop). Made without ``http_client``, an ``AsyncCairn`` works in any loop.
    Raised before anything is sent."""

    code = "loop_mismatch"


class DeletionIncomplete(CairnError):
    """A deletion still had more to purge after the most requests allowed (each answered
    202); sending DELETE again continues it, and the service finishes it by itself once
    it has not been sent for 10 minutes."""

    code = "deletion_incomplete"


class ExportFailed(CairnError):
    """An export waited for ended as failed (its ``error`` says why); the parts it wrote
    can still be downloaded until it expires."""

    code = "export_failed"


_BY_CODE: dict[str, type[CairnError]] = {
    cls.code: cls
    for cls in (
        MalformedRequest,
        Unauthorized,
        InsufficientScope,
        InsufficientCredits,
        NotFound,
        MethodNotAllowed,
        InvalidState,
        IdempotencyInProgress,
        VersionMismatch,
        PayloadTooLarge,
        ValidationFailed,
        IdempotencyKeyReused,
        RateLimited,
        InternalError,
        PaymentProcessorError,
        Unavailable,
    )
}

_BY_STATUS: dict[int, type[CairnError]] = {
    400: MalformedRequest,
    401: Unauthorized,
    402: InsufficientCredits,
    403: InsufficientScope,
    404: NotFound,
    405: MethodNotAllowed,
    409: InvalidState,
    412: VersionMismatch,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: RateLimited,
    500: InternalError,
    502: PaymentProcessorError,
    503: Unavailable,
}


def from_problem(status: int, body: Any, request_id: str | None, retry_after: float | None) -> CairnError:
    """The exception for an error answer (a problem+json body, or anything else)."""
    problem = body if isinstance(body, dict) else {}
    code = problem.get("code")
    cls = _BY_CODE.get(code) if isinstance(code, str) else None
    if cls is None:
        cls = _BY_STATUS.get(status, CairnError)
    detail = problem.get("detail")
    if not isinstance(detail, str):
        detail = f"the API answered {status}"
    errors = problem.get("errors")
    error = cls(
        detail,
        status=status,
        code=code if isinstance(code, str) else None,
        request_id=problem.get("request_id") if isinstance(problem.get("request_id"), str) else request_id,
        errors=errors if isinstance(errors, list) else None,
        retry_after=retry_after,
        required_scope=scope if isinstance(scope := problem.get("required_scope"), str) else None,
    )
    return error
