"""What a LangGraph run costs on each checkpointer (``make bench``), side by side.

Against a running stack (``CAIRN_API_URL``, ``CAIRN_API_KEY`` of a tenant with credits
for ``2 * RUNS * len(DELAYS)`` threads), in ``.local/client-venv``: a graph of ``NODES``
nodes in a chain, each adding a 1 KiB update to the state (after sleeping ``DELAYS``
ms: 0, and 50 as a node calling a model might), run ``RUNS`` times (each a new thread)
on InMemorySaver, SqliteSaver (a file), CairnSaver and, when ``CAIRN_BENCH_POSTGRES_DSN``
is set and ``langgraph-checkpoint-postgres`` is installed, PostgresSaver, in LangGraph's
``sync`` and ``async`` durability. Prints per saver, mode and delay: p50 time per run
and per super-step, and for CairnSaver the HTTP requests per super-step by route
(counted with an httpx event hook).
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

# This file is named langgraph.py: its directory must not hide the langgraph package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import httpx  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from cairn import Cairn  # noqa: E402
from cairn.langgraph import CairnSaver  # noqa: E402

NODES = int(os.environ.get("CAIRN_BENCH_LANGGRAPH_NODES", "10"))
RUNS = int(os.environ.get("CAIRN_BENCH_LANGGRAPH_RUNS", "20"))
DELAYS = [int(ms) for ms in os.environ.get("CAIRN_BENCH_LANGGRAPH_DELAYS_MS", "0,50").split(",")]
MODES = ("sync", "async")


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def graph(saver: BaseCheckpointSaver[Any], delay_ms: int) -> Any:
    def node(i: int) -> Callable[[State], State]:
        def run(state: State) -> State:
            if delay_ms:
                time.sleep(delay_ms / 1000)
            return {"log": [f"{i}:" + "x" * 1022]}

        return run

    b: StateGraph[Any] = StateGraph(State)
    for i in range(NODES):
        b.add_node(f"n{i}", node(i))
    b.add_edge(START, "n0")
    for i in range(1, NODES):
        b.add_edge(f"n{i - 1}", f"n{i}")
    b.add_edge(f"n{NODES - 1}", END)
    return b.compile(checkpointer=saver)


class Routes:
    """The requests a client sent, by route (ids and keys as placeholders)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def hook(self, request: httpx.Request) -> None:
        path = re.sub(r"/(cp|exec|wf)_[0-9a-f]+", r"/{\1}", request.url.path.removeprefix("/api/v1"))
        query = (
            "?" + "&".join(sorted(k for k, _ in request.url.params.multi_items()))
            if request.url.params
            else ""
        )
        self.counts[f"{request.method} {path}{query}"] += 1


@contextlib.contextmanager
def savers(routes: Routes) -> Iterator[dict[str, BaseCheckpointSaver[Any]]]:
    found: dict[str, BaseCheckpointSaver[Any]] = {"InMemorySaver": InMemorySaver()}
    with contextlib.ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="cairn-langgraph-bench-"))
        found["SqliteSaver"] = stack.enter_context(
            SqliteSaver.from_conn_string(str(Path(folder) / "bench.sqlite"))
        )
        dsn = os.environ.get("CAIRN_BENCH_POSTGRES_DSN")
        if dsn:
            try:
                from langgraph.checkpoint.postgres import PostgresSaver
            except ImportError:
                print("(PostgresSaver skipped: pip install langgraph-checkpoint-postgres)", file=sys.stderr)
            else:
                postgres = stack.enter_context(PostgresSaver.from_conn_string(dsn))
                postgres.setup()
                found["PostgresSaver"] = postgres
        http = httpx.Client(timeout=60, event_hooks={"request": [routes.hook]})
        client = stack.enter_context(
            Cairn(os.environ["CAIRN_API_KEY"], base_url=os.environ["CAIRN_API_URL"], http_client=http)
        )
        found["CairnSaver"] = CairnSaver(client, workflow=f"langgraph-bench-{uuid.uuid4().hex[:6]}")
        yield found


def main() -> None:
    routes = Routes()
    rows: list[tuple[str, str, int, float, float, str]] = []
    # Super-steps of a run: the checkpoints it writes (the input's and one per node, and more).
    counted, config = InMemorySaver(), {"configurable": {"thread_id": "count"}}
    graph(counted, 0).invoke({"log": []}, config)
    steps = len(list(counted.list(config)))
    with savers(routes) as found:
        for delay in DELAYS:
            for name, saver in found.items():
                for mode in MODES:
                    compiled = graph(saver, delay)
                    compiled.invoke(
                        {"log": []}, {"configurable": {"thread_id": f"warm-{uuid.uuid4()}"}}, durability=mode
                    )
                    routes.counts.clear()
                    times = []
                    for _ in range(RUNS):
                        config = {"configurable": {"thread_id": f"bench-{uuid.uuid4()}"}}
                        start = time.perf_counter()
                        compiled.invoke({"log": []}, config, durability=mode)
                        times.append(time.perf_counter() - start)
                    per_step = {route: n / (RUNS * steps) for route, n in routes.counts.most_common()}
                    shown = ", ".join(f"{route} {n:.2f}" for route, n in per_step.items())
                    shown = f"{sum(per_step.values()):.2f} in all: {shown}" if name == "CairnSaver" else ""
                    p50 = statistics.median(times)
                    rows.append((name, mode, delay, p50 * 1000, p50 * 1000 / steps, shown))
    print(f"LangGraph: {NODES} nodes in a chain, 1 KiB updates, {RUNS} runs each (a new thread),")
    print(f"{steps} super-steps a run; p50 per run and per super-step")
    header = f"{'saver':<15} {'durability':<10} {'node ms':>7} {'run p50':>10} {'per step':>10}"
    print(f"{header}  requests per super-step (CairnSaver)")
    for name, mode, delay, run_ms, step_ms, shown in rows:
        print(f"{name:<15} {mode:<10} {delay:>7} {run_ms:>8.1f}ms {step_ms:>8.2f}ms  {shown}")


if __name__ == "__main__":
    main()
