"""CairnSaver without a server: against an in-memory Cairn that follows the contract
(``fake_cairn.py``, behind respx)."""

from __future__ import annotations

import dataclasses
import json
import operator
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, RESUME
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from cairn import AsyncCairn, Cairn, errors
from cairn.langgraph import FORMAT, TYPED, CairnSaver, ThreadEnded

from . import fake_cairn
from .fake_cairn import BASE, FakeCairn, Problem

fake = fake_cairn.fake  # the fixture


@pytest.fixture
def saver(fake: FakeCairn) -> Iterator[CairnSaver]:
    s = CairnSaver(Cairn("k", base_url=BASE), workflow="agent")
    yield s
    s.close()  # what it holds goes to this test's fake, not the next one's


def at_once(saver: CairnSaver) -> None:
    """Has the saver send plain writes at once, as it sends interrupts and errors (the
    path these tests are about), instead of holding them for the next ``put``."""
    saver._held.close()


def checkpoint(**values: Any) -> Checkpoint:
    return Checkpoint(
        v=4,
        id=str(uuid6(clock_seq=-1)),
        ts=datetime.now(timezone.utc).isoformat(),
        channel_values=values,
        channel_versions={k: 1 for k in values},
        versions_seen={},
        updated_channels=None,
    )


def config(thread: str = "t1", ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(
    saver: CairnSaver,
    thread: str = "t1",
    parent: str | None = None,
    ns: str = "",
    step: int = 0,
    **values: Any,
) -> dict[str, Any]:
    meta: CheckpointMetadata = {"source": "loop", "step": step, "parents": {}}
    stored: dict[str, Any] = saver.put(config(thread, ns, parent), checkpoint(**values), meta, {})  # type: ignore[arg-type]
    return stored


def state_of(fake: FakeCairn, stored: dict[str, Any]) -> dict[str, Any]:
    key = stored["configurable"]["checkpoint_id"]
    (c,) = [c for c in fake.checkpoints.values() if c["key"] == key]
    return c


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Ticket(BaseModel):
    id: str
    tags: list[str]


# ---- values ----


def test_plain_json_is_stored_readable_and_the_rest_typed(fake: FakeCairn, saver: CairnSaver) -> None:
    plain = {"text": "héllo", "n": 3, "f": 2.5, "ok": True, "none": None, "list": [1, {"a": [2]}]}
    other = {
        "raw": b"\x00\xff",
        "pair": (1, 2),
        "set": {1, 2},
        "point": Point(1, 2),
        "ticket": Ticket(id="T-7", tags=["a"]),
        "int_keys": {1: "a"},
        "nan": float("nan"),
        "marker": {TYPED: "looks like ours"},
    }
    stored = put(saver, **plain, **other)
    cairn = state_of(fake, stored)
    assert cairn["state"]["format"] == FORMAT
    values = cairn["state"]["checkpoint"]["channel_values"]
    for name, value in plain.items():
        assert values[name] == value, "plain JSON is stored as it is"
    for name in other:
        assert set(values[name]) == {TYPED}, name
        kind, data = values[name][TYPED]
        assert isinstance(kind, str)
        assert isinstance(data, str)

    back = saver.get_tuple(stored)
    assert back is not None
    got = back.checkpoint["channel_values"]
    for name, value in plain.items():
        assert got[name] == value
    assert got["raw"] == b"\x00\xff"
    assert got["set"] == {1, 2}
    assert got["point"] == Point(1, 2)
    assert got["ticket"] == Ticket(id="T-7", tags=["a"])
    assert got["int_keys"] == {1: "a"}
    assert got["marker"] == {TYPED: "looks like ours"}
    assert got["pair"] == saver.serde.loads_typed(saver.serde.dumps_typed((1, 2))), "as the serde gives it"


def test_the_whole_checkpoint_and_metadata_are_in_the_state(fake: FakeCairn, saver: CairnSaver) -> None:
    first = put(saver, step=-1, messages=["hi"])
    second = put(saver, parent=first["configurable"]["checkpoint_id"], step=0, messages=["hi", "yo"])
    state = state_of(fake, second)["state"]
    assert state["checkpoint_ns"] == ""
    assert state["parent_checkpoint_id"] == first["configurable"]["checkpoint_id"]
    assert set(state["checkpoint"]) >= {
        "v",
        "id",
        "ts",
        "channel_values",
        "channel_versions",
        "versions_seen",
    }
    assert state["checkpoint"]["channel_versions"] == {"messages": 1}
    assert state["metadata"] == {"source": "loop", "step": 0, "parents": {}}
    back = saver.get_tuple(second)
    assert back is not None
    assert back.parent_config is not None
    assert back.parent_config["configurable"]["checkpoint_id"] == first["configurable"]["checkpoint_id"]
    assert back.metadata == {"source": "loop", "step": 0, "parents": {}}


def test_writes_are_encoded_the_same_way_and_come_back_in_langgraph_order(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    stored = put(saver)
    saver.put_writes(stored, [("b", {"plain": [1]}), ("a", b"bytes")], "task-2", task_path="~p, 2")
    saver.put_writes(stored, [("c", (1,))], "task-1", task_path="~p, 1")
    saver.put_writes(stored, [("b", "again")], "task-2", task_path="~p, 2")  # replaces (task-2, 0)
    saver.get_tuple(stored)  # a read sends the writes held for the next put
    cp = state_of(fake, stored)
    raw = fake.writes[cp["id"]]
    assert [(w["task_id"], w["index"], w["channel"]) for w in raw] == [
        ("task-2", 0, "b"),
        ("task-2", 1, "a"),
        ("task-1", 0, "c"),
    ]
    assert raw[0]["value"] == "again"
    assert set(raw[1]["value"]) == {TYPED}
    back = saver.get_tuple(stored)
    assert back is not None
    assert back.pending_writes == [("task-1", "c", [1]), ("task-2", "b", "again"), ("task-2", "a", b"bytes")]


def test_special_channels_take_langgraphs_negative_indexes(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [("x", 1), (RESUME, "yes")], "task")
    raw = fake.writes[state_of(fake, stored)["id"]]
    assert [(w["index"], w["channel"]) for w in raw] == [(0, "x"), (-4, RESUME)]


# ---- metadata ----


def test_cairn_metadata_indexes_the_namespace_and_scalar_metadata(fake: FakeCairn, saver: CairnSaver) -> None:
    meta: Any = {
        "source": "loop",
        "step": 3,
        "parents": {"": "abc"},
        "run_id": "run-1",
        "score": 2.0,
        "flag": True,
        "long": "x" * 600,
        "k" * 41: "too long a key",
        "none": None,
    }
    stored = saver.put(config(ns="child:1"), checkpoint(), meta, {})
    cp = state_of(fake, stored)
    assert cp["metadata"] == {
        "checkpoint_ns": '"child:1"',
        "source": '"loop"',
        "step": "3",
        "run_id": '"run-1"',
        "score": "2",
        "flag": "true",
        "none": "null",
    }
    assert cp["name"] == "loop 3 in child:1"
    back = saver.get_tuple(stored)
    assert back is not None
    assert back.metadata == meta, "the LangGraph metadata is kept exactly in the state"


def test_list_filters_on_the_server_and_checks_again_exactly(fake: FakeCairn, saver: CairnSaver) -> None:
    parent = None
    for step, source in enumerate(["input", "loop", "loop", "update"]):
        meta: Any = {"source": source, "step": step, "parents": {}, "tag": {"nested": step}}
        parent = saver.put(config(checkpoint_id=parent), checkpoint(), meta, {})["configurable"][
            "checkpoint_id"
        ]
    fake.requests.clear()
    found = list(saver.list(config(), filter={"source": "loop"}))
    assert [t.metadata["step"] for t in found] == [2, 1], "newest first"
    listed = [q for q in fake.requests if q == ("GET", "/checkpoints")]
    assert listed, "the filter went to the server"
    assert [t.metadata["step"] for t in saver.list(config(), filter={"step": 2, "source": "loop"})] == [2]
    assert [t.metadata["step"] for t in saver.list(config(), filter={"step": True})] == [1], "True == 1"
    assert [t.metadata["step"] for t in saver.list(config(), filter={"tag": {"nested": 3}})] == [3]
    assert list(saver.list(config(), filter={"source": "fork"})) == []
    assert [t.metadata["step"] for t in saver.list(config(), filter={"missing": None})] == [3, 2, 1, 0]


def test_the_server_filter_is_sent_as_metadata_params(fake: FakeCairn, saver: CairnSaver) -> None:
    put(saver, step=3)
    sent: list[str] = []
    original = fake.list_checkpoints

    def spy(params: dict[str, str], query: list[tuple[str, str]], body: Any) -> Any:
        sent.append("&".join(sorted(f"{k}={v}" for k, v in query if k.startswith("metadata["))))
        return original(params, query, body)

    fake.list_checkpoints = spy  # type: ignore[method-assign]
    assert len(list(saver.list(config(), filter={"source": "loop", "step": 3, "parents": {}}))) == 1
    # The second: checkpoints whose metadata did not all fit; parents (no scalar) is
    # checked by the saver alone.
    assert sorted(sent) == [
        'metadata[checkpoint_ns]=""&metadata[langgraph_partial]=true',
        'metadata[checkpoint_ns]=""&metadata[source]="loop"&metadata[step]=3',
    ]
    sent.clear()
    assert len(list(saver.list(config(), filter={"step": 0}))) == 0
    assert sent == ['metadata[checkpoint_ns]=""'], "0 == False: checked by the saver alone"


def test_metadata_that_does_not_fit_is_flagged_and_still_found(fake: FakeCairn, saver: CairnSaver) -> None:
    many: Any = {"source": "loop", "step": 1, "parents": {}} | {f"key{i:02}": f"v{i}" for i in range(60)}
    stored = saver.put(config(), checkpoint(), many, {})
    cp = state_of(fake, stored)
    assert len(cp["metadata"]) == 50
    assert cp["metadata"]["langgraph_partial"] == "true"
    assert "key59" not in cp["metadata"]
    put(saver, parent=stored["configurable"]["checkpoint_id"], step=2)
    found = list(saver.list(config(), filter={"key59": "v59"}))
    assert [t.config["configurable"]["checkpoint_id"] for t in found] == [
        stored["configurable"]["checkpoint_id"]
    ]


def test_list_before_and_limit(fake: FakeCairn, saver: CairnSaver) -> None:
    ids: list[str] = []
    parent = None
    for step in range(5):
        parent = put(saver, parent=parent, step=step)["configurable"]["checkpoint_id"]
        ids.append(parent)
    before = config(checkpoint_id=ids[3])
    assert [t.checkpoint["id"] for t in saver.list(config(), before=before)] == [ids[2], ids[1], ids[0]]
    assert [t.checkpoint["id"] for t in saver.list(config(), before=before, limit=2)] == [ids[2], ids[1]]
    unknown = config(checkpoint_id=str(uuid6(clock_seq=-1)))  # newer than all, not stored
    assert len(list(saver.list(config(), before=unknown))) == 5
    assert [t.checkpoint["id"] for t in saver.list(config(checkpoint_id=ids[1]))] == [ids[1]]


def test_list_without_a_thread_reads_every_thread_of_the_workflow(fake: FakeCairn, saver: CairnSaver) -> None:
    put(saver, thread="a")
    put(saver, thread="b")
    put(saver, thread="b", ns="sub:1")
    assert sorted(t.config["configurable"]["thread_id"] for t in saver.list(None)) == ["a", "b", "b"]
    assert len(list(saver.list(None, limit=2))) == 2
    assert len(list(saver.list({"configurable": {"checkpoint_ns": ""}}))) == 2


# ---- lookups by key ----


def test_threads_and_checkpoints_are_found_by_key(fake: FakeCairn, saver: CairnSaver) -> None:
    first = put(saver)
    second = put(saver, parent=first["configurable"]["checkpoint_id"], step=1)
    e = fake.only_execution()
    assert e["key"] == "t1"
    assert [c["key"] for c in fake.checkpoints_of(e["id"])] == [
        first["configurable"]["checkpoint_id"],
        second["configurable"]["checkpoint_id"],
    ]
    assert fake.calls("POST", "/executions") == 1, "started once, then known"

    other = CairnSaver(Cairn("k", base_url=BASE), workflow="agent")  # knows nothing yet
    fake.requests.clear()
    tup = other.get_tuple(first)
    assert tup is not None
    assert tup.checkpoint["id"] == first["configurable"]["checkpoint_id"]
    assert fake.requests[:3] == [
        ("GET", "/workflows"),
        ("GET", "/executions"),  # ?workflow_id=...&key=t1
        ("GET", "/checkpoints"),  # ?execution_id=...&key=<checkpoint id>
    ]
    latest = other.get_tuple(config())
    assert latest is not None
    assert latest.checkpoint["id"] == second["configurable"]["checkpoint_id"]
    assert other.get_tuple(config("nobody")) is None
    assert other.get_tuple(config(checkpoint_id=str(uuid.uuid4()))) is None
    assert other.get_tuple(config(ns="sub:1")) is None
    assert other.get_tuple(config(ns="sub:1", checkpoint_id=first["configurable"]["checkpoint_id"])) is None
    assert fake.calls("POST", "/executions") == 0, "reads start nothing"


def test_the_workflow_is_an_id_a_name_found_or_created(fake: FakeCairn) -> None:
    client = Cairn("k", base_url=BASE)
    put(CairnSaver(client, workflow="agent"))
    (wf,) = fake.workflows.values()
    assert (wf["name"], wf["workflow_type"]) == ("agent", "langgraph")
    put(CairnSaver(client, workflow="agent"), thread="t2")
    assert len(fake.workflows) == 1, "found by name"
    fake.requests.clear()
    put(CairnSaver(client, workflow=wf["id"]), thread="t3")
    assert ("GET", "/workflows") not in fake.requests


def test_each_threads_execution_starts_with_the_savers_tags(fake: FakeCairn) -> None:
    saver = CairnSaver(Cairn("k", base_url=BASE), workflow="agent", tags={"team": "search"})
    put(saver, thread="t1")
    put(saver, thread="t2")
    put(CairnSaver(Cairn("k", base_url=BASE), workflow="agent"), thread="t3")
    tags = {e["key"]: e["tags"] for e in fake.executions.values()}
    assert tags == {"t1": {"team": "search"}, "t2": {"team": "search"}, "t3": {}}


def test_thread_ids_must_be_keys(saver: CairnSaver) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        put(saver, thread="x" * 257)
    with pytest.raises(ValueError, match="thread_id"):
        saver.get_tuple({"configurable": {}})  # type: ignore[arg-type]


# ---- the execution's status ----


def test_an_interrupt_pauses_and_the_next_write_replays_from_its_checkpoint(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    first = put(saver)
    second = put(saver, parent=first["configurable"]["checkpoint_id"], step=1)
    saver.put_writes(second, [(INTERRUPT, [{"value": "approve?"}])], "task")
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("paused", 1)

    saver.get_tuple(config())  # a new run reads its checkpoint first
    saver.put_writes(second, [(RESUME, "yes")], "task")
    assert (e["status"], e["attempt"]) == ("running", 2)
    assert e["current_checkpoint_id"] == state_of(fake, second)["id"], "replayed from that checkpoint"


def test_an_interrupt_in_a_subgraph_pauses_only_through_its_parent(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    stored = put(saver, ns="inner:1")
    saver.put_writes(stored, [(INTERRUPT, "q?")], "task")
    assert fake.only_execution()["status"] == "running"


def test_an_error_fails_the_execution_with_its_type_message_and_details(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    stored = put(saver)

    class RateLimitHit(Exception):
        pass

    try:
        raise RateLimitHit("the model said no")
    except RateLimitHit as caught:
        error = caught
    saver.put_writes(stored, [(ERROR, error)], "task-9")
    e = fake.only_execution()
    assert e["status"] == "failed"
    assert e["error"] == {"error_type": "RATE_LIMIT_HIT", "message": "the model said no"}
    (failure,) = fake.failures
    assert failure["details"]["task_id"] == "task-9"
    assert failure["details"]["channel"] == ERROR
    assert "RateLimitHit" in failure["details"]["traceback"]
    back = saver.get_tuple(stored)
    assert back is not None
    assert [(t, c) for t, c, _ in back.pending_writes or []] == [("task-9", ERROR)]


def test_an_error_value_that_is_no_exception_fails_as_agent_error(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [(ERROR, "something\x00 went wrong"), (INTERRUPT, {"reason": "x"})], "t")
    e = fake.only_execution()
    assert e["status"] == "failed", "an error wins over an interrupt"
    assert e["error"] == {"error_type": "AGENT_ERROR", "message": "something  went wrong"}


def test_an_error_taken_by_an_error_handler_does_not_fail(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [(ERROR, ValueError("x")), ("__error_source_node__", "node")], "t")
    assert fake.only_execution()["status"] == "running"


def test_a_write_to_a_failed_execution_replays_it_first(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [(ERROR, ValueError("boom"))], "t")
    saver.get_tuple(config())  # a retry: invoke(None, config) reads the checkpoint first
    nxt = put(saver, parent=stored["configurable"]["checkpoint_id"], step=1)
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("running", 2)
    replays = [r for r in fake.requests if r[1].endswith("/replay")]
    assert len(replays) == 1
    assert state_of(fake, nxt)["parent_checkpoint_id"] == state_of(fake, stored)["id"]


def test_late_writes_of_the_same_run_keep_the_runs_status(fake: FakeCairn, saver: CairnSaver) -> None:
    at_once(saver)
    stored = put(saver)
    saver.put_writes(stored, [(INTERRUPT, "q?")], "asking")
    saver.put_writes(stored, [("out", 1)], "sibling")  # a parallel task finishing later
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("paused", 2), "stored (replayed), then paused again"
    assert len(fake.writes[state_of(fake, stored)["id"]]) == 2


def test_a_pause_waits_for_the_writes_of_the_thread_under_way(fake: FakeCairn, saver: CairnSaver) -> None:
    at_once(saver)

    stored = put(saver)
    slowed = threading.Event()

    def slow_interrupt(method: str, path: str) -> None:
        if path.endswith("/writes") and not slowed.is_set():
            slowed.set()
            time.sleep(0.3)  # the other write arrives meanwhile

    fake.before = slow_interrupt
    asking = threading.Thread(target=saver.put_writes, args=(stored, [(INTERRUPT, "q?")], "asking"))
    asking.start()
    slowed.wait()
    saver.put_writes(stored, [("out", 1)], "sibling")  # waits for the lock, then pauses
    asking.join()
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("paused", 1), "paused once, after both: no replay"
    assert fake.calls("POST", r"/executions/[^/]+/pause") == 1
    assert len(fake.writes[state_of(fake, stored)["id"]]) == 2


def test_cancelled_tasks_of_a_failed_run_store_nothing(fake: FakeCairn, saver: CairnSaver) -> None:
    import asyncio

    stored = put(saver)
    saver.put_writes(stored, [(ERROR, ValueError("boom"))], "failing")
    saver.put_writes(stored, [("partial", 1), (ERROR, asyncio.CancelledError())], "cancelled")
    e = fake.only_execution()
    assert (e["status"], e["attempt"], len(fake.failures)) == ("failed", 1, 1)


def test_a_status_changed_behind_the_saver_is_read_and_the_write_sent_again(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    first = put(saver)
    second = put(saver, parent=first["configurable"]["checkpoint_id"], step=1)
    e = fake.only_execution()
    cp1 = state_of(fake, first)["id"]
    fake.executions[e["id"]] = e | {"status": "running"}
    fake.act({}, [], {"checkpoint_id": cp1}, e["id"], "rollback")  # an operator rolls back: paused
    e = fake.only_execution()
    assert e["status"] == "paused"
    assert saver.get_tuple(config()).checkpoint["id"] == first["configurable"]["checkpoint_id"]  # type: ignore[union-attr]

    fake.requests.clear()
    again = put(saver, parent=first["configurable"]["checkpoint_id"], step=1)
    assert (e["status"], e["attempt"]) == ("running", 2)
    assert fake.requests == [
        ("POST", "/checkpoints"),  # 409: the saver still thought it running
        ("GET", f"/executions/{e['id']}"),  # paused
        ("GET", "/checkpoints"),  # the Cairn id of the config's checkpoint
        ("POST", f"/executions/{e['id']}/replay"),
        ("POST", "/checkpoints"),
    ]
    assert e["current_checkpoint_id"] == state_of(fake, again)["id"]
    assert state_of(fake, again)["parent_checkpoint_id"] == cp1, "replayed from the rolled-back-to checkpoint"
    assert second["configurable"]["checkpoint_id"] not in [c["key"] for c in fake.checkpoints.values()]


def test_a_409_on_writes_replays_and_sends_them_again(fake: FakeCairn, saver: CairnSaver) -> None:
    at_once(saver)
    stored = put(saver)
    e = fake.only_execution()
    e["status"] = "paused"  # behind the saver's back
    saver.put_writes(stored, [("x", 1)], "t")
    assert (e["status"], e["attempt"]) == ("running", 2)
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 2, "refused once, then stored"
    assert len(fake.writes[state_of(fake, stored)["id"]]) == 1


def test_an_execution_deleted_behind_the_saver_starts_again(fake: FakeCairn, saver: CairnSaver) -> None:
    put(saver)
    first = fake.only_execution()["id"]
    fake.delete_execution({}, [], None, first)
    put(saver)
    assert fake.only_execution()["id"] != first


def test_reads_look_a_thread_up_again_when_its_execution_went(fake: FakeCairn, saver: CairnSaver) -> None:
    put(saver)
    other = CairnSaver(Cairn("k", base_url=BASE), workflow="agent")
    other.delete_thread("t1")
    again = put(other, step=7)
    assert [t.metadata["step"] for t in saver.list(config())] == [7]
    saver.delete_thread("t1")
    other.put(config(), checkpoint(), {"source": "loop", "step": 8}, {})
    back = saver.get_tuple(config())
    assert back is not None
    assert back.metadata["step"] == 8
    assert again["configurable"]["checkpoint_id"] != back.checkpoint["id"]


def test_ended_threads_raise_a_typed_error(fake: FakeCairn, saver: CairnSaver) -> None:
    at_once(saver)
    stored = put(saver)
    done = saver.complete(stored, output={"answer": 42})
    assert (done.status, done.output) == ("completed", {"answer": 42})
    with pytest.raises(ThreadEnded, match="completed") as caught:
        put(saver, parent=stored["configurable"]["checkpoint_id"])
    assert isinstance(caught.value, errors.InvalidState)
    fresh = CairnSaver(Cairn("k", base_url=BASE), workflow="agent")
    at_once(fresh)
    with pytest.raises(ThreadEnded):
        fresh.put_writes(stored, [("x", 1)], "t")
    assert fresh.get_tuple(stored) is not None, "reads still work"


def test_writes_wait_for_the_put_of_their_checkpoint(fake: FakeCairn, saver: CairnSaver) -> None:

    first = put(saver)
    later = checkpoint()
    meta: Any = {"source": "loop", "step": 1, "parents": {}}
    parent = config(checkpoint_id=first["configurable"]["checkpoint_id"])

    def put_late() -> None:
        time.sleep(0.2)  # LangGraph sends writes without waiting for the put
        saver.put(parent, later, meta, {})  # type: ignore[arg-type]

    putter = threading.Thread(target=put_late)
    putter.start()
    saver.put_writes(config(checkpoint_id=later["id"]), [("x", 1)], "task")
    putter.join()
    back = saver.get_tuple(config(checkpoint_id=later["id"]))
    assert back is not None
    assert back.pending_writes == [("task", "x", 1)]


Writer = tuple[threading.Thread, list[BaseException]]


def write_in_background(saver: CairnSaver, checkpoint_id: str) -> Writer:
    """``put_writes`` on a checkpoint in a thread of its own, and what it raised."""
    failed: list[BaseException] = []

    def write() -> None:
        try:
            saver.put_writes(config(checkpoint_id=checkpoint_id), [("x", 1)], "task")
        except BaseException as error:  # reported by the test
            failed.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    return writer, failed


@pytest.mark.parametrize("sending", ["an earlier put", "an earlier checkpoint's writes"])
def test_writes_wait_while_the_thread_sends_what_comes_before(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch, sending: str
) -> None:
    """LangGraph stores a thread's checkpoints, and the writes before each, one after
    another, and sends a checkpoint's writes without waiting: with puts running behind,
    writes wait past the grace for as long as the thread has a put or a write being sent
    (a slow upload of a large state)."""
    at_once(saver)
    monkeypatch.setattr("cairn.langgraph._traffic._PUT_GRACE", 0.05)
    first = put(saver)
    later = checkpoint()
    under_way = (
        saver._traffic.putting_checkpoint("t1", "the-checkpoint-before")
        if sending == "an earlier put"
        else saver._traffic.sending_thread("t1")
    )
    with under_way:
        asked = len(fake.requests)
        writer, failed = write_in_background(saver, later["id"])
        time.sleep(0.3)  # six graces
        assert not failed, failed
        assert writer.is_alive(), "still waiting"
        # Newer than any checkpoint the saver stored for the thread: its put is still to
        # come, so the writes wait for it without asking the API first.
        assert fake.requests[asked:] == []
        meta: Any = {"source": "loop", "step": 1, "parents": {}}
        saver.put(config(checkpoint_id=first["configurable"]["checkpoint_id"]), later, meta, {})  # type: ignore[arg-type]
    writer.join()
    assert not failed, failed
    back = saver.get_tuple(config(checkpoint_id=later["id"]))
    assert back is not None
    assert back.pending_writes == [("task", "x", 1)]


def test_writes_stop_waiting_when_the_put_of_their_checkpoint_fails(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_once(saver)
    monkeypatch.setattr("cairn.langgraph._traffic._PUT_GRACE", 60.0)
    first = put(saver)
    later = checkpoint()
    writer, failed = write_in_background(saver, later["id"])

    def refuse(method: str, path: str) -> None:
        if (method, path) == ("POST", "/checkpoints"):
            raise OSError("the upload broke")

    fake.before = refuse
    meta: Any = {"source": "loop", "step": 1, "parents": {}}
    with pytest.raises(OSError, match="upload broke"):
        saver.put(config(checkpoint_id=first["configurable"]["checkpoint_id"]), later, meta, {})  # type: ignore[arg-type]
    writer.join(timeout=10)
    assert not writer.is_alive(), "the writes stop waiting, not after the 60 s grace"
    assert [type(e) for e in failed] == [errors.NotFound], failed


def test_writes_to_a_checkpoint_never_stored_are_not_found(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_once(saver)
    monkeypatch.setattr("cairn.langgraph._traffic._PUT_GRACE", 0.05)
    put(saver)
    with pytest.raises(errors.NotFound, match="not stored"):
        saver.put_writes(config(checkpoint_id=str(uuid6(clock_seq=-1))), [("x", 1)], "task")


# ---- delete and copy ----


def test_delete_thread_loops_while_the_api_answers_202(fake: FakeCairn, saver: CairnSaver) -> None:
    fake.delete_rounds = 3
    put(saver)
    put(saver, thread="other")
    saver.delete_thread("t1")
    assert fake.calls("DELETE", r"/executions/[^/]+") == 4, "three 202s, then 204"
    assert saver.get_tuple(config()) is None
    assert saver.get_tuple(config("other")) is not None
    saver.delete_thread("never-seen")  # no execution: nothing to do
    assert fake.calls("DELETE", r"/executions/[^/]+") == 4
    put(saver)  # the key is free again: a new execution
    assert len(fake.executions) == 2


def test_copy_thread_keeps_ids_metadata_parents_and_writes(fake: FakeCairn, saver: CairnSaver) -> None:
    first = put(saver, step=-1, a=1)
    second = put(saver, parent=first["configurable"]["checkpoint_id"], step=0, a=2, raw=b"x")
    saver.put_writes(second, [("a", 3)], "task")
    saver.copy_thread("t1", "copy")
    source = list(saver.list(config()))
    copied = list(saver.list(config("copy")))
    assert [t.checkpoint["id"] for t in copied] == [t.checkpoint["id"] for t in source]
    assert [t.metadata for t in copied] == [t.metadata for t in source]
    assert copied[0].checkpoint["channel_values"] == {"a": 2, "raw": b"x"}
    assert copied[0].parent_config["configurable"]["checkpoint_id"] == first["configurable"]["checkpoint_id"]  # type: ignore[index]
    assert copied[0].pending_writes == [("task", "a", 3)]
    assert len(fake.executions) == 2
    saver.copy_thread("nobody", "empty")
    assert saver.get_tuple(config("empty")) is None
    assert len(fake.executions) == 2, "nothing copied: no execution started"


# ---- graphs ----


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def approval_graph(saver: CairnSaver, broken: list[bool]) -> Any:
    def review(state: State) -> State:
        return {"steps": [f"review:{interrupt('approve?')}"]}

    def send(state: State) -> State:
        if broken[0]:
            raise TimeoutError("the mail server timed out")
        return {"steps": ["send"]}

    g = StateGraph(State)
    g.add_node("draft", lambda s: {"steps": ["draft"]})
    g.add_node("review", review)
    g.add_node("send", send)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_edge("review", "send")
    g.add_edge("send", END)
    return g.compile(checkpointer=saver)


def test_a_graph_that_interrupts_fails_and_is_retried(fake: FakeCairn, saver: CairnSaver) -> None:
    broken = [True]
    graph = approval_graph(saver, broken)
    cfg = {"configurable": {"thread_id": "ticket-7"}}
    assert "__interrupt__" in graph.invoke({"steps": []}, cfg)
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("paused", 1)
    with pytest.raises(TimeoutError):
        graph.invoke(Command(resume="ok"), cfg)
    assert (e["status"], e["attempt"], e["error"]["error_type"]) == ("failed", 2, "TIMEOUT_ERROR")
    broken[0] = False
    assert graph.invoke(None, cfg) == {"steps": ["draft", "review:ok", "send"]}
    assert (e["status"], e["attempt"]) == ("running", 3)
    history = list(graph.get_state_history(cfg))
    assert [h.metadata["step"] for h in history] == [3, 2, 1, 0, -1]
    assert [c["name"] for c in fake.checkpoints_of(e["id"])] == [
        "input -1",
        "loop 0",
        "loop 1",
        "loop 2",
        "loop 3",
    ]
    assert history[0].values == {"steps": ["draft", "review:ok", "send"]}


async def test_the_async_saver_runs_a_graph_too(fake: FakeCairn) -> None:
    saver = CairnSaver(async_client=AsyncCairn("k", base_url=BASE), workflow="agent")
    graph = approval_graph(saver, [False])
    cfg = {"configurable": {"thread_id": "async-7"}}
    await graph.ainvoke({"steps": []}, cfg)
    e = fake.only_execution()
    assert e["status"] == "paused"
    assert await graph.ainvoke(Command(resume="fine"), cfg) == {"steps": ["draft", "review:fine", "send"]}
    assert (e["status"], e["attempt"]) == ("running", 2)
    assert len([s async for s in graph.aget_state_history(cfg)]) == 5
    await saver.acopy_thread("async-7", "async-8")
    assert (await saver.aget_tuple({"configurable": {"thread_id": "async-8"}})) is not None
    await saver.adelete_thread("async-7")
    assert (await saver.aget_tuple(cfg)) is None  # type: ignore[arg-type]
    await saver.aclose()


def test_a_parallel_task_finishing_after_an_interrupt_leaves_the_execution_paused(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    def ask(state: State) -> State:
        return {"steps": [interrupt("q?")]}

    def slow(state: State) -> State:
        time.sleep(0.2)
        return {"steps": ["slow"]}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_node("slow", slow)
    g.add_edge(START, "ask")
    g.add_edge(START, "slow")
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "p"}}
    graph.invoke({"steps": []}, cfg)
    assert fake.only_execution()["status"] == "paused"
    assert sorted(graph.invoke(Command(resume="a"), cfg)["steps"]) == ["a", "slow"], "slow did not run again"
    assert fake.only_execution()["status"] == "running"


# ---- one request per step: writes held for the next checkpoint ----


def chain(saver: CairnSaver, nodes: int) -> Any:
    g = StateGraph(State)
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        g.add_node(name, lambda s, name=name: {"steps": [name]})
    for a, b in zip([START, *names], [*names, END], strict=True):
        g.add_edge(a, b)
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_step_costs_one_request_its_writes_riding_with_the_next_checkpoint(
    fake: FakeCairn, saver: CairnSaver, durability: str
) -> None:
    graph = chain(saver, 5)
    cfg = {"configurable": {"thread_id": "steps"}}
    assert graph.invoke({"steps": []}, cfg, durability=durability)["steps"] == [f"n{i}" for i in range(5)]
    e = fake.only_execution()
    # An input checkpoint and one per step; each step's writes ride with the next, but
    # for a step whose writes LangGraph hands over after it started the next put (its
    # background threads race): those go on their own at once.
    assert fake.calls("POST", "/checkpoints") == 7
    alone = fake.calls("POST", r"/checkpoints/[^/]+/writes")
    assert fake.pending_writes_sent + alone == 6
    assert fake.pending_writes_sent >= 4, "most steps are one request"
    assert fake.calls("GET", "/checkpoints") == 0, "no lookups"
    # The writes are where LangGraph's own savers keep them: on the step's checkpoint.
    history = list(graph.get_state_history(cfg))
    assert [h.metadata["step"] for h in history] == [5, 4, 3, 2, 1, 0, -1]
    by_step = {
        h.metadata["step"]: [w["channel"] for w in fake.writes.get(cp["id"], [])]
        for h, cp in zip(history, reversed(fake.checkpoints_of(e["id"])), strict=True)
    }
    assert by_step[5] == []
    assert all(by_step[step] for step in range(5)), by_step
    assert graph.invoke(None, cfg)["steps"] == [f"n{i}" for i in range(5)], "nothing to run again"


def test_writes_no_put_claims_go_on_their_own_after_a_second(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cairn.langgraph._held.HOLD_SECONDS", 0.05)
    stored = put(saver)
    saver.put_writes(stored, [("x", 1)], "early")
    cp = state_of(fake, stored)
    deadline = time.monotonic() + 10
    while not fake.writes.get(cp["id"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(w["task_id"], w["value"]) for w in fake.writes[cp["id"]]] == [("early", 1)]
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 1


def test_writes_before_their_checkpoint_are_kept_until_it_is_stored(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As LangGraph's own savers take them: writes for a checkpoint not stored yet wait
    for it, however late it comes (up to ``ORPHAN_SECONDS``)."""
    monkeypatch.setattr("cairn.langgraph._held.HOLD_SECONDS", 0.02)
    monkeypatch.setattr("cairn.langgraph._traffic._PUT_GRACE", 0.02)
    first = put(saver)
    later = checkpoint()
    early = config(checkpoint_id=later["id"])
    saver.put_writes(early, [("x", 1)], "early-task")
    deadline = time.monotonic() + 10
    while not fake.calls("GET", "/checkpoints") and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the timer looked for the checkpoint, found none, and kept them
    assert fake.calls("GET", "/checkpoints") >= 1
    assert fake.writes == {}
    meta: Any = {"source": "loop", "step": 1, "parents": {}}
    saver.put(config(checkpoint_id=first["configurable"]["checkpoint_id"]), later, meta, {})  # type: ignore[arg-type]
    back = saver.get_tuple(early)  # type: ignore[arg-type]
    assert back is not None
    assert back.pending_writes == [("early-task", "x", 1)]


def test_a_read_an_interrupt_or_close_sends_the_held_writes_first(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [("x", 1)], "done-early")
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 0, "held"
    back = saver.get_tuple(stored)
    assert back is not None
    assert back.pending_writes == [("done-early", "x", 1)]
    saver.put_writes(stored, [("y", 2)], "sibling")
    saver.put_writes(stored, [(INTERRUPT, "q?")], "asking")
    assert [w["task_id"] for w in fake.writes[state_of(fake, stored)["id"]]] == [
        "done-early",
        "sibling",
        "asking",
    ]
    assert fake.only_execution()["status"] == "paused"
    other = put(saver, thread="t2")
    saver.put_writes(other, [("z", 3)], "late")
    saver.close()
    assert [w["task_id"] for w in fake.writes[state_of(fake, other)["id"]]] == ["late"]


def test_more_held_than_a_put_carries_is_sent_apart_before_it(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = put(saver)
    saver.put_writes(first, [("a", 1)], "t1")
    saver.put_writes(first, [("b", 2)], "t2")
    monkeypatch.setattr("cairn.langgraph._held.MAX_TASKS", 1)  # as after writes held again
    put(saver, parent=first["configurable"]["checkpoint_id"])
    assert fake.pending_writes_sent == 0
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 2
    assert [w["task_id"] for w in fake.writes[state_of(fake, first)["id"]]] == ["t1", "t2"]


def test_a_write_after_an_interrupt_was_sent_goes_at_once_and_pauses_once(
    fake: FakeCairn, saver: CairnSaver
) -> None:
    stored = put(saver)
    saver.put_writes(stored, [(INTERRUPT, "q?")], "asking")
    saver.put_writes(stored, [("late", 1)], "sibling")  # not held: its checkpoint's writes went
    e = fake.only_execution()
    assert (e["status"], e["attempt"]) == ("paused", 2), "the late write replayed once and paused again"
    assert [w["task_id"] for w in fake.writes[state_of(fake, stored)["id"]]] == ["asking", "sibling"]
    assert saver._held.held() == []


def test_deleting_a_thread_forgets_what_it_held(fake: FakeCairn, saver: CairnSaver) -> None:
    stored = put(saver)
    saver.put_writes(stored, [("x", 1)], "t")
    saver.delete_thread("t1")
    saver.close()
    assert fake.executions == {}
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 0


def test_writes_too_large_to_ride_along_are_sent_apart(
    fake: FakeCairn, saver: CairnSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = put(saver)
    saver.put_writes(first, [("big", "x" * 2000)], "t")
    fake.one_transaction_bytes = 1000  # the checkpoint and the writes pass one transaction: 413
    second = put(saver, parent=first["configurable"]["checkpoint_id"])
    assert [w["task_id"] for w in fake.writes[state_of(fake, first)["id"]]] == ["t"]
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 1
    assert state_of(fake, second)["parent_checkpoint_id"] == state_of(fake, first)["id"]
    monkeypatch.setattr("cairn.langgraph._held.MAX_BYTES", 100)  # more than a put carries: sent at once
    saver.put_writes(second, [("big", "y" * 200)], "u")
    assert fake.calls("POST", r"/checkpoints/[^/]+/writes") == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_throttled_saver_waits_out_the_rate_limit_and_the_graph_goes_on(
    fake: FakeCairn, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """429s past the client's own retries: the saver waits as ``Retry-After`` says and
    sends again; the graph finishes, every step stored once."""
    throttled = iter(range(6))

    def rate_limit(method: str, path: str) -> None:
        if method == "POST" and path == "/checkpoints" and next(throttled, None) is not None:
            raise Problem(429, "rate_limited", "over the limit", headers={"Retry-After": "0.01"})

    fake.before = rate_limit
    if mode == "sync":
        saver = CairnSaver(Cairn("k", base_url=BASE, max_retries=0), workflow="agent")
        out = chain(saver, 3).invoke({"steps": []}, {"configurable": {"thread_id": "busy"}})
    else:
        saver = CairnSaver(async_client=AsyncCairn("k", base_url=BASE, max_retries=0), workflow="agent")
        out = await chain(saver, 3).ainvoke({"steps": []}, {"configurable": {"thread_id": "busy"}})
    assert out["steps"] == ["n0", "n1", "n2"]
    assert len(fake.checkpoints_of(fake.only_execution()["id"])) == 5
    assert fake.calls("POST", "/checkpoints") == 5 + 6, "each throttled call sent again"
    assert "throttling" in caplog.text
    saver.close()


def test_a_saver_throttled_past_its_patience_raises(fake: FakeCairn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cairn.langgraph._driver.THROTTLE_PATIENCE", 0.05)
    fake.before = lambda method, path: (_ for _ in ()).throw(
        Problem(429, "rate_limited", "over the limit", headers={"Retry-After": "0.02"})
    )
    saver = CairnSaver(Cairn("k", base_url=BASE, max_retries=0), workflow="agent")
    with pytest.raises(errors.RateLimited):
        saver.get_tuple(config())
    assert 2 <= len(fake.requests) <= 5


# ---- the conformance suite, offline ----


async def test_the_langgraph_conformance_suite_passes_offline(fake: FakeCairn) -> None:
    fake.delete_rounds = 2

    @checkpointer_test(name="CairnSaver (offline)")
    async def factory() -> Any:
        yield CairnSaver(Cairn("k", base_url=BASE), workflow=f"conformance-{uuid.uuid4()}")

    report = await validate(factory)
    failures = {name: r.failures for name, r in report.results.items() if r.passed is False}
    assert not failures, json.dumps(failures, indent=1)
    assert report.passed_all_base()
    assert all(r.passed is True for r in report.results.values()), report.results
    assert sum(r.tests_passed for r in report.results.values()) == 81
