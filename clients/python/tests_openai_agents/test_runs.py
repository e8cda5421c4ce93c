"""Real agent runs on the SDK's offline ``ScriptedModel`` with a session: the same script
on ``SQLiteSession`` and on ``CairnSession`` gives the same answers, the model sees the
same history, and the session holds the same items afterwards."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool
from agents.memory import Session
from agents.testing import ScriptedModel, assistant_message, function_call

from cairn import AsyncCairn, Cairn
from cairn.openai_agents import CairnSession


@function_tool
def order_status(order_id: str) -> str:
    """The status of an order."""
    return f"order {order_id} left the warehouse yesterday"


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            [function_call("order_status", {"order_id": "A-7"}, call_id="call-1")],
            [assistant_message("Your order A-7 left the warehouse yesterday.", item_id="msg-1")],
            [assistant_message("It should arrive on Friday.", item_id="msg-2")],
            [assistant_message("You are welcome.", item_id="msg-3")],
        ]
    )


def _run_sync(agent: Agent[Any], text: str, session: Session) -> Any:
    loop = asyncio.new_event_loop()  # run_sync drives the thread's own loop
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, text, session=session)
    finally:
        loop.close()
        asyncio.set_event_loop(None)


async def converse(session: Session, how: str) -> tuple[list[str], list[Any], list[Any]]:
    """Three turns with the support agent: its answers, what the model was given at each
    call, and the session's items afterwards."""
    model = script()
    agent = Agent(name="support", instructions="Help with orders.", tools=[order_status], model=model)
    answers = []
    for text in ("Where is my order A-7?", "When will it arrive?", "Thanks!"):
        if how == "run":
            result = await Runner.run(agent, text, session=session)
        elif how == "run_streamed":
            result = Runner.run_streamed(agent, text, session=session)
            async for _ in result.stream_events():
                pass
        else:
            result = await asyncio.to_thread(_run_sync, agent, text, session)
        answers.append(result.final_output)
    model.assert_complete()
    return answers, [call.input for call in model.calls], await session.get_items()


@pytest.mark.parametrize("how", ["run", "run_streamed", "run_sync"])
async def test_a_conversation_with_a_tool_stores_what_sqlite_stores(
    how: str, tmp_path: Path, client: Cairn, async_client: AsyncCairn
) -> None:
    expected = await converse(SQLiteSession("ticket-7", tmp_path / "reference.db"), how)
    # run_sync drives a loop of its own in another thread: the AsyncCairn belongs to this one.
    cairn_client = client if how == "run_sync" else async_client
    got = await converse(CairnSession("ticket-7", cairn_client), how)
    assert got == expected
    answers, inputs, items = got
    assert answers == [
        "Your order A-7 left the warehouse yesterday.",
        "It should arrive on Friday.",
        "You are welcome.",
    ]
    # the last call saw the whole conversation: three questions, the tool call and its output
    assert [i.get("content") for i in inputs[-1] if i.get("role") == "user"] == [
        "Where is my order A-7?",
        "When will it arrive?",
        "Thanks!",
    ]
    assert [i.get("type") for i in items if i.get("type") in ("function_call", "function_call_output")] == [
        "function_call",
        "function_call_output",
    ]
    assert len(items) == 8  # 3 questions, the tool call and its output, 3 answers
    # a new object (another process, say) continues the conversation where it stopped
    assert await CairnSession("ticket-7", cairn_client).get_items() == items


async def test_a_failed_turn_keeps_the_earlier_turns(tmp_path: Path, async_client: AsyncCairn) -> None:
    outcomes = []
    for session in (SQLiteSession("s", tmp_path / "ref.db"), CairnSession("s", async_client)):
        model = ScriptedModel([[assistant_message("first answer")], RuntimeError("model boom")])
        agent = Agent(name="support", model=model)
        await Runner.run(agent, "first question", session=session)
        with pytest.raises(RuntimeError, match="model boom"):
            await Runner.run(agent, "second question", session=session)
        outcomes.append(await session.get_items())
    assert outcomes[0] == outcomes[1]
    assert [i.get("role") for i in outcomes[1]][:2] == ["user", "assistant"]
