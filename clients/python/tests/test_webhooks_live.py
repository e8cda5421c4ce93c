"""Webhooks against the running stack, judged by the Standard Webhooks reference library
(``standardwebhooks``): a receiver in this test verifies every message it gets with the
endpoint's secret, before and after a rotation, and the ``cairn webhooks`` commands."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cairn import Cairn, errors

from .conftest import URL, run_cairn, tenant_key

pytestmark = pytest.mark.live


class Receiver:
    """A small HTTP server that keeps what it is sent, answering ``statuses`` first
    (then 204)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.messages: list[tuple[dict[str, str], bytes]] = []
        self.statuses = list(statuses or [])
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.messages.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 204
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/cairn"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, done: Callable[[list[tuple[dict[str, str], bytes]]], bool], seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while not done(self.messages):
            assert time.monotonic() < deadline, f"not delivered in {seconds} s: {self.messages}"
            time.sleep(0.1)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def verified(secret: str, message: tuple[dict[str, str], bytes]) -> Any:
    headers, body = message
    return Webhook(secret).verify(body, headers)


def test_every_event_is_verified_by_the_standard_webhooks_library(client: Cairn, receiver: Receiver) -> None:
    endpoint = client.webhook_endpoints.create(
        url=receiver.url, event_types=["execution.started", "execution.failed", "failure.created"]
    )
    assert endpoint.secret is not None
    assert endpoint.secret.startswith("whsec_")
    wf = client.workflows.create(name="hooked", workflow_type="custom")
    run = client.executions.create(workflow_id=wf.id)
    client.executions.fail(run.id, error_type="AGENT_ERROR", message="the model gave up")
    receiver.wait(lambda got: len(got) >= 3)
    events = [verified(endpoint.secret, m) for m in receiver.messages]
    assert sorted(e["type"] for e in events) == ["execution.failed", "execution.started", "failure.created"]
    for (headers, _), event in zip(receiver.messages, events, strict=True):
        assert headers["webhook-id"] == event["id"]
        assert event["data"]["execution_id" if event["type"] == "failure.created" else "id"] == run.id
    # Anyone else's secret, or a changed body, does not verify.
    other = client.webhook_endpoints.create(url=receiver.url, event_types=["failure.ignored"])
    assert other.secret is not None
    headers, body = receiver.messages[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(other.secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint.secret).verify(body.replace(b"execution", b"Execution"), headers)


# Test events go to their endpoint whatever its types; "failure.ignored" keeps every other
# event away (the tenant's opening grant reports credits.added).
ONLY_TESTS = ["failure.ignored"]


def test_checkpoint_created_is_opt_in_and_names_the_checkpoint(client: Cairn) -> None:
    named, every = Receiver(), Receiver()
    try:
        endpoint = client.webhook_endpoints.create(url=named.url, event_types=["checkpoint.created"])
        client.webhook_endpoints.create(url=every.url)
        assert endpoint.secret is not None
        wf = client.workflows.create(name="stepped", workflow_type="langgraph")
        run = client.executions.create(workflow_id=wf.id)
        made = [client.checkpoints.create(execution_id=run.id, state={"n": n}) for n in (1, 2)]
        client.executions.complete(run.id)
        named.wait(lambda got: len(got) >= 2)
        every.wait(lambda got: len(got) >= 2)
        events = [verified(endpoint.secret, m) for m in named.messages]
        assert sorted(e["data"]["id"] for e in events) == sorted(c.id for c in made)
        assert {e["type"] for e in events} == {"checkpoint.created"}
        for (headers, _), event in zip(named.messages, events, strict=True):
            assert headers["webhook-id"] == event["data"]["id"].replace("cp_", "evt_", 1)
        # An endpoint of every type does not get them.
        assert "checkpoint.created" not in {json.loads(body)["type"] for _, body in every.messages}
    finally:
        named.server.shutdown()
        every.server.shutdown()


def test_after_a_rotation_both_secrets_verify_for_a_day(client: Cairn, receiver: Receiver) -> None:
    endpoint = client.webhook_endpoints.create(url=receiver.url, event_types=ONLY_TESTS)
    rotated = client.webhook_endpoints.rotate_secret(endpoint.id)
    assert rotated.secret is not None
    assert endpoint.secret is not None
    assert rotated.secret != endpoint.secret
    assert rotated.previous_secret_expires_at is not None
    sent = client.webhook_endpoints.test(endpoint.id)
    receiver.wait(lambda got: len(got) >= 1)
    for secret in (endpoint.secret, rotated.secret):
        event = verified(secret, receiver.messages[0])
        assert (event["type"], event["id"]) == ("webhook.test", sent.event_id)
    assert len(receiver.messages[0][0]["webhook-signature"].split(" ")) == 2


def test_a_500_is_retried_with_the_same_id_and_both_attempts_are_listed(client: Cairn) -> None:
    failing = Receiver([500])
    try:
        endpoint = client.webhook_endpoints.create(url=failing.url, event_types=ONLY_TESTS)
        assert endpoint.secret is not None
        sent = client.webhook_endpoints.test(endpoint.id)
        failing.wait(lambda got: len(got) >= 2)
        first, second = (verified(endpoint.secret, m) for m in failing.messages[:2])
        assert first == second
        assert first["id"] == sent.event_id
        page = client.webhook_endpoints.deliveries(endpoint.id)
        delivery = page.items[0]
        assert delivery.id == sent.delivery_id
        assert [a.status_code for a in delivery.attempts] == [500, 204]
        assert delivery.status == "succeeded"
    finally:
        failing.server.shutdown()


def test_bad_endpoints_are_typed_errors_and_other_tenants_see_nothing(
    client: Cairn, receiver: Receiver
) -> None:
    with pytest.raises(errors.ValidationFailed) as refused:
        client.webhook_endpoints.create(url="https://169.254.169.254/latest/meta-data")
    assert "url" in str(refused.value)
    endpoint = client.webhook_endpoints.create(url=receiver.url)
    with Cairn(tenant_key(), base_url=URL) as stranger:
        with pytest.raises(errors.NotFound):
            stranger.webhook_endpoints.get(endpoint.id)
        assert stranger.webhook_endpoints.list() == []


async def test_the_cli_creates_tests_lists_and_deletes(key: str, receiver: Receiver) -> None:
    made = await run_cairn(
        key, "--json", "webhooks", "create", "--url", receiver.url, "--event-type", "execution.failed"
    )
    assert made.returncode == 0, made.stderr
    endpoint = json.loads(made.stdout)
    secret = endpoint["secret"]
    tested = await run_cairn(key, "webhooks", "test", endpoint["id"])
    assert tested.returncode == 0, tested.stderr
    assert "sent" in tested.stdout
    receiver.wait(lambda got: len(got) >= 1)
    assert verified(secret, receiver.messages[0])["type"] == "webhook.test"
    listed = await run_cairn(key, "webhooks", "list")
    assert endpoint["id"] in listed.stdout
    assert "execution.failed" in listed.stdout
    for _ in range(50):
        deliveries = await run_cairn(key, "webhooks", "deliveries", endpoint["id"])
        if "succeeded" in deliveries.stdout:
            break
        await asyncio.sleep(0.1)
    assert "webhook.test" in deliveries.stdout
    assert "succeeded" in deliveries.stdout, deliveries.stdout
    deleted = await run_cairn(key, "webhooks", "delete", endpoint["id"])
    assert deleted.returncode == 0
    gone = await run_cairn(key, "webhooks", "delete", endpoint["id"])
    assert gone.returncode != 0
    assert "not_found" in gone.stderr
