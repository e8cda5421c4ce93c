"""Configuration, requests, retries and error mapping, shared by the sync and async
clients.

Retry policy: a call is tried again after a connection error or timeout, a 429, a 503,
or a 409 ``idempotency_in_progress``, honouring ``Retry-After`` (else exponential
backoff with jitter), at most ``max_retries`` times and never past ``max_elapsed``
seconds. Every POST carries an ``Idempotency-Key`` made once per logical call and
reused by its retries, so a retry never starts or charges twice.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import errors

DEFAULT_BASE_URL = "http://127.0.0.1:3000/api/v1"
#: Bodies larger than this are sent gzip-compressed (the API accepts ``Content-Encoding: gzip``),
#: unless ``CAIRN_COMPRESS_REQUESTS=0``: the local stack's ``cargo lambda watch`` answers
#: every compressed request with a 500 of its own.
GZIP_ABOVE = 64 * 1024
#: The largest checkpoint state, as serialized JSON.
STATE_MAX_BYTES = 4 * 1024 * 1024
USER_AGENT = "cairn-python/0.1.0"


@dataclass(frozen=True)
class Settings:
    """How to reach Cairn and how hard to try."""

    api_key: str = field(repr=False)
    base_url: str
    timeout: float = 30.0
    max_retries: int = 3
    max_elapsed: float = 60.0
    compress: bool = True

    def __repr__(self) -> str:
        return f"Settings(base_url={self.base_url!r}, api_key='***', max_retries={self.max_retries})"


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost`` (and ``*.localhost``) or a
    loopback address."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, allow_insecure: bool) -> None:
    """Refuses (:class:`~cairn.errors.InsecureURL`) a plain ``http://`` URL to another
    machine unless ``allow_insecure``: the key would travel in clear."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "http" and not is_loopback(parts.hostname or "") and not allow_insecure:
        raise errors.InsecureURL(
            f"{url} is plain http to another machine: the API key would cross the network in clear. "
            "Use https://, or pass allow_insecure=True (cairn --insecure, CAIRN_ALLOW_INSECURE=1) "
            "for a private network you trust"
        )


def settings(
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    max_retries: int,
    max_elapsed: float,
    allow_insecure: bool = False,
) -> Settings:
    """Arguments first, then ``CAIRN_API_KEY`` and ``CAIRN_API_URL`` (and
    ``CAIRN_COMPRESS_REQUESTS=0`` to send large bodies uncompressed,
    ``CAIRN_ALLOW_INSECURE=1`` to allow plain http to another machine)."""
    key = api_key or os.environ.get("CAIRN_API_KEY")
    if not key:
        raise errors.Unauthorized(
            "no API key: pass api_key=... or set CAIRN_API_KEY (cairn login stores one for the CLI)"
        )
    url = (base_url or os.environ.get("CAIRN_API_URL") or DEFAULT_BASE_URL).rstrip("/")
    check_url(url, allow_insecure or _truthy("CAIRN_ALLOW_INSECURE"))
    compress = os.environ.get("CAIRN_COMPRESS_REQUESTS", "1").strip().lower() not in ("0", "false", "no")
    return Settings(key, url, timeout, max_retries, max_elapsed, compress)


@dataclass(frozen=True)
class Call:
    """One logical API call: what a resource method asks for."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    body: Any = None
    has_body: bool = False
    idempotency_key: str | None = None
    headers: dict[str, str] | None = None


def call(
    method: str,
    path: str,
    *,
    params: dict[str, Any] | None = None,
    body: Any = None,
    has_body: bool | None = None,
    idempotency_key: str | None = None,
    headers: dict[str, str] | None = None,
) -> Call:
    """A :class:`Call`; a POST gets an ``Idempotency-Key`` now, once for all its tries."""
    if method == "POST" and idempotency_key is None:
        idempotency_key = str(uuid.uuid4())
    clean = {k: v for k, v in (params or {}).items() if v is not None}
    return Call(
        method,
        path,
        clean or None,
        body,
        body is not None if has_body is None else has_body,
        idempotency_key,
        headers,
    )


def query_value(value: Any) -> Any:
    """Query parameters as the API reads them (booleans in lower case, times in ISO 8601)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return value


def encode(c: Call, s: Settings) -> tuple[str, dict[str, str], bytes | None, dict[str, Any] | None]:
    """URL, headers, body and query of a call."""
    headers = {"X-API-Key": s.api_key, "Accept": "application/json", "User-Agent": USER_AGENT}
    if c.idempotency_key:
        headers["Idempotency-Key"] = c.idempotency_key
    if c.headers:
        headers.update(c.headers)
    content: bytes | None = None
    if c.has_body:
        content = json.dumps(c.body, separators=(",", ":"), ensure_ascii=False).encode()
        headers["Content-Type"] = "application/json"
        if s.compress and len(content) > GZIP_ABOVE:
            content = gzip.compress(content, compresslevel=6)
            headers["Content-Encoding"] = "gzip"
    params = {k: query_value(v) for k, v in (c.params or {}).items()} or None
    return f"{s.base_url}{c.path}", headers, content, params


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds, if the answer has one."""
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def outcome(response: httpx.Response) -> Any:
    """The JSON of a success (``None`` for 204; the bytes of a gzip download), or the
    typed error of a failure."""
    if response.status_code < 400:
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("Content-Type", "").startswith("application/gzip"):
            return response.content
        return response.json()
    try:
        body = response.json()
    except ValueError:
        body = None
    raise errors.from_problem(
        response.status_code, body, response.headers.get("X-Request-Id"), retry_after(response)
    )


def retryable(error: errors.CairnError) -> bool:
    """Whether another try may succeed (the same Idempotency-Key makes it safe)."""
    return isinstance(
        error,
        (errors.APIConnectionError, errors.RateLimited, errors.Unavailable, errors.IdempotencyInProgress),
    )


def pause(error: errors.CairnError, tries: int) -> float:
    """How long to wait before try ``tries + 1``."""
    if error.retry_after is not None:
        return error.retry_after
    return float(min(8.0, 0.25 * 2 ** (tries - 1)) * (0.5 + random.random() / 2))


class Clock:
    """Elapsed time of one logical call (a seam for tests)."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def connection_error(error: httpx.HTTPError) -> errors.APIConnectionError:
    kind = "timed out" if isinstance(error, httpx.TimeoutException) else "could not connect"
    return errors.APIConnectionError(f"the request {kind}: {type(error).__name__}")


def state_size_check(state: Any, what: str = "the state") -> None:
    """Refuses a checkpoint state (or a checkpoint's writes) over 4 MiB of JSON before
    anything is sent."""
    size = len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())
    if size > STATE_MAX_BYTES:
        raise errors.PayloadTooLarge(
            f"{what} is {size} bytes of JSON; the limit is {STATE_MAX_BYTES} bytes (4 MiB)", status=None
        )
