"""Fixtures of cairn.autogen's suite, run by ``make test`` in .local/autogen-venv against
the stack it starts (``CAIRN_API_URL``; ``CAIRN_TEST_ADMIN``, the ``cairn-admin`` binary
that makes each test a tenant of its own). Tests that need Cairn are skipped without them.

No model is called: the agents' model is AutoGen's offline ``ReplayChatCompletionClient``.
The behaviour suite runs against a plain dict (the reference: the team's state kept as
JSON) and ``TeamCheckpointer`` alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import Team
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.replay import ReplayChatCompletionClient

from cairn import AsyncCairn
from cairn.autogen import TeamCheckpointer

# The client's live tests' helpers: cairn-admin, and (with a stack) every httpx client made
# from now on sends the local gateway's own 500s again; the fixtures every async
# framework suite has.
from tests.conftest import URL, Requests, async_client, requests_sent, tenant_key, workflow_name


class Checkpointer(Protocol):
    async def save(self, team: Team, key: str, *, name: str | None = None) -> Any: ...
    async def load(self, team: Team, key: str) -> bool: ...


class DictCheckpointer:
    """The reference: each key's latest state, kept as the JSON it is."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}

    async def save(self, team: Team, key: str, *, name: str | None = None) -> None:
        self.states[key] = json.dumps(await team.save_state())

    async def load(self, team: Team, key: str) -> bool:
        if key not in self.states:
            return False
        await team.load_state(json.loads(self.states[key]))
        return True


def team(planner: Sequence[str], writer: Sequence[str], messages: int = 3) -> Team:
    """A planner and a writer taking turns, each answering with its scripted replies; a
    run stops after ``messages`` messages (the task included)."""
    return RoundRobinGroupChat(
        [
            AssistantAgent("planner", model_client=ReplayChatCompletionClient(list(planner))),
            AssistantAgent("writer", model_client=ReplayChatCompletionClient(list(writer))),
        ],
        termination_condition=MaxMessageTermination(messages),
    )


@pytest.fixture
def key() -> str:
    return tenant_key(1_000, name="autogen suite")


@pytest.fixture(params=["dict", "cairn"])
def checkpointer(request: pytest.FixtureRequest, workflow_name: str) -> Checkpointer:
    if request.param == "dict":
        return DictCheckpointer()
    client: AsyncCairn = request.getfixturevalue("async_client")
    return TeamCheckpointer(client, workflow=workflow_name)


__all__ = ["URL", "Requests", "async_client", "requests_sent", "workflow_name"]
