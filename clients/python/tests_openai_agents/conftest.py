"""Fixtures of cairn.openai_agents' suite, run by ``make test`` in .local/openai-agents-venv
against the stack it starts (``CAIRN_API_URL``; ``CAIRN_TEST_ADMIN``, the ``cairn-admin``
binary that makes each test a tenant of its own). Tests that need Cairn are skipped
without them.

Nothing here reaches OpenAI: no ``OPENAI_API_KEY``, the SDK's trace processors replaced
(its OpenAI exporter never runs), and the models are the SDK's offline ``ScriptedModel``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import SQLiteSession, set_trace_processors
from agents.memory import Session, SessionSettings

from cairn import AsyncCairn, Cairn
from cairn.openai_agents import CairnSession

# The client's live tests' helpers: cairn-admin, and (with a stack) every httpx client made
# from now on sends the local gateway's own 500s again.
from tests.conftest import URL, Requests
from tests.conftest import tenant_key as live_tenant_key

os.environ.pop("OPENAI_API_KEY", None)
set_trace_processors([])


def tenant_key(credits: int = 10_000) -> str:
    """The API key of a new tenant with ``credits``."""
    return live_tenant_key(credits, name="openai-agents suite")


def free_port() -> int:
    """A TCP port nothing listens on (nothing to connect to)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(autouse=True)
def _no_trace_export() -> Iterator[None]:
    set_trace_processors([])
    yield
    set_trace_processors([])


@pytest.fixture
def key() -> str:
    return tenant_key()


@pytest.fixture
def requests_sent() -> Requests:
    return Requests()


@pytest.fixture
def client(key: str, requests_sent: Requests) -> Iterator[Cairn]:
    http = httpx.Client(timeout=60, event_hooks={"request": [requests_sent.hook]})
    with Cairn(key, base_url=URL, http_client=http) as c:
        yield c


@pytest.fixture
async def async_client(key: str, requests_sent: Requests) -> AsyncIterator[AsyncCairn]:
    http = httpx.AsyncClient(timeout=60, event_hooks={"request": [requests_sent.async_hook]})
    async with AsyncCairn(key, base_url=URL, http_client=http) as c:
        yield c


MakeSession = Callable[..., Session]


@pytest.fixture(params=["sqlite", "cairn", "cairn-sync-client"])
def make_session(request: pytest.FixtureRequest, tmp_path: Path) -> MakeSession:
    """Makes sessions of one backend: the SDK's ``SQLiteSession`` (the reference, on a
    file of the test's own, so two objects with one id share it as they share a Cairn
    execution), or ``CairnSession`` with an ``AsyncCairn`` or a ``Cairn``."""
    if request.param == "sqlite":
        db = tmp_path / "sessions.db"

        def sqlite(
            session_id: str, session_settings: SessionSettings | dict[str, Any] | None = None
        ) -> Session:
            return SQLiteSession(session_id, db, session_settings=session_settings)

        return sqlite
    cairn_client: Cairn | AsyncCairn = request.getfixturevalue(
        "async_client" if request.param == "cairn" else "client"
    )

    def cairn(session_id: str, session_settings: SessionSettings | dict[str, Any] | None = None) -> Session:
        return CairnSession(session_id, cairn_client, session_settings=session_settings)

    return cairn
