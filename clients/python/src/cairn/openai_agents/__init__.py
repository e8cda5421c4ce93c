"""The OpenAI Agents SDK on Cairn: :class:`CairnSession`, a session (conversation
memory) whose items live in a Cairn execution, and :class:`CairnTracingProcessor`, which
records every agent run as an execution and a failed run as a failure.

::

    from agents import Agent, Runner, add_trace_processor
    from cairn.openai_agents import CairnSession, CairnTracingProcessor

    add_trace_processor(CairnTracingProcessor())      # CAIRN_API_KEY, CAIRN_API_URL
    session = CairnSession("ticket-7")
    result = await Runner.run(agent, "Where is my order?", session=session)

Install it with ``pip install "cairn-client[openai-agents]"``. The guide, with what
appears in Cairn, replay and rollback, and the cost of each call, is
``docs/openai-agents.md``.
"""

try:
    import agents  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError(
        'cairn.openai_agents needs the OpenAI Agents SDK: pip install "cairn-client[openai-agents]"'
    ) from e

from ._session import FORMAT, STATE_MAX_BYTES, CairnSession, SessionEnded, SessionTooLarge
from ._tracing import ERROR_TYPES, CairnTracingProcessor

__all__ = [
    "ERROR_TYPES",
    "FORMAT",
    "STATE_MAX_BYTES",
    "CairnSession",
    "CairnTracingProcessor",
    "SessionEnded",
    "SessionTooLarge",
]
