"""What a ``CairnSession`` call costs: HTTP requests and time per call (``make bench``).

Against a running stack (``CAIRN_API_URL``, ``CAIRN_API_KEY`` of a tenant with 2
credits: one execution per session), in .local/openai-agents-venv. Two sessions, a short
one (10 items, about 3 KB) and a long one (1,000 items, about 1 MB); for each, ``N``
times each call, counting the requests the client sends (its httpx hook) and timing the
call: ``get_items`` by a new session object (it knows nothing), ``get_items`` again
(nothing changed since), ``add_items`` of one item, ``pop_item``, and one turn of an agent
(``Runner.run`` on the SDK's offline ``ScriptedModel``). Prints the requests per call
(the same for every repetition, else a range) and the median and p90 times.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from agents import Agent, Runner, set_trace_processors
from agents.testing import ScriptedModel, assistant_message

from cairn import AsyncCairn
from cairn.openai_agents import CairnSession

N = int(os.environ.get("CAIRN_BENCH_CALLS", "20"))


def item(n: int, size: int) -> Any:
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} " + "x" * size}


class Counter:
    def __init__(self) -> None:
        self.requests = 0

    async def hook(self, _: httpx.Request) -> None:
        self.requests += 1


async def measure(
    counter: Counter, call: Callable[[], Awaitable[Any]], undo: Callable[[], Awaitable[Any]] | None = None
) -> tuple[list[int], list[float]]:
    """``call`` ``N`` times: the requests and milliseconds of each (``undo`` after each,
    neither counted nor timed)."""
    counts, times = [], []
    for _ in range(N):
        before = counter.requests
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
        counts.append(counter.requests - before)
        if undo is not None:
            await undo()
    return counts, times


async def session_costs(
    client: AsyncCairn, counter: Counter, items: int, size: int
) -> dict[str, tuple[list[int], list[float]]]:
    session_id = f"bench-{items}-{uuid.uuid4().hex[:8]}"
    session = CairnSession(session_id, client)
    for start in range(0, items, 20):
        await session.add_items([item(n, size) for n in range(start, min(items, start + 20))])
    results = {
        "get_items (new object)": await measure(
            counter, lambda: CairnSession(session_id, client).get_items()
        ),
        "get_items (unchanged)": await measure(counter, session.get_items),
        "add_items (1 item)": await measure(counter, lambda: session.add_items([item(items, size)])),
    }
    results["pop_item"] = await measure(counter, session.pop_item)
    model = ScriptedModel()
    agent = Agent(name="bench", model=model)

    async def turn() -> None:
        model.enqueue([assistant_message("ok")])
        await Runner.run(agent, "next", session=session)

    async def undo_turn() -> None:  # the question and the answer go: the session keeps its size
        await session.pop_item()
        await session.pop_item()

    results["Runner.run, one turn"] = await measure(counter, turn, undo_turn)
    return results


def cell(counts: list[int], times: list[float]) -> str:
    low, high = min(counts), max(counts)
    requests = str(low) if low == high else f"{low}-{high}"
    p90 = statistics.quantiles(times, n=10)[8]
    return f"{requests:>9}{statistics.median(times):>9.1f}{p90:>9.1f}"


async def main() -> None:
    set_trace_processors([])  # nothing to OpenAI
    # cargo lambda watch (the local stack) refuses compressed bodies; API Gateway takes them.
    os.environ.setdefault("CAIRN_COMPRESS_REQUESTS", "0")
    counter = Counter()
    http = httpx.AsyncClient(timeout=60, event_hooks={"request": [counter.hook]})
    async with AsyncCairn(base_url=os.environ["CAIRN_API_URL"], http_client=http) as client:
        await CairnSession("bench-warm-up", client).get_items()  # the workflow, found or created once
        short = await session_costs(client, counter, items=10, size=300)
        long = await session_costs(client, counter, items=1000, size=1000)
    print(f"cairn.openai_agents: CairnSession, HTTP requests and milliseconds per call ({N} calls each)")
    columns = f"{'requests':>9}{'p50 ms':>9}{'p90 ms':>9}"
    print(f"{'':<26}{'short session (10 items, 3 KB)':>30}    {'long session (1,000 items, 1 MB)':>30}")
    print(f"{'call':<26}{columns}   {columns}")
    for name in short:
        print(f"{name:<26}{cell(*short[name])}   {cell(*long[name])}")


if __name__ == "__main__":
    asyncio.run(main())
