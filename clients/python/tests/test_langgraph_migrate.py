"""Threads moved from LangGraph's SqliteSaver and PostgresSaver into Cairn
(``cairn.langgraph.migrate`` and ``cairn langgraph migrate``), judged by the source
saver itself: the migrated threads list the same checkpoints, parents, metadata, values
and pending writes, and continue under CairnSaver exactly as they continue under the
source, whose channel versions are strings. Against the running stack (see test_live)
and, for PostgresSaver, the PostgreSQL of ``CAIRN_TEST_POSTGRES_DSN`` (``make test``
starts one)."""

from __future__ import annotations

import contextlib
import json
import operator
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from cairn import Cairn
from cairn.langgraph import CairnSaver, migrate

from .conftest import URL
from .test_live_cli import SITE


class State(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]
    answer: str


def builder() -> StateGraph[Any]:
    """plan -> ask (an interrupt: a person answers) -> reply."""

    def plan(state: State) -> State:
        return {"steps": ["plan"]}

    def ask(state: State) -> State:
        answer = interrupt({"question": "go on?"})
        return {"steps": [f"ask:{answer}"], "answer": str(answer)}

    def reply(state: State) -> State:
        return {"steps": [f"reply:{len(state.get('steps', []))}"]}

    b: StateGraph[Any] = StateGraph(State)
    b.add_node("plan", plan)
    b.add_node("ask", ask)
    b.add_node("reply", reply)
    b.add_edge(START, "plan")
    b.add_edge("plan", "ask")
    b.add_edge("ask", "reply")
    b.add_edge("reply", END)
    return b


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


POSTGRES = os.environ.get("CAIRN_TEST_POSTGRES_DSN")


@dataclass(frozen=True)
class Source:
    """Where threads are before they move: a SqliteSaver file or a PostgresSaver
    database (its connection string)."""

    kind: str
    where: str

    @contextlib.contextmanager
    def saver(self) -> Iterator[BaseCheckpointSaver[Any]]:
        if self.kind == "sqlite":
            with SqliteSaver.from_conn_string(self.where) as saver:
                yield saver
            return
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(self.where) as postgres:
            postgres.setup()
            yield postgres

    def copy(self) -> Source:
        """A copy to run the judge on (the source stays as migrated)."""
        if self.kind == "sqlite":
            path = Path(self.where).with_name(f"copy-{uuid.uuid4().hex[:6]}.sqlite")
            shutil.copy(self.where, path)
            return Source("sqlite", str(path))
        import psycopg

        copy = Source("postgres", _database())
        with copy.saver():  # its tables
            pass
        with psycopg.connect(self.where) as source, psycopg.connect(copy.where) as target:
            for table in TABLES:
                with (
                    source.cursor().copy(f"COPY {table} TO STDOUT (FORMAT BINARY)") as out,
                    target.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as into,
                ):
                    for block in out:
                        into.write(block)
        return copy

    def rows(self) -> Any:
        """Everything the source holds, to see that a migration wrote nothing."""
        if self.kind == "sqlite":
            return Path(self.where).read_bytes()
        import psycopg

        with psycopg.connect(self.where) as conn:
            return [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall() for t in TABLES]


#: PostgresSaver's tables.
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


def _database() -> str:
    """A new PostgreSQL database: its DSN."""
    import psycopg
    from psycopg import conninfo

    assert POSTGRES is not None
    name = f"migrate_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return conninfo.make_conninfo(POSTGRES, dbname=name)


