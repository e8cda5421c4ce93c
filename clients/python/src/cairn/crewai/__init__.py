"""CrewAI on Cairn: flow states as checkpoints, crew and flow runs as executions.

::

    from crewai.flow.flow import Flow, listen, start
    from crewai.flow.persistence import persist
    from cairn.crewai import CairnEventListener, CairnFlowPersistence

    listener = CairnEventListener()          # every crew kickoff and flow run recorded

    @persist(CairnFlowPersistence())         # every method's state a checkpoint
    class ResearchFlow(Flow[State]):
        ...

Install it with ``pip install "cairn-client[crewai]"``; both read ``CAIRN_API_KEY`` and
``CAIRN_API_URL`` unless given a client.

- :class:`CairnFlowPersistence` is a CrewAI ``FlowPersistence``: a flow's id is the key
  of an execution, each saved state a checkpoint named after the method, and
  ``load_state`` reads the execution's current checkpoint, so a replay or rollback made
  in Cairn decides where the flow resumes (``persistence.resume(flow, flow_id)`` skips
  the methods recorded before it). Pending human feedback pauses the execution.
- :class:`CairnEventListener` is a CrewAI ``BaseEventListener``: a crew kickoff is an
  execution with a checkpoint per completed task; a failed task or kickoff fails it with
  the agent's name, the task's id and the traceback.
"""

from __future__ import annotations

try:
    import crewai  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError('cairn.crewai needs CrewAI: pip install "cairn-client[crewai]"') from e

from ._listener import CairnEventListener
from ._persistence import CairnFlowPersistence, FlowEnded

__all__ = ["CairnEventListener", "CairnFlowPersistence", "FlowEnded"]
