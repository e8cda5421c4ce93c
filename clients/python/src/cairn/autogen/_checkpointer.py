"""``TeamCheckpointer``: an AutoGen team's state as checkpoints of a Cairn execution."""

from __future__ import annotations

import contextlib
import re
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from autogen_agentchat.base import TaskResult, Team
from autogen_agentchat.messages import BaseChatMessage

from cairn import AsyncCairn, models
from cairn._keyed import KeyedExecutions

#: How a team run reports an agent's exception:
#: ``RuntimeError("<type>: <message>\nTraceback:\n<traceback>")``.
_AGENT_ERROR = re.compile(
    r"^(?P<kind>[A-Za-z_][\w.]*): (?P<message>.*?)\nTraceback:\n(?P<traceback>.*)$", re.DOTALL
)
#: A checkpoint name's longest form.
_NAME_MAX = 200

Task = str | BaseChatMessage | Sequence[BaseChatMessage] | None


class TeamCheckpointer:
    """Saves and restores AutoGen teams (``RoundRobinGroupChat``, ``SelectorGroupChat``,
    ``Swarm``, ...) in Cairn.

    - ``client``: an :class:`~cairn.AsyncCairn` (default: one made from the environment,
      ``CAIRN_API_URL`` and ``CAIRN_API_KEY``).
    - ``workflow``: the Cairn workflow (an id, or a name: found, else created as an
      ``autogen`` workflow).
    - ``tags``: tags every execution it starts gets (see ``Cairn.executions.create``), to
      find them again by tag.

    Each ``key`` (your name for the conversation, 1 to 256 characters) is an execution of
    the workflow; each :meth:`save` a checkpoint of it holding the team's ``save_state()``
    (JSON, shown on the dashboard). :meth:`load` restores the execution's **current**
    checkpoint, which a rollback or replay (dashboard, ``cairn``, the API) moves; the next
    :meth:`save` after a rollback or a failure replays the execution from there first.
    """

    def __init__(
        self,
        client: AsyncCairn | None = None,
        *,
        workflow: str = "autogen-teams",
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client if client is not None else AsyncCairn()
        self._runs = KeyedExecutions(self._client, workflow, "autogen", "autogen", tags)

    async def save(self, team: Team, key: str, *, name: str | None = None) -> models.Checkpoint:
        """The team's state as a new checkpoint of ``key``'s execution (started if it has
        none; replayed first when failed or paused). One request once the object knows the
        key; the first: two."""
        state = dict(await team.save_state())
        async with self._runs.lock(key):
            return await self._runs.write(key, state, checkpoint_name=(name or "team state")[:_NAME_MAX])

    async def load(self, team: Team, key: str) -> bool:
        """Loads the current checkpoint of ``key``'s execution into ``team``
        (``load_state``): True, or False when there is none (the team is left as it is).
        Two requests."""
        current = await self._runs.current(key)
        if current is None or current.state is None:
            return False
        await team.load_state(current.state)
        return True

    async def run(self, team: Team, task: Task = None, *, key: str) -> TaskResult:
        """Loads ``key``'s current checkpoint into ``team`` (if any), runs ``task``, and
        saves the team's state after the run. When the run raises, the execution fails:
        ``error_type`` from the agent's exception (``ValueError`` -> ``VALUE_ERROR``),
        ``details.agent_name`` (the agent that was speaking) and ``details.traceback``;
        the exception is raised again and nothing is saved."""
        await self.load(team, key)
        with _speakers(team) as speaking:
            try:
                result = await team.run(task=task)
            except Exception as e:
                kind, message, tb = _reported(e)
                await self._runs.fail(key, kind, message, speaking[-1] if speaking else None, tb)
                raise
        await self.save(team, key, name=f"after run: {result.stop_reason or 'done'}")
        return result


def _reported(error: Exception) -> tuple[str, str, str]:
    """The exception class, message and traceback of a failed run: the agent's own when
    the team reports it as text (AutoGen's group chats raise ``RuntimeError`` with them)."""
    found = _AGENT_ERROR.match(str(error)) if isinstance(error, RuntimeError) else None
    if found is not None:
        return found["kind"].rsplit(".", 1)[-1], found["message"], found["traceback"]
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return type(error).__name__, str(error), tb


@contextlib.contextmanager
def _speakers(team: Team) -> Iterator[list[str]]:
    """The names of the team's agents in the order they were asked to speak during the
    block: each participant's ``on_messages_stream`` is wrapped meanwhile (AutoGen's
    group chats name no agent in the error they raise)."""
    speaking: list[str] = []
    wrapped: list[Any] = []
    for agent in getattr(team, "_participants", []):
        stream = getattr(agent, "on_messages_stream", None)
        name = getattr(agent, "name", None)
        if stream is None or not isinstance(name, str):
            continue

        def speak(*args: Any, _stream: Any = stream, _name: str = name, **kwargs: Any) -> Any:
            speaking.append(_name)
            return _stream(*args, **kwargs)

        agent.on_messages_stream = speak
        wrapped.append(agent)
    try:
        yield speaking
    finally:
        for agent in wrapped:
            del agent.on_messages_stream
