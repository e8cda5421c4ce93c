"""What ``cairn.crewai`` costs per CrewAI call: HTTP requests and time (``make bench``).

Against a running stack (``CAIRN_API_URL``, ``CAIRN_API_KEY`` of a tenant with 4
credits), in ``.local/crewai-venv``: a flow of ``METHODS`` methods persisted with
``CairnFlowPersistence`` kicked off ``RUNS`` times with its id (one execution), a flow
paused for human feedback and resumed, and a flow run traced by ``CairnEventListener``.
Every request the client sends is counted (an httpx event hook); every persistence call
is timed, beside the same calls on CrewAI's ``SQLiteFlowPersistence`` for scale.
Prints one row per call: how many, requests per call (min-max), p50 and p90 in ms.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This file is named crewai.py: its directory must not hide the crewai package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false")
os.environ.setdefault("CREWAI_STORAGE_DIR", tempfile.mkdtemp(prefix="cairn-crewai-bench-"))

import httpx  # noqa: E402
from crewai.flow.async_feedback import HumanFeedbackPending, PendingFeedbackContext  # noqa: E402
from crewai.flow.flow import Flow, FlowState, listen, start  # noqa: E402
from crewai.flow.human_feedback import human_feedback  # noqa: E402
from crewai.flow.persistence import FlowPersistence, SQLiteFlowPersistence, persist  # noqa: E402
from pydantic import Field  # noqa: E402

from cairn import Cairn  # noqa: E402
from cairn.crewai import CairnEventListener, CairnFlowPersistence  # noqa: E402

METHODS = int(os.environ.get("CAIRN_BENCH_FLOW_METHODS", "5"))
RUNS = int(os.environ.get("CAIRN_BENCH_FLOW_RUNS", "20"))
CALLS = (
    "save_state",
    "load_state",
    "save_pending_feedback",
    "load_pending_feedback",
    "clear_pending_feedback",
)

sent = [0]
#: (backend, call) -> [(requests, seconds)]
measured: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)


def measure(backend: str, persistence: FlowPersistence) -> FlowPersistence:
    """Wraps the persistence's calls to record requests and time of each."""
    for call in CALLS:
        original: Callable[..., Any] = getattr(persistence, call)

        def timed(
            *args: Any, _call: str = call, _original: Callable[..., Any] = original, **kwargs: Any
        ) -> Any:
            before, start = sent[0], time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                measured[(backend, _call)].append((sent[0] - before, time.perf_counter() - start))

        object.__setattr__(persistence, call, timed)
    return persistence


class Steps(FlowState):
    done: list[str] = Field(default_factory=list)
    notes: str = "x" * 1000


def steps_flow(persistence: FlowPersistence | None) -> type[Flow[Steps]]:
    """A flow of METHODS methods in a chain, each adding to the state."""
    namespace: dict[str, Any] = {}

    def method(name: str) -> Callable[[Any], None]:
        def run(self: Any) -> None:
            self.state.done.append(name)

        run.__name__ = name
        return run

    previous = None
    for i in range(METHODS):
        name = f"step_{i}"
        fn = method(name)
        namespace[name] = start()(fn) if previous is None else listen(previous)(fn)
        previous = namespace[name]
    flow: type[Flow[Steps]] = type("Steps", (Flow[Steps],), namespace)
    if persistence is not None:
        persist(persistence)(flow)  # stamps the class
    return flow


class Later:
    def request_feedback(self, context: PendingFeedbackContext, flow: Flow[Any]) -> str:
        raise HumanFeedbackPending(context=context)


def review_flow() -> type[Flow[Steps]]:
    class Review(Flow[Steps]):
        @start()
        @human_feedback(message="Approve?", provider=Later())
        def draft(self) -> str:
            return "draft"

        @listen(draft)
        def publish(self, result: Any) -> str:
            return str(result.feedback)

    return Review


def run_backend(backend: str, persistence: FlowPersistence) -> None:
    flow = steps_flow(persistence)
    first = flow()
    first.kickoff()
    for _ in range(RUNS - 1):
        flow().kickoff(inputs={"id": first.state.id})
    review = review_flow()
    paused = review(persistence=persistence).kickoff()
    assert isinstance(paused, HumanFeedbackPending)
    assert review.from_pending(paused.context.flow_id, persistence).resume("ok") == "ok"


def ms(times: list[float], q: int) -> float:
    if len(times) == 1:
        return times[0] * 1000
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1] * 1000


def main() -> None:
    url, key = os.environ["CAIRN_API_URL"], os.environ["CAIRN_API_KEY"]

    def count(_: httpx.Request) -> None:
        sent[0] += 1

    client = Cairn(key, base_url=url, http_client=httpx.Client(timeout=30, event_hooks={"request": [count]}))
    cairn = CairnFlowPersistence(client, workflow="bench-crewai")
    cairn.init_db()  # the workflow, found or created: once per client
    with contextlib.redirect_stdout(io.StringIO()), tempfile.TemporaryDirectory() as tmp:  # CrewAI's panels
        run_backend("cairn", measure("cairn", cairn))
        run_backend("sqlite", measure("sqlite", SQLiteFlowPersistence(os.path.join(tmp, "flows.db"))))

    print(
        f"cairn.crewai: a {METHODS}-method flow kicked off {RUNS} times with its id, one paused for feedback"
    )
    print(f"{'call':<24}{'calls':>6}{'requests':>10}{'cairn p50':>11}{'p90':>8}{'sqlite p50':>12}{'p90':>8}")
    for call in CALLS:
        rows = measured[("cairn", call)]
        local = [t for _, t in measured[("sqlite", call)]]
        if not rows:
            continue
        requests = sorted({n for n, _ in rows})
        span = f"{requests[0]}" if len(requests) == 1 else f"{requests[0]}-{requests[-1]}"
        times = [t for _, t in rows]
        print(
            f"{call:<24}{len(rows):>6}{span:>10}{ms(times, 50):>11.2f}{ms(times, 90):>8.2f}"
            f"{ms(local, 50):>12.2f}{ms(local, 90):>8.2f}"
        )
    per_save = [n for n, _ in measured[("cairn", "save_state")]]
    print(f"save_state: {per_save.count(1)} of {len(per_save)} calls sent one request (the first: two)")

    with CairnEventListener(client, flow_workflow="bench-crewai-traced") as listener:
        before = sent[0]
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            steps_flow(None)().kickoff()
        kicked = time.perf_counter() - started
        listener.flush()
        recorded = time.perf_counter() - started
    print(
        f"CairnEventListener: a {METHODS}-method flow run sent {sent[0] - before} requests "
        f"(start, a checkpoint per method, completion; the workflow once), kickoff {kicked * 1000:.0f} ms, "
        f"all recorded {recorded * 1000:.0f} ms after the start"
    )


if __name__ == "__main__":
    main()
