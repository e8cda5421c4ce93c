"""The library's overhead per checkpointed step over a raw HTTP call (``make bench``).

Against a running stack (``CAIRN_API_URL``, ``CAIRN_API_KEY`` of a tenant with credits):
one execution, then ``N`` checkpoints of a 1 KiB state written alternately through
``client.checkpoints.create`` (what ``run.step`` does after the step's function) and
through a bare ``httpx.Client.post`` with the same body and headers, on one connection
each. Prints the medians and p90s and their ratio (goal: at most 1.1).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid

import httpx

from cairn import Cairn

N = int(os.environ.get("CAIRN_BENCH_STEPS", "300"))


def main() -> None:
    url, key = os.environ["CAIRN_API_URL"], os.environ["CAIRN_API_KEY"]
    client = Cairn(key, base_url=url)
    wf = client.workflows.create(name="bench", workflow_type="custom")
    execution = client.executions.create(workflow_id=wf.id)
    state = {"step": {"index": 0, "name": "plan", "result": "x" * 1000}}
    raw = httpx.Client(timeout=30)
    body = json.dumps({"execution_id": execution.id, "state": state, "name": "plan"}).encode()
    lib_times, raw_times = [], []
    for i in range(N + 20):
        start = time.perf_counter()
        client.checkpoints.create(execution_id=execution.id, state=state, name="plan")
        lib = time.perf_counter() - start
        headers = {"X-API-Key": key, "Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
        start = time.perf_counter()
        response = raw.post(f"{url}/checkpoints", content=body, headers=headers)
        response.json()
        assert response.status_code == 201, response.text
        bare = time.perf_counter() - start
        if i >= 20:  # warm-up
            lib_times.append(lib)
            raw_times.append(bare)

    def p(times: list[float], q: int) -> float:
        return statistics.quantiles(times, n=100)[q - 1] * 1000

    print(f"python client, {N} checkpoints of 1 KiB each way (ms)")
    print(f"{'':<22}{'p50':>8}{'p90':>8}")
    print(f"{'client.checkpoints':<22}{p(lib_times, 50):>8.2f}{p(lib_times, 90):>8.2f}")
    print(f"{'raw httpx':<22}{p(raw_times, 50):>8.2f}{p(raw_times, 90):>8.2f}")
    print(f"{'ratio':<22}{p(lib_times, 50) / p(raw_times, 50):>8.2f}{p(lib_times, 90) / p(raw_times, 90):>8.2f}")


if __name__ == "__main__":
    main()
