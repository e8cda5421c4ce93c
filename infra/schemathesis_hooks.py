"""schemathesis hooks for `make test` (see infra/schemathesis.toml).

Each request gets an Idempotency-Key of its own, as clients are told to use them (one
key per logical operation): generated keys repeat across different requests, which the
API rightly answers 422 idempotency_key_reused. The key's semantics are tested in
tests/tests/idempotency.rs.
"""

import json
import uuid

import schemathesis


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = f"st-{uuid.uuid4()}"


METADATA_MAX_BYTES = 16 * 1024


@schemathesis.hook
def filter_body(ctx, body):
    """Bodies that are not UTF-8 are tested in process (tests/tests/input_limits.rs):
    cargo lambda watch, which plays API Gateway here, cannot put them into a Lambda
    event and answers 500 itself, before any function runs.

    Metadata over 16 KiB as JSON is rightly 422 (the Metadata schema's description), a
    bound that JSON Schema cannot state; such bodies are left out of the positive data
    and tested in tests/tests/response_limits.rs."""
    if isinstance(body, (bytes, bytearray)):
        try:
            bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            return False
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        encoded = json.dumps(body["metadata"], separators=(",", ":"), ensure_ascii=False).encode()
        if len(encoded) > METADATA_MAX_BYTES:
            return False
    return True
