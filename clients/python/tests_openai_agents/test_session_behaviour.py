"""One behaviour suite, three backends: the SDK's own ``SQLiteSession`` (the reference)
and ``CairnSession`` with an ``AsyncCairn`` and with a ``Cairn``. Every assertion holds
for all three (``make_session`` in conftest)."""

from __future__ import annotations

from typing import Any

import pytest
from agents.memory import Session, SessionSettings

from .conftest import MakeSession


def message(n: int) -> Any:
    return {"role": "user", "content": f"message {n}"}


async def test_a_new_session_is_empty(make_session: MakeSession) -> None:
    session = make_session("empty")
    assert isinstance(session, Session)
    assert session.session_id == "empty"
    assert await session.get_items() == []
    assert await session.get_items(limit=3) == []
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_items_come_back_oldest_first_whatever_the_limit(make_session: MakeSession) -> None:
    session = make_session("limits")
    await session.add_items([message(0), message(1)])
    await session.add_items([message(2)])
    everything = [message(0), message(1), message(2)]
    assert await session.get_items() == everything
    assert await session.get_items(limit=None) == everything
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=1) == [message(2)]
    assert await session.get_items(limit=2) == [message(1), message(2)]
    assert await session.get_items(limit=3) == everything
    assert await session.get_items(limit=10) == everything
    assert await session.get_items(limit=-1) == everything


@pytest.mark.parametrize("settings", [SessionSettings(limit=2), {"limit": 2}])
async def test_the_session_settings_limit_is_the_default_limit(
    make_session: MakeSession, settings: SessionSettings | dict[str, Any]
) -> None:
    session = make_session("settings", session_settings=settings)
    assert session.session_settings == SessionSettings(limit=2)
    await session.add_items([message(0), message(1), message(2)])
    assert await session.get_items() == [message(1), message(2)]
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=1) == [message(2)]
    assert await session.get_items(limit=3) == [message(0), message(1), message(2)]


async def test_without_settings_the_default_is_every_item(make_session: MakeSession) -> None:
    session = make_session("default-settings")
    assert session.session_settings == SessionSettings()
    await session.add_items([message(n) for n in range(7)])
    assert await session.get_items() == [message(n) for n in range(7)]


async def test_pop_item_removes_and_answers_the_newest(make_session: MakeSession) -> None:
    session = make_session("pop")
    await session.add_items([message(0), message(1), message(2)])
    assert await session.pop_item() == message(2)
    assert await session.get_items() == [message(0), message(1)]
    assert await session.pop_item() == message(1)
    assert await session.pop_item() == message(0)
    assert await session.pop_item() is None
    assert await session.get_items() == []
    await session.add_items([message(3)])
    assert await session.get_items() == [message(3)]


async def test_clear_session_forgets_everything_and_the_session_goes_on(make_session: MakeSession) -> None:
    session = make_session("clear")
    await session.add_items([message(0), message(1)])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()  # an empty session too
    await session.add_items([message(2)])
    assert await session.get_items() == [message(2)]
    assert await make_session("clear").get_items() == [message(2)]


async def test_adding_nothing_changes_nothing(make_session: MakeSession) -> None:
    session = make_session("nothing")
    await session.add_items([])
    assert await session.get_items() == []
    await session.add_items([message(0)])
    await session.add_items([])
    assert await session.get_items() == [message(0)]


async def test_sessions_with_other_ids_are_apart(make_session: MakeSession) -> None:
    first, second = make_session("first"), make_session("second")
    await first.add_items([message(1)])
    await second.add_items([message(2), message(3)])
    assert await second.pop_item() == message(3)
    assert await first.get_items() == [message(1)]
    assert await second.get_items() == [message(2)]
    await first.clear_session()
    assert await second.get_items() == [message(2)]


async def test_another_object_with_the_id_sees_the_same_items(make_session: MakeSession) -> None:
    writer = make_session("shared")
    await writer.add_items([message(0), message(1)])
    reader = make_session("shared")
    assert await reader.get_items() == [message(0), message(1)]
    assert await reader.pop_item() == message(1)
    assert await writer.get_items() == [message(0)]
    await writer.add_items([message(2)])
    assert await reader.get_items() == [message(0), message(2)]


async def test_items_are_stored_and_answered_as_copies(make_session: MakeSession) -> None:
    session = make_session("copies")
    item = {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    await session.add_items([item])
    item["content"][0]["text"] = "changed after add_items"
    read = await session.get_items()
    read[0]["content"][0]["text"] = "changed after get_items"
    assert await session.get_items() == [
        {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ]


async def test_an_item_that_is_not_json_is_refused_and_nothing_is_stored(make_session: MakeSession) -> None:
    session = make_session("not-json")
    await session.add_items([message(0)])
    with pytest.raises(TypeError):
        await session.add_items([message(1), {"role": "user", "content": object()}])
    assert await session.get_items() == [message(0)]


async def test_text_comes_back_exactly(make_session: MakeSession) -> None:
    session = make_session("text")
    items: list[Any] = [
        {"role": "user", "content": "Grüße, 你好, 👋 — \"quoted\" 'single' \\ back\nslash"},
        {"role": "assistant", "content": "'); DROP TABLE agent_messages; --"},
        {"role": "user", "content": ""},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
