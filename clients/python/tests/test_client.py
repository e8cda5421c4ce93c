"""The library without a server: requests, retries, errors, pages (respx mocks httpx)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
import respx

from cairn import AsyncCairn, Cairn, errors

BASE = "https://cairn.test/api/v1"


def problem(status: int, code: str, detail: str = "x", **extra: Any) -> httpx.Response:
    body = {"type": "about:blank", "title": "t", "status": status, "detail": detail, "code": code}
    body["request_id"] = "req-1"
    body.update(extra)
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json"})


def execution(id: str = "exec_1", status: str = "running", **fields: Any) -> dict[str, Any]:
    body = {
        "id": id,
        "workflow_id": "wf_1",
        "status": status,
        "input": None,
        "output": None,
        "error": None,
        "cancel_reason": None,
        "key": None,
        "metadata": {},
        "tags": {},
        "attempt": 1,
        "current_checkpoint_id": None,
        "checkpoint_count": 0,
        "created_at": "2026-11-24T10:00:00.000Z",
        "updated_at": "2026-11-24T10:00:00.000Z",
        "ended_at": None,
        "expires_at": None,
        "checkpoints_expire_at": None,
    }
    body.update(fields)
    return body


@pytest.fixture
def client() -> Cairn:
    # No pauses between tries: the policy is checked by counting them.
    return Cairn("key_secret_123", base_url=BASE, max_retries=3)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)

    async def fake(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr("asyncio.sleep", fake)
    return slept


def test_the_key_is_sent_and_never_shown(client: Cairn) -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/billing/balance").respond(json={"credits_balance": 5, "balance_usd": 0.05})
        assert client.billing.balance().credits_balance == 5
    assert route.calls.last.request.headers["X-API-Key"] == "key_secret_123"
    assert "key_secret_123" not in repr(client)
    assert "key_secret_123" not in repr(client._settings)


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_API_KEY", "env_key")
    monkeypatch.setenv("CAIRN_API_URL", "https://other.test/api/v1/")
    c = Cairn()
    assert (c._settings.api_key, c._settings.base_url) == ("env_key", "https://other.test/api/v1")
    monkeypatch.delenv("CAIRN_API_KEY")
    with pytest.raises(errors.Unauthorized, match="CAIRN_API_KEY"):
        Cairn()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:3000/api/v1",
        "http://127.9.9.9/api/v1",
        "http://localhost:3000/api/v1",
        "http://cairn.localhost/api/v1",
        "http://[::1]:3000/api/v1",
        "https://api.example.com/api/v1",
        "HTTPS://api.example.com/api/v1",
    ],
)
def test_https_and_this_machine_are_allowed(url: str) -> None:
    assert Cairn("k", base_url=url)._settings.base_url == url.rstrip("/")
    assert AsyncCairn("k", base_url=url)._settings.base_url == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com/api/v1",
        "HTTP://10.0.0.5:3000/api/v1",
        "http://[2001:db8::1]/api/v1",
        "http://127.0.0.1.nip.io/",
    ],
)
def test_plain_http_to_another_machine_is_refused_unless_the_caller_opts_in(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAIRN_ALLOW_INSECURE", raising=False)
    with respx.mock(assert_all_called=False) as mock:
        sent = mock.route().respond(200)
        for make in (Cairn, AsyncCairn):
            with pytest.raises(errors.InsecureURL, match="in clear") as refused:
                make("key_secret_123", base_url=url)
            assert refused.value.code == "insecure_url"
            assert "key_secret_123" not in str(refused.value)
        monkeypatch.setenv("CAIRN_API_URL", url)
        with pytest.raises(errors.InsecureURL):
            Cairn("k")
        assert not sent.called, "nothing was sent"
    assert Cairn("k", base_url=url, allow_insecure=True)._settings.base_url == url.rstrip("/")
    monkeypatch.setenv("CAIRN_ALLOW_INSECURE", "1")
    assert Cairn("k")._settings.base_url == url.rstrip("/")


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "malformed_request", errors.MalformedRequest),
        (401, "unauthorized", errors.Unauthorized),
        (402, "insufficient_credits", errors.InsufficientCredits),
        (403, "insufficient_scope", errors.InsufficientScope),
        (404, "not_found", errors.NotFound),
        (409, "invalid_state", errors.InvalidState),
        (412, "version_mismatch", errors.VersionMismatch),
        (413, "payload_too_large", errors.PayloadTooLarge),
        (422, "validation_failed", errors.ValidationFailed),
        (422, "idempotency_key_reused", errors.IdempotencyKeyReused),
        (500, "internal", errors.InternalError),
        (502, "payment_processor_error", errors.PaymentProcessorError),
    ],
)
def test_each_problem_code_is_its_own_exception(client: Cairn, status: int, code: str, cls: type) -> None:
    errs = [{"field": "name", "message": "is required"}]
    with respx.mock:
        respx.get(f"{BASE}/executions/exec_1").mock(return_value=problem(status, code, "why", errors=errs))
        with pytest.raises(cls) as caught:
            client.executions.get("exec_1")
    e = caught.value
    assert (e.status, e.code, e.detail, e.request_id) == (status, code, "why", "req-1")
    assert e.errors == errs
    assert "why" in str(e)


def test_a_non_json_error_still_maps_by_status(client: Cairn) -> None:
    with respx.mock:
        respx.get(f"{BASE}/executions/exec_1").respond(404, text="gone")
        with pytest.raises(errors.NotFound):
            client.executions.get("exec_1")


def test_retries_keep_one_idempotency_key_and_honour_retry_after(
    client: Cairn, no_sleep: list[float]
) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions").mock(
            side_effect=[
                httpx.ConnectError("refused"),
                _with_retry_after(problem(503, "unavailable"), "2"),
                _with_retry_after(problem(429, "rate_limited"), "1"),
                httpx.Response(201, json=execution()),
            ]
        )
        started = client.executions.create(workflow_id="wf_1", input={"q": 1})
    assert started.id == "exec_1"
    keys = {call.request.headers["Idempotency-Key"] for call in route.calls}
    assert (len(route.calls), len(keys)) == (4, 1), keys
    assert no_sleep[1:] == [2.0, 1.0]


def _with_retry_after(response: httpx.Response, seconds: str) -> httpx.Response:
    response.headers["Retry-After"] = seconds
    return response


def test_each_logical_call_gets_its_own_key(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions").respond(201, json=execution())
        client.executions.create(workflow_id="wf_1")
        client.executions.create(workflow_id="wf_1")
        client.executions.create(workflow_id="wf_1", idempotency_key="mine")
    keys = [call.request.headers["Idempotency-Key"] for call in route.calls]
    assert keys[0] != keys[1]
    assert keys[2] == "mine"


def test_retries_are_bounded_and_end_with_the_last_error(client: Cairn) -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/billing/balance").mock(return_value=problem(503, "unavailable"))
        with pytest.raises(errors.Unavailable):
            client.billing.balance()
    assert len(route.calls) == 4  # one try and max_retries=3 retries


def test_retries_stop_at_the_time_budget(no_sleep: list[float]) -> None:
    c = Cairn("k", base_url=BASE, max_retries=10, max_elapsed=5.0)
    with respx.mock:
        route = respx.get(f"{BASE}/billing/balance").mock(
            return_value=_with_retry_after(problem(429, "rate_limited"), "30")
        )
        with pytest.raises(errors.RateLimited) as caught:
            c.billing.balance()
    assert len(route.calls) == 1
    assert caught.value.retry_after == 30.0


def test_conflicts_and_bad_requests_are_not_retried(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/pause").mock(return_value=problem(409, "invalid_state"))
        with pytest.raises(errors.InvalidState):
            client.executions.pause("exec_1")
    assert len(route.calls) == 1


def test_an_idempotency_key_in_progress_is_retried(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/complete").mock(
            side_effect=[problem(409, "idempotency_in_progress"), httpx.Response(200, json=execution())]
        )
        client.executions.complete("exec_1", output={"ok": True})
    assert len(route.calls) == 2


def test_bodies_omit_what_was_not_given_and_send_null_when_asked(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions/exec_1/replay").respond(200, json=execution())
        client.executions.replay("exec_1")
        client.executions.replay("exec_1", checkpoint_id=None)
        client.executions.replay("exec_1", checkpoint_id="cp_1")
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert bodies == [{}, {"checkpoint_id": None}, {"checkpoint_id": "cp_1"}]


def test_large_bodies_are_gzipped_and_huge_states_refused_before_sending(client: Cairn) -> None:
    checkpoint = checkpoint_json()
    state = {"text": "a" * 200_000}
    with respx.mock:
        route = respx.post(f"{BASE}/checkpoints").respond(201, json=checkpoint)
        client.checkpoints.create(execution_id="exec_1", state=state)
        request = route.calls.last.request
        assert request.headers["Content-Encoding"] == "gzip"
        assert json.loads(gzip.decompress(request.content))["state"] == state
        with pytest.raises(errors.PayloadTooLarge, match="4 MiB"):
            client.checkpoints.create(execution_id="exec_1", state={"text": "a" * (4 * 1024 * 1024)})
        assert len(route.calls) == 1
        with pytest.raises(TypeError, match="JSON"):
            client.checkpoints.create(execution_id="exec_1", state={"when": object()})


def test_compression_can_be_turned_off_for_the_local_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_COMPRESS_REQUESTS", "0")
    plain = Cairn(api_key="cairn_test", base_url=BASE)
    state = {"text": "a" * 200_000}
    with respx.mock:
        route = respx.post(f"{BASE}/checkpoints").respond(201, json=checkpoint_json())
        plain.checkpoints.create(execution_id="exec_1", state=state)
        request = route.calls.last.request
        assert "Content-Encoding" not in request.headers
        assert json.loads(request.content)["state"] == state


def checkpoint_json(**fields: Any) -> dict[str, Any]:
    body = {
        "id": "cp_1",
        "execution_id": "exec_1",
        "workflow_id": "wf_1",
        "sequence": 1,
        "name": None,
        "key": None,
        "parent_checkpoint_id": None,
        "attempt": 1,
        "metadata": {},
        "state_size_bytes": 10,
        "created_at": "2026-11-24T10:00:00Z",
    }
    body.update(fields)
    return body


def summary(i: int) -> dict[str, Any]:
    body = execution(f"exec_{i}")
    del body["input"], body["output"]
    return body


def test_lists_follow_the_cursor_across_pages(client: Cairn) -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/executions").mock(
            side_effect=[
                httpx.Response(
                    200, json={"items": [summary(3), summary(2)], "total": 3, "page": 1, "page_size": 2}
                ),
                httpx.Response(200, json={"items": [summary(1)], "total": 3, "page": 1, "page_size": 2}),
            ]
        )
        ids = [e.id for e in client.executions.list(status="failed", page_size=2)]
    assert ids == ["exec_3", "exec_2", "exec_1"]
    first, second = (call.request.url.params for call in route.calls)
    assert (first["status"], first["page_size"], "starting_after" in first) == ("failed", "2", False)
    assert second["starting_after"] == "exec_2"


def test_one_page_with_its_total(client: Cairn) -> None:
    with respx.mock:
        respx.get(f"{BASE}/executions").respond(
            200, json={"items": [summary(1)], "total": 41, "page": 1, "page_size": 100}
        )
        page = client.executions.list().first_page()
    assert (page.total, [e.id for e in page.items]) == (41, ["exec_1"])


async def test_the_async_client_is_the_same_api() -> None:
    c = AsyncCairn("k", base_url=BASE)
    with respx.mock:
        respx.get(f"{BASE}/executions").mock(
            side_effect=[
                httpx.Response(200, json={"items": [summary(2)], "total": 2, "page": 1, "page_size": 1}),
                httpx.Response(200, json={"items": [summary(1)], "total": 2, "page": 1, "page_size": 1}),
                httpx.Response(200, json={"items": [], "total": 2, "page": 1, "page_size": 1}),
            ]
        )
        respx.post(f"{BASE}/executions/exec_2/cancel").mock(
            side_effect=[
                problem(503, "unavailable"),
                httpx.Response(200, json=execution("exec_2", "cancelled")),
            ]
        )
        ids = [e.id async for e in c.executions.list(page_size=1)]
        cancelled = await c.executions.cancel("exec_2", reason="stop")
    assert ids == ["exec_2", "exec_1"]
    assert cancelled.status == "cancelled"
    await c.close()


# ---- execution and checkpoint keys, deletion, newest-first lists, filters, writes (docs/api.md) ----


def test_an_execution_key_is_sent_and_an_existing_execution_comes_back(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/executions").mock(
            side_effect=[
                httpx.Response(201, json=execution(key="thread-1")),
                httpx.Response(200, json=execution(status="paused", key="thread-1")),
                httpx.Response(201, json=execution("exec_2")),
            ]
        )
        new = client.executions.create(workflow_id="wf_1", key="thread-1")
        existing = client.executions.create(workflow_id="wf_1", key="thread-1", input={"ignored": True})
        client.executions.create(workflow_id="wf_1")
    assert (new.key, existing.key, existing.status) == ("thread-1", "thread-1", "paused")
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert bodies[0] == {"workflow_id": "wf_1", "key": "thread-1"}
    assert "key" not in bodies[2], "no key: none is sent"


def test_executions_by_key(client: Cairn) -> None:
    with respx.mock:
        route = respx.get(f"{BASE}/executions").respond(
            200, json={"items": [summary(1) | {"key": "t"}], "total": 1, "page": 1, "page_size": 100}
        )
        found = client.executions.list(workflow_id="wf_1", key="t").first_page()
    assert [e.key for e in found.items] == ["t"]
    params = route.calls.last.request.url.params
    assert (params["workflow_id"], params["key"]) == ("wf_1", "t")


def test_tags_are_sent_at_the_start_and_as_one_filter_each(client: Cairn) -> None:
    tags = {"team": "search", "url": "https://a.example/x"}
    with respx.mock:
        started = respx.post(f"{BASE}/executions").respond(201, json=execution(tags=tags))
        listed = respx.get(f"{BASE}/executions").respond(
            200, json={"items": [summary(1) | {"tags": tags}], "total": 1, "page": 1, "page_size": 100}
        )
        e = client.executions.create(workflow_id="wf_1", tags=tags)
        client.executions.create(workflow_id="wf_1")
        found = client.executions.list(tags=tags, status="failed").first_page()
    assert e.tags == tags
    assert json.loads(started.calls[0].request.content) == {"workflow_id": "wf_1", "tags": tags}
    assert "tags" not in json.loads(started.calls[1].request.content), "no tags: none are sent"
    params = listed.calls.last.request.url.params
    assert params.get_list("tag") == ["team:search", "url:https://a.example/x"]
    assert params["status"] == "failed"
    assert found.items[0].tags == tags


def test_delete_sends_delete_again_while_the_api_answers_202(client: Cairn) -> None:
    more = {"id": "exec_1", "deleted": True, "remaining": True}
    with respx.mock:
        route = respx.delete(f"{BASE}/executions/exec_1").mock(
            side_effect=[httpx.Response(202, json=more), httpx.Response(202, json=more), httpx.Response(204)]
        )
        assert client.executions.delete("exec_1") is None
    assert len(route.calls) == 3


def test_delete_of_an_unknown_execution_is_not_found_and_a_lost_204_is_done(client: Cairn) -> None:
    more = {"id": "exec_1", "deleted": True, "remaining": True}
    with respx.mock:
        respx.delete(f"{BASE}/executions/exec_9").mock(return_value=problem(404, "not_found"))
        with pytest.raises(errors.NotFound):
            client.executions.delete("exec_9")
        respx.delete(f"{BASE}/executions/exec_1").mock(
            side_effect=[httpx.Response(202, json=more), problem(404, "not_found")]
        )
        client.executions.delete("exec_1")  # the 204 of the second request was lost: done


def test_delete_is_bounded(client: Cairn) -> None:
    more = {"id": "exec_1", "deleted": True, "remaining": True}
    with respx.mock:
        route = respx.delete(f"{BASE}/executions/exec_1").respond(202, json=more)
        with pytest.raises(errors.DeletionIncomplete, match="delete again"):
            client.executions.delete("exec_1", max_requests=5)
    assert len(route.calls) == 5


async def test_the_async_delete_loops_too() -> None:
    c = AsyncCairn("k", base_url=BASE)
    more = {"id": "exec_1", "deleted": True, "remaining": True}
    with respx.mock:
        route = respx.delete(f"{BASE}/executions/exec_1").mock(
            side_effect=[httpx.Response(202, json=more), httpx.Response(204)]
        )
        await c.executions.delete("exec_1")
    assert len(route.calls) == 2
    await c.close()


def test_a_checkpoint_key_is_sent(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/checkpoints").respond(200, json=checkpoint_json(key="lg-1"))
        cp = client.checkpoints.create(execution_id="exec_1", state={"a": 1}, key="lg-1")
    assert cp.key == "lg-1"
    assert json.loads(route.calls.last.request.content)["key"] == "lg-1"


def test_checkpoints_by_key_newest_first_with_metadata_filters(client: Cairn) -> None:
    page = {"limit": 2, "offset": 0}
    with respx.mock:
        route = respx.get(f"{BASE}/checkpoints").mock(
            side_effect=[
                httpx.Response(
                    200,
                    json={"items": [checkpoint_json(id="cp_9"), checkpoint_json(id="cp_8")], "total": 3}
                    | page,
                ),
                httpx.Response(200, json={"items": [checkpoint_json(id="cp_7")], "total": 3} | page),
                httpx.Response(200, json={"items": [checkpoint_json(key="lg-1")], "total": 1} | page),
            ]
        )
        ids = [
            c.id
            for c in client.checkpoints.list(
                execution_id="exec_1",
                order="desc",
                metadata={"source": '"loop"', "step": "3"},
                starting_after="cp_10",
                limit=2,
            )
        ]
        client.checkpoints.list(execution_id="exec_1", key="lg-1").first_page()
    assert ids == ["cp_9", "cp_8", "cp_7"]
    first, second, by_key = (call.request.url for call in route.calls)
    assert first.params["order"] == "desc"
    assert first.params["metadata[source]"] == '"loop"'
    assert first.params["metadata[step]"] == "3"
    assert b"metadata%5Bsource%5D=%22loop%22" in first.query, "deepObject, percent-encoded"
    assert first.params["starting_after"] == "cp_10"
    assert second.params["starting_after"] == "cp_8", "the cursor follows the list's order"
    assert second.params["metadata[step]"] == "3", "the filters stay on every page"
    assert (by_key.params["key"], "order" in by_key.params) == ("lg-1", False)


def test_writes_are_stored_and_listed(client: Cairn) -> None:
    write = {"task_id": "t1", "task_path": "a:b", "index": -3, "channel": "__interrupt__", "value": [1]}
    with respx.mock:
        put = respx.post(f"{BASE}/checkpoints/cp_1/writes").respond(
            200, json={"checkpoint_id": "cp_1", "total": 2}
        )
        respx.get(f"{BASE}/checkpoints/cp_1/writes").respond(
            200, json={"checkpoint_id": "cp_1", "items": [write], "total": 1}
        )
        stored = client.checkpoints.put_writes(
            "cp_1",
            task_id="t1",
            task_path="a:b",
            writes=[{"index": 0, "channel": "messages", "value": {"x": None}}, {"index": -3, "channel": "c"}],
        )
        listed = client.checkpoints.list_writes("cp_1")
        with pytest.raises(errors.PayloadTooLarge, match="writes"):
            client.checkpoints.put_writes(
                "cp_1", task_id="t1", writes=[{"index": 0, "channel": "c", "value": "a" * (4 * 1024 * 1024)}]
            )
        with pytest.raises(TypeError, match="JSON"):
            client.checkpoints.put_writes(
                "cp_1", task_id="t1", writes=[{"index": 0, "channel": "c", "value": {1}}]
            )
    assert stored.total == 2
    assert json.loads(put.calls.last.request.content) == {
        "task_id": "t1",
        "task_path": "a:b",
        "writes": [
            {"index": 0, "channel": "messages", "value": {"x": None}},
            {"index": -3, "channel": "c", "value": None},
        ],
    }
    assert len(put.calls) == 1, "nothing sent for writes refused before sending"
    assert "Idempotency-Key" in put.calls.last.request.headers
    assert (listed.total, listed.items[0].channel, listed.items[0].value) == (1, "__interrupt__", [1])


# ---- keys ----

SECRET = "cairn_" + "s" * 43


def api_key(n: int, **fields: Any) -> dict[str, Any]:
    body = {
        "id": f"key_{n}",
        "name": f"key {n}",
        "prefix": "cairn_abcd",
        "created_at": "2026-11-24T10:00:00.000Z",
        "revoked_at": None,
        "scopes": ["*"],
        "expires_at": None,
    }
    return {**body, **fields}


def test_keys_are_listed_created_with_their_secret_and_revoked(client: Cairn) -> None:
    with respx.mock:
        respx.get(f"{BASE}/keys").respond(
            200, json={"items": [api_key(2), api_key(1, revoked_at="2026-11-25T10:00:00.000Z")], "total": 2}
        )
        created_route = respx.post(f"{BASE}/keys").respond(201, json={**api_key(3, name="CI"), "key": SECRET})
        revoke = respx.delete(f"{BASE}/keys/key_2").respond(204)
        listed = client.keys.list()
        created = client.keys.create(name="CI")
        assert client.keys.revoke("key_2") is None
    assert [(k.id, k.revoked_at is None) for k in listed] == [("key_2", True), ("key_1", False)]
    assert listed[1].api_json()["revoked_at"] == "2026-11-25T10:00:00.000Z", "the API's own JSON"
    assert (created.id, created.name, created.key) == ("key_3", "CI", SECRET)
    request = created_route.calls.last.request
    assert json.loads(request.content) == {"name": "CI"}
    assert request.headers["Idempotency-Key"]
    assert revoke.call_count == 1


def test_a_retried_create_makes_one_key_whose_secret_the_replay_does_not_hold(client: Cairn) -> None:
    with respx.mock:
        route = respx.post(f"{BASE}/keys").mock(
            side_effect=[httpx.ConnectError("reset"), httpx.Response(201, json={**api_key(3), "key": None})]
        )
        created = client.keys.create(name="CI")
    assert created.key is None
    assert len({c.request.headers["Idempotency-Key"] for c in route.calls}) == 1


def test_revoking_the_last_live_key_or_with_a_revoked_key_is_a_typed_error(client: Cairn) -> None:
    last = "invalid state: key key_1 is the tenant's last live key; create another before revoking it"
    with respx.mock:
        respx.delete(f"{BASE}/keys/key_1").mock(return_value=problem(409, "invalid_state", last))
        respx.delete(f"{BASE}/keys/key_2").mock(return_value=problem(401, "unauthorized"))
        with pytest.raises(errors.InvalidState) as refused:
            client.keys.revoke("key_1")
        with pytest.raises(errors.Unauthorized):
            client.keys.revoke("key_2")
    assert refused.value.detail == last


async def test_the_async_client_has_keys_too() -> None:
    async with AsyncCairn("k", base_url=BASE) as c:
        with respx.mock:
            respx.get(f"{BASE}/keys").respond(200, json={"items": [api_key(1)], "total": 1})
            respx.post(f"{BASE}/keys").respond(201, json={**api_key(2), "key": SECRET})
            revoke = respx.delete(f"{BASE}/keys/key_1").respond(204)
            assert [k.id for k in await c.keys.list()] == ["key_1"]
            assert (await c.keys.create(name="n")).key == SECRET
            await c.keys.revoke("key_1")
    assert revoke.call_count == 1
