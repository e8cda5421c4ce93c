"""LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against the running stack: every capability, the base ones and the extensions (all
81 tests), must pass.

The report is printed; with ``CAIRN_CONFORMANCE_REPORT=path`` it is written there too.
"""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from cairn import Cairn
from cairn.langgraph import CairnSaver

from .conftest import URL, admin

pytestmark = pytest.mark.live


@pytest.fixture
def conformance_key() -> str:
    """A tenant of its own with credits for the suite's threads (each is an execution)."""
    tenant = admin("tenant", "create", "--name", "langgraph conformance")
    api_key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", "1000")
    return api_key


def save(path: Path, text: str) -> None:
    path.write_text(text)


async def test_cairn_saver_passes_the_langgraph_conformance_suite(conformance_key: str) -> None:
    @checkpointer_test(name="CairnSaver")
    async def cairn_saver() -> AsyncIterator[CairnSaver]:
        # A fresh workflow per capability suite, so no suite sees another's threads.
        client = Cairn(conformance_key, base_url=URL)
        saver = CairnSaver(client, workflow=f"conformance-{uuid.uuid4().hex[:12]}")
        try:
            yield saver
        finally:
            await saver.aclose()
            client.close()

    progress = io.StringIO()
    with contextlib.redirect_stdout(progress):
        report = await validate(cairn_saver, progress=ProgressCallbacks.verbose())
        report.print_report()
    printed = progress.getvalue()
    print(printed)
    if path := os.environ.get("CAIRN_CONFORMANCE_REPORT"):
        save(Path(path), printed)

    failed = {name: r.failures for name, r in report.results.items() if r.passed is False}
    for capability in Capability:
        result = report.results[capability.value]
        assert result.detected, f"{capability.value} is not implemented"
        assert result.passed is True, f"{capability.value} failed: {failed.get(capability.value)}"
    assert report.passed_all_base()
    assert not failed, failed
    assert sum(r.tests_passed for r in report.results.values()) == 81
