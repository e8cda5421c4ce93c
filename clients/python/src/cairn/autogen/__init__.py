"""AutoGen (autogen-agentchat) on Cairn: :class:`TeamCheckpointer` keeps a team's state
(``save_state``) as checkpoints of an execution keyed by your own name for the
conversation, restores the current one (``load_state``), and records a failed run as a
failure naming the agent that was speaking.

::

    from cairn.autogen import TeamCheckpointer

    checkpointer = TeamCheckpointer()                 # CAIRN_API_KEY, CAIRN_API_URL
    result = await checkpointer.run(team, "Write the release note", key="release-42")

Install it with ``pip install "cairn-client[autogen]"``. The guide is
``docs/autogen.md``.
"""

try:
    import autogen_agentchat  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError('cairn.autogen needs AutoGen: pip install "cairn-client[autogen]"') from e

from cairn._keyed import ExecutionEnded

from ._checkpointer import TeamCheckpointer

__all__ = ["ExecutionEnded", "TeamCheckpointer"]
