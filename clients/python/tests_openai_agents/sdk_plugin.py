"""A pytest plugin for the OpenAI Agents SDK's own tests (the ``tests/`` of its PyPI sdist,
run in a subprocess by ``test_sdk_suite.py``): their session tests run on CairnSession.

The SDK's session tests are written for ``SQLiteSession``. Every test whose body makes
one (``SQLiteSession(...)``, itself or through a helper function of its module) is kept,
but those about SQLite itself (``EXCLUDED``), and finds in its module's namespace
:class:`SQLiteCairnSession` instead: a ``CairnSession`` with ``SQLiteSession``'s
constructor, where a database is a Cairn workflow (a file path
one per path, ``":memory:"`` one per object, as SQLite keeps them apart). The other
tests of the files are deselected. ``CAIRN_API_URL`` and ``CAIRN_API_KEY`` name the
stack and the tenant.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents.memory import SessionSettings

from cairn import Cairn
from cairn.openai_agents import CairnSession

_SNAPSHOT = "compaction through SQLiteSession's private _get_compaction_snapshot"
#: The SDK's session tests about SQLite itself (its connections, locks, corrupt rows,
#: transactions, ``close()``): nothing a Session does.
EXCLUDED = {
    "test_sqlite_session_close_closes_worker_thread_connections": "SQLite connections",
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": "SQLite connections",
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": "SQLite connections",
    "test_sqlite_session_keeps_connections_of_live_worker_threads": "SQLite connections",
    "test_sqlite_session_closed_rejects_empty_add_items": "close(), which only SQLiteSession has",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": "rows corrupted in SQL",
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": "rows corrupted in SQL",
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": "rows corrupted in SQL",
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": "rows corrupted in SQL",
    "test_sqlite_session_file_lock_is_shared_across_instances": "SQLite's per-file lock",
    "test_sqlite_session_failed_add_items_releases_write_lock": "SQLite's write lock and rollback",
    "test_sqlite_session_failed_clear_session_rolls_back": "SQLite's transaction rollback",
    "test_sqlite_session_failed_pop_item_releases_write_lock": "SQLite's write lock and rollback",
    "test_sqlite_session_rollback_failure_evicts_connection": "SQLite connections",
    "test_sqlite_session_close_retries_quarantined_connection": "SQLite connections",
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": "SQLite commit internals",
    "test_handoff_resume_after_cancelled_compaction_commits": "patches SQLiteSession._insert_items",
    # compaction over a backend that offers the SDK's private snapshot hook (only SQLiteSession)
    "test_automatic_compaction_does_not_reload_unbounded_hidden_history": _SNAPSHOT,
    "test_backend_read_limit_cannot_hide_retained_history_from_compaction": _SNAPSHOT,
    "test_expired_read_overhead_does_not_authorize_hidden_history": _SNAPSHOT,
    "test_automatic_compaction_rollback_budget": _SNAPSHOT,
    "test_settled_clear_failure_invalidates_response_chain": "SQLite connections",
    "test_settled_pop_failure_invalidates_response_chain": "SQLite connections",
}

_MAKES_SQLITE_SESSION = re.compile(r"\bSQLiteSession\(")


def _install_resending() -> None:
    """The live tests' resending of the local gateway's own 500s (tests/resending.py),
    loaded by path: ``tests`` here is the SDK's package."""
    path = Path(__file__).resolve().parents[1] / "tests" / "resending.py"
    spec = importlib.util.spec_from_file_location("cairn_tests_resending", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()


_install_resending()
_client = Cairn(timeout=60)
_databases: dict[str, str] = {}


def _workflow(db_path: Any) -> str:
    """The Cairn workflow standing for a SQLite database."""
    path = str(db_path)
    if path != ":memory:" and path in _databases:
        return _databases[path]
    workflow = _client.workflows.create(name=f"sdk-tests {uuid.uuid4().hex[:12]}", workflow_type="custom")
    if path != ":memory:":
        _databases[path] = workflow.id
    return workflow.id


class SQLiteCairnSession(CairnSession):
    """A ``CairnSession`` made as a ``SQLiteSession`` is."""

    def __init__(
        self,
        session_id: str,
        db_path: Any = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        super().__init__(session_id, _client, workflow=_workflow(db_path), session_settings=session_settings)


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _makes_sessions(module: Any) -> re.Pattern[str]:
    """What a test of ``module`` that makes a SQLiteSession says: the class, or a helper
    of the module that makes one."""
    helpers = [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and not name.startswith("test")
        and _MAKES_SQLITE_SESSION.search(_source(value))
    ]
    return re.compile("|".join([_MAKES_SQLITE_SESSION.pattern] + [rf"\b{re.escape(h)}\(" for h in helpers]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    patterns: dict[str, re.Pattern[str]] = {}
    for item in items:
        module = getattr(item, "module", None)
        function = getattr(item, "function", None)
        name = getattr(item, "originalname", item.name)
        if module is None or function is None or name in EXCLUDED:
            dropped.append(item)
            continue
        if module.__name__ not in patterns:
            patterns[module.__name__] = _makes_sessions(module)
        (kept if patterns[module.__name__].search(_source(function)) else dropped).append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


@pytest.fixture(autouse=True)
def _cairn_sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if hasattr(request.module, "SQLiteSession"):
        monkeypatch.setattr(request.module, "SQLiteSession", SQLiteCairnSession)
