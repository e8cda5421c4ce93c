"""Fixtures of the CrewAI suite (run in ``.local/crewai-venv`` by ``make test``): CrewAI
offline, and the stack ``make test`` starts (``CAIRN_API_URL``, ``CAIRN_TEST_ADMIN``),
each test a tenant of its own. Tests that need the stack are skipped without it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# CrewAI offline and out of $HOME, before it is imported: no telemetry (it would look
# up its collector), no trace upload, its files in a directory of the run.
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    OTEL_SDK_DISABLED="true",
    CREWAI_TRACING_ENABLED="false",
    CREWAI_TESTING="true",
    CREWAI_STORAGE_DIR=tempfile.mkdtemp(prefix="cairn-crewai-"),
)

import pytest
from crewai.events import crewai_event_bus
from crewai.flow.persistence import factory
from crewai.llms.base_llm import BaseLLM
from pydantic import Field

from cairn import Cairn
from cairn.crewai import _common

ADMIN = os.environ.get("CAIRN_TEST_ADMIN")
URL = os.environ.get("CAIRN_API_URL")
#: The main suite's answer to the local gateway's own 500s (tests/resending.py), for
#: the clients made here and, on PYTHONPATH, in the ``cairn`` subprocesses.
CLIENT_DIR = Path(__file__).resolve().parents[1]
SITE = str(CLIENT_DIR / "tests" / "sitecustomize")

if URL:
    sys.path.insert(0, str(CLIENT_DIR))
    from tests import resending

    resending.install()


def pytest_configure(config: pytest.Config) -> None:
    # CrewAI warns about its own deprecated fields on every crew.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:crewai")


def admin(*args: str) -> str:
    if not ADMIN or not URL:
        pytest.skip("the live stack is not running (make test starts it)")
    return subprocess.run([ADMIN, *args], check=True, capture_output=True, text=True).stdout.strip()


def tenant_key(credits: int = 200) -> str:
    """The API key of a new tenant with ``credits``."""
    tenant = admin("tenant", "create", "--name", "crewai")
    key = admin("key", "create", "--tenant", tenant)
    admin("credits", "grant", "--tenant", tenant, "--credits", str(credits))
    return key


@pytest.fixture
def key() -> str:
    return tenant_key()


@pytest.fixture
def client(key: str) -> Iterator[Cairn]:
    with Cairn(key, base_url=URL) as c:
        yield c


@pytest.fixture
def env_client(key: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cairn]:
    """``CAIRN_API_KEY``/``CAIRN_API_URL`` of the test's tenant, and the client that
    ``Cairn()`` makes from them (what a rebuilt persistence object uses)."""
    monkeypatch.setenv("CAIRN_API_KEY", key)
    monkeypatch.setenv("CAIRN_API_URL", URL or "")
    monkeypatch.setattr(_common, "_default", None)
    yield _common.default_client()
    if _common._default is not None:
        _common._default.close()


@pytest.fixture
def workflow() -> str:
    return f"flows-{uuid.uuid4().hex[:8]}"


@pytest.fixture(autouse=True)
def crewai_globals() -> Iterator[None]:
    """No handler, hook or persistence factory of a test outlives it."""
    saved = factory._factory
    with crewai_event_bus.scoped_handlers():
        yield
        crewai_event_bus.flush()
    factory.set_flow_persistence_factory(saved)


def cli(key: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``cairn`` command line as a subprocess, as the user runs it."""
    env = {**os.environ, "CAIRN_API_KEY": key, "CAIRN_API_URL": URL or "", "XDG_CONFIG_HOME": "/nonexistent"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "cairn.cli", *args], capture_output=True, text=True, env=env)


class CannedLLM(BaseLLM):
    """A CrewAI LLM that answers from a list, offline; an empty list raises."""

    answers: list[str] = Field(default_factory=list)

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> str:
        if not self.answers:
            raise RuntimeError("LLM exploded")
        return self.answers.pop(0)

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        return self.call(messages, *args, **kwargs)

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192
