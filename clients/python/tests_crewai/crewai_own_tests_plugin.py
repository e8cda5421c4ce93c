"""A pytest plugin that runs CrewAI's own persistence tests (from its PyPI sdist, see
``test_crewai_own_tests.py``) against ``CairnFlowPersistence``: every
``SQLiteFlowPersistence`` they make, and the default persistence, is a
``CairnFlowPersistence`` on the tenant of ``CAIRN_API_KEY`` (a workflow per test, since
the tests reuse flow ids). Loaded with ``-p`` in a pytest subprocess."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from crewai.events import crewai_event_bus
from crewai.flow.persistence import factory
from pydantic import Field

from cairn import Cairn
from cairn.crewai import CairnFlowPersistence

#: Tests about SQLite itself rather than about persistence: left out, with the reason.
EXCLUDED = {
    "test_flow_persistence_factory.py::test_default_falls_back_to_sqlite": (
        "asserts that the default without a factory is SQLiteFlowPersistence"
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, left_out = [], []
    for item in items:
        (left_out if item.nodeid.split("/")[-1] in EXCLUDED else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


_client: Cairn | None = None
_workflow = "crewai-own"
#: The tests that made a CairnFlowPersistence (the others test CrewAI alone).
_used: set[str] = set()


class CairnInPlaceOfSQLite(CairnFlowPersistence):
    """What the tests get for ``SQLiteFlowPersistence(db_path)``: a
    ``CairnFlowPersistence`` on the test's workflow (the path is not used)."""

    persistence_type: str = Field(default="CairnInPlaceOfSQLite")

    def __init__(self, db_path: str | None = None, /, **data: Any) -> None:
        data.pop("workflow", None)
        super().__init__(_client, workflow=_workflow, **data)
        _used.add(_workflow)


@pytest.fixture(scope="session", autouse=True)
def cairn_client() -> Iterator[None]:
    global _client
    with Cairn() as _client:
        yield


@pytest.fixture(autouse=True)
def on_cairn(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(
        sys.modules[__name__],
        "_workflow",
        "crewai-own-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16],
    )
    if hasattr(request.module, "SQLiteFlowPersistence"):
        monkeypatch.setattr(request.module, "SQLiteFlowPersistence", CairnInPlaceOfSQLite)
    saved = factory._factory
    factory.set_flow_persistence_factory(CairnInPlaceOfSQLite)
    with crewai_event_bus.scoped_handlers():
        yield
        crewai_event_bus.flush()
    factory.set_flow_persistence_factory(saved)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"cairn: {len(_used)} tests used CairnFlowPersistence")