@pytest.fixture(params=["sqlite", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Source, list[str]]:
    """A source saver with two threads: one finished (asked and answered), one waiting
    at its interrupt."""
    if request.param == "postgres":
        if not POSTGRES:
            pytest.skip("no PostgreSQL (CAIRN_TEST_POSTGRES_DSN; make test starts one)")
        src = Source("postgres", _database())
    else:
        src = Source("sqlite", str(tmp_path / "threads.sqlite"))
    threads = [f"done-{uuid.uuid4().hex[:6]}", f"waiting-{uuid.uuid4().hex[:6]}"]
    with src.saver() as saver:
        graph = builder().compile(checkpointer=saver)
        for thread in threads:
            graph.invoke({"steps": []}, config(thread))  # type: ignore[arg-type]
        graph.invoke(Command(resume="yes"), config(threads[0]))  # type: ignore[arg-type]
    return src, threads


def summary(t: CheckpointTuple) -> tuple[Any, ...]:
    """What a checkpoint tuple holds, saver aside (its values, versions and writes)."""
    parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    c = t.checkpoint
    writes = sorted((task, channel, repr(value)) for task, channel, value in t.pending_writes or [])
    meta = {k: v for k, v in t.metadata.items()}
    return (c["id"], parent, meta, repr(c["channel_values"]), c["channel_versions"], writes)


def test_a_channel_version_of_another_saver_goes_on_from_its_integer_prefix() -> None:
    saver = CairnSaver(Cairn("cairn_" + "x" * 43, base_url="http://127.0.0.1:9"), workflow="w")
    given = "00000000000000000000000000000002.0.2437805346541063"
    following = saver.get_next_version(given, None)
    assert isinstance(following, str)
    assert following.startswith("00000000000000000000000000000003.")
    assert following > given
    assert (saver.get_next_version(None, None), saver.get_next_version(7, None)) == (1, 8)


@pytest.mark.live
def test_migrated_threads_read_and_continue_as_under_their_saver(
    key: str, source: tuple[Source, list[str]]
) -> None:
    src, threads = source
    workflow = f"migrated-{uuid.uuid4().hex[:6]}"
    with Cairn(key, base_url=URL) as client, src.saver() as sqlite:
        cairn = CairnSaver(client, workflow=workflow)
        done = migrate(sqlite, cairn)
        found = list(sqlite.list(None))
        assert (done.threads, done.checkpoints) == (2, len(found))
        assert done.writes == sum(len(t.pending_writes or []) for t in found) > 0
        for thread in threads:
            theirs = [summary(t) for t in sqlite.list(config(thread))]
            ours = [summary(t) for t in cairn.list(config(thread))]
            assert ours == theirs, thread

        # Again: nothing twice.
        migrate(sqlite, cairn)
        assert [summary(t) for t in cairn.list(config(threads[1]))] == [
            summary(t) for t in sqlite.list(config(threads[1]))
        ]
        workflow_id = next(w.id for w in client.workflows.list() if w.name == workflow)
        execution = client.executions.list(workflow_id=workflow_id).first_page().items
        assert sorted(e.key or "" for e in execution) == sorted(threads)
        assert {e.status for e in execution} == {"running"}, "history's interrupts pause nothing"

        # The waiting thread, resumed under each saver (the source's on a copy).
        copy = src.copy()
        ours = builder().compile(checkpointer=cairn)
        with copy.saver() as judge:
            theirs = builder().compile(checkpointer=judge)
            expected = theirs.invoke(Command(resume="later"), config(threads[1]))  # type: ignore[arg-type]
        resumed = ours.invoke(Command(resume="later"), config(threads[1]))  # type: ignore[arg-type]
        assert resumed == expected == {"steps": ["plan", "ask:later", "reply:2"], "answer": "later"}
        newest = next(iter(cairn.list(config(threads[1]))))
        versions = newest.checkpoint["channel_versions"].values()
        assert all(isinstance(v, str) for v in versions), "string versions went on"

        # The finished thread takes a new run under Cairn as under its saver: up to the
        # interrupt again (whose id is new in each run).
        with copy.saver() as judge:
            theirs = builder().compile(checkpointer=judge)
            expected = theirs.invoke({"steps": ["again"]}, config(threads[0]))  # type: ignore[arg-type]
        again = ours.invoke({"steps": ["again"]}, config(threads[0]))  # type: ignore[arg-type]
        asked = [i.value for i in again.pop("__interrupt__")]
        assert asked == [i.value for i in expected.pop("__interrupt__")] == [{"question": "go on?"}]
        assert again == expected

        # The finished-again thread now waits at an interrupt in Cairn: its execution is
        # paused. Migrating again leaves it alone (no replay, no charge) and says so.
        execution = client.executions.list(workflow_id=workflow_id, key=threads[0]).first_page().items[0]
        assert execution.status == "paused"
        again_done = migrate(sqlite, cairn)
        assert again_done.skipped == (threads[0],)
        after = client.executions.get(execution.id)
        assert (after.status, after.attempt) == ("paused", execution.attempt)


@pytest.mark.live
def test_the_command_line_migrates_read_only(key: str, source: tuple[Source, list[str]]) -> None:
    src, threads = source
    workflow = f"cli-migrated-{uuid.uuid4().hex[:6]}"
    before = src.rows()
    env = {**os.environ, "CAIRN_API_KEY": key, "CAIRN_API_URL": URL or "", "XDG_CONFIG_HOME": "/nonexistent"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")]))
    args = [
        sys.executable,
        "-m",
        "cairn.cli",
        "--json",
        "langgraph",
        "migrate",
        "--from",
        f"{src.kind}:{src.where}",
    ]
    done = subprocess.run(
        [*args, "--workflow", workflow, "--thread", threads[1]], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert src.rows() == before, "the source is not written"
    # Read with the source's own saver after the command (which opened it read-only).
    with src.saver() as saver:
        count = len(list(saver.list(config(threads[1]))))
        writes = sum(len(t.pending_writes or []) for t in saver.list(config(threads[1])))
    assert writes > 0
    assert json.loads(done.stdout) == {"threads": 1, "checkpoints": count, "writes": writes, "skipped": []}
    with Cairn(key, base_url=URL) as client:
        cairn = CairnSaver(client, workflow=workflow)
        assert len(list(cairn.list(config(threads[1])))) == count
        assert list(cairn.list(config(threads[0]))) == []

    refused = subprocess.run(
        [*args[:-2], "--from", "mysql:x", "--workflow", workflow], capture_output=True, text=True, env=env
    )
    assert (refused.returncode, "postgres:DSN" in refused.stderr) == (2, True), refused.stderr


@pytest.mark.live
def test_a_thread_with_a_subgraph_keeps_the_order_its_checkpoints_were_made_in(key: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def inner_step(state: State) -> State:
        return {"steps": ["inner"]}

    inner: StateGraph[Any] = StateGraph(State)
    inner.add_node("inner", inner_step)
    inner.add_edge(START, "inner")
    inner.add_edge("inner", END)
    outer: StateGraph[Any] = StateGraph(State)
    outer.add_node("before", lambda s: {"steps": ["before"]})
    outer.add_node("sub", inner.compile(checkpointer=True))
    outer.add_node("after", lambda s: {"steps": ["after"]})
    outer.add_edge(START, "before")
    outer.add_edge("before", "sub")
    outer.add_edge("sub", "after")
    outer.add_edge("after", END)
    source = InMemorySaver()
    thread = f"sub-{uuid.uuid4().hex[:6]}"
    outer.compile(checkpointer=source).invoke({"steps": []}, config(thread))  # type: ignore[arg-type]
    made = sorted(str(t.checkpoint["id"]) for t in source.list(config(thread)))
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in source.list(config(thread))}
    assert len(namespaces) == 2, namespaces  # the root's and the subgraph's

    workflow = f"sub-migrated-{uuid.uuid4().hex[:6]}"
    with Cairn(key, base_url=URL) as client:
        done = migrate(source, CairnSaver(client, workflow=workflow))
        assert (done.threads, done.checkpoints) == (1, len(made))
        workflow_id = next(w.id for w in client.workflows.list() if w.name == workflow)
        (execution,) = client.executions.list(workflow_id=workflow_id).first_page().items
        stored = [c.key for c in client.checkpoints.list(execution_id=execution.id)]
    assert stored == made, "Cairn's sequence is the order the checkpoints were made in"
