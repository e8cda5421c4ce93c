"""Microsoft Agent Framework on Cairn: :class:`CairnCheckpointStorage`, the framework's
workflow checkpoint storage, each workflow name a Cairn execution and each superstep's
checkpoint a Cairn checkpoint (signed, as the framework's checkpoints may hold pickled
values).

::

    from agent_framework import WorkflowBuilder
    from cairn.agent_framework import CairnCheckpointStorage

    storage = CairnCheckpointStorage()                # CAIRN_API_KEY, CAIRN_API_URL
    workflow = WorkflowBuilder(start_executor=plan, name="pipeline", checkpoint_storage=storage)...
    async for event in storage.track(workflow, workflow.run("hello", stream=True)): ...

Install it with ``pip install "cairn-client[agent-framework]"``. The guide, with what
appears in Cairn, signing, replay and rollback, and the cost of each call, is
``docs/agent-framework.md``.
"""

try:
    import agent_framework  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError(
        'cairn.agent_framework needs Microsoft Agent Framework: pip install "cairn-client[agent-framework]"'
    ) from e

from ._storage import CairnCheckpointStorage

__all__ = ["CairnCheckpointStorage"]
