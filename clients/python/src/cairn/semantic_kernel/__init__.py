"""Semantic Kernel processes on Cairn: :class:`ProcessCheckpointer` keeps a process's
state (``KernelProcessStateMetadata``) as checkpoints of an execution keyed by your own
name for the run, and gives back the current one to rebuild the process with
``ProcessBuilder.build(state_metadata=...)``.

::

    from cairn.semantic_kernel import ProcessCheckpointer

    checkpointer = ProcessCheckpointer()              # CAIRN_API_KEY, CAIRN_API_URL
    process = builder.build(state_metadata=await checkpointer.load("article-7"))
    async with await start(process=process, kernel=kernel, initial_event="start") as context:
        await checkpointer.save((await context.get_state()).to_process_state_metadata(), "article-7")

Install it with ``pip install "cairn-client[semantic-kernel]"``. The guide is
``docs/semantic-kernel.md``.
"""

try:
    import semantic_kernel  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError(
        'cairn.semantic_kernel needs Semantic Kernel: pip install "cairn-client[semantic-kernel]"'
    ) from e

from cairn._keyed import ExecutionEnded

from ._checkpointer import ProcessCheckpointer

__all__ = ["ExecutionEnded", "ProcessCheckpointer"]
