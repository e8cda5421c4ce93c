"""LangGraph checkpoints in Cairn: :class:`CairnSaver`, a LangGraph checkpointer
(``BaseCheckpointSaver``) on the Cairn API, sync and async.

::

    from cairn.langgraph import CairnSaver

    saver = CairnSaver(workflow="support-agent")     # CAIRN_API_KEY, CAIRN_API_URL
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "ticket-7"}})

Install it with ``pip install 'cairn-client[langgraph]'``.

**Where things go.** ``workflow`` is a workflow id (``wf_...``) or a name (found by name,
else created with ``workflow_type="langgraph"``). A LangGraph thread is one execution of
that workflow whose ``key`` is the thread id, started idempotently by the first write. A
LangGraph checkpoint is a Cairn checkpoint whose ``key`` is the checkpoint id, named
after its source and step (``"loop 3"``), whose state is a JSON object::

    {"format": "cairn.langgraph/1", "checkpoint_ns": "", "parent_checkpoint_id": "1ef...",
     "checkpoint": {"v": 4, "id": "1ef...", "ts": "...", "channel_values": {...},
                    "channel_versions": {...}, "versions_seen": {...}, ...},
     "metadata": {"source": "loop", "step": 3, "parents": {}, ...}}

Values that are plain JSON (dicts with string keys, lists, strings, integers, finite
floats, booleans, None) are stored as they are, so a Cairn user can read the states;
anything else (bytes, tuples, sets, messages, models, ...) is stored as
``{"__cairn_typed__": [type, base64]}`` from the saver's ``serde``. Every checkpoint
holds all its channel values (no blobs shared between checkpoints), so a state, typed
values included, must fit Cairn's 4 MiB. Pending writes are the checkpoint's Cairn
writes, under ``(task_id, index)`` as LangGraph's savers key them, read back in
LangGraph's order (``writes_sort_key``). The checkpoint's Cairn ``metadata`` holds the
namespace (``checkpoint_ns``) and the LangGraph metadata keys with scalar values,
JSON-encoded (``source: '"loop"'``, ``step: '3'``), so ``list(filter=...)`` filters on
the server; the filter is always checked again on the stored metadata, exactly (a
checkpoint whose metadata did not all fit is flagged ``langgraph_partial`` and read
too).

**The execution's status** (a decision; Cairn shows it on the dashboard):

- A thread's execution stays running between runs (a thread is a conversation):
  ``saver.complete(config, output=...)`` completes it for good; a completed or cancelled
  execution takes no more writes (:class:`ThreadEnded`).
- Every write (``put``, ``put_writes``) needs the execution running. When it is paused
  or failed, the saver first replays it from the Cairn checkpoint of the checkpoint the
  config points at (from the start when it points at none): it is running again, its
  ``attempt`` one more, and the replay is charged as any replay. A write that finds the
  status changed behind the saver (409, e.g. an operator rolled it back: paused) reads
  the execution, replays it when paused or failed, and is sent once more.
- After storing writes of the root namespace that hold an interrupt (``interrupt()``),
  the saver pauses the execution; after writes that hold an error (a node raised, and
  no error handler takes it), it fails it: ``error_type`` from the exception's class in
  upper snake case (else ``AGENT_ERROR``), its message, ``details`` with the
  ``task_id``, the ``channel`` and the ``traceback`` (a failure is recorded). A
  subgraph's interrupts and errors reach the root namespace through its parent task, so
  they count once. Resuming (``Command(resume=...)``) or retrying (``invoke(None,
  config)``) replays the execution: attempt 2, 3, ... Cairn allows 50 attempts per
  execution, so a thread can be resumed or retried 49 times. Static breakpoints
  (``interrupt_before``/``interrupt_after``) write no interrupt: the execution stays
  running.
- **One request per step.** A task's plain writes are held for the ``put`` that ends
  their step (the next checkpoint, whose parent is theirs) and sent with it
  (``pending_writes`` of ``POST /checkpoints``): the step and its checkpoint are one
  request and one transaction. Writes no ``put`` claims within a second are sent on
  their own, and so are those held for a thread before it is read (``get_tuple``,
  ``list``), at ``close`` and at exit. Interrupts, errors, resumes and writes an error
  handler waits for go at once, with what is held for their checkpoint, as do more
  writes than a ``put`` carries (100 tasks, 1,000 writes, 1 MiB), and writes LangGraph
  hands over after the next checkpoint is stored (its background threads may race).
  Writes for a checkpoint not stored yet are kept for it (for up to 10 minutes), as
  LangGraph's own savers take them. So a process killed mid-step loses the writes of
  that step's finished tasks not sent yet (held for about a second, longer while the API
  refuses them); LangGraph runs those tasks again. ``async`` durability waits for
  nothing.
- **Throttled, not failed.** A request the API refuses with 429 (over the tenant's rate
  limit, past the client's own retries) is sent again after its ``Retry-After``, for up
  to 10 minutes (``THROTTLE_PATIENCE``): a graph slows down under the limit instead of
  failing. A 429 is refused before any work, so nothing is stored twice.
- LangGraph sends a step's writes concurrently, without waiting for the ``put`` of
  their checkpoint: ``put_writes`` that go at once wait for that ``put`` while this saver sends the
  thread's checkpoints or writes (up to 5 minutes; 2 s once it sends none; not once
  that ``put`` failed). Writes for a checkpoint newer than any this saver stored for
  the thread (LangGraph's ids grow with time; ``async`` durability) wait without first
  asking the API for it, and a pause or failure waits for the thread's other writes under
  way in this saver, then is applied once. A write of the same run that reaches the
  saver after it (a parallel task that was still running) is stored (a replay) and the
  pause or failure applied again (a failure then is recorded twice); errors of tasks
  cancelled because another failed are not stored. A run starts by reading its thread's checkpoint
  (``get_tuple`` of the root namespace): that ends "the same run".

**Moving threads in.** ``migrate(source_saver, target_saver, thread_ids=None)`` copies
threads from any LangGraph saver (SqliteSaver, PostgresSaver, InMemorySaver, ...): their
checkpoints oldest first, with ids, metadata, parents, channel versions and pending
writes; the threads then continue under the target. A thread from a saver that writes
string channel versions goes on with string versions (``get_next_version``). The
command line does it from a SQLite file or a PostgreSQL database: ``cairn langgraph
migrate --from sqlite:PATH|postgres:DSN --workflow NAME``.

``delete_thread`` deletes the execution (its checkpoints and writes); ``copy_thread``
starts the target thread's execution and copies the checkpoints oldest first, with
their ids, metadata, parents and writes. ``prune`` deletes every checkpoint of the
threads but the newest per namespace (``keep_latest``) or the threads (``delete``);
``delete_for_runs`` deletes the checkpoints whose metadata names one of the runs in
every thread of the workflow (a read of each thread per run: LangGraph names runs
without their threads). A checkpoint id is stored once: putting it again changes nothing.

**The modules.** ``_saver``: :class:`CairnSaver`, LangGraph's interface, sync and async.
Each method's API calls are written once as a *flow* (a generator of calls) that
``_driver`` runs on the sync or the async client with the run core's driver
(:mod:`cairn._runs`): ``_flows`` (lookups, the execution's status, ``put``,
``put_writes``, ``get_tuple``, ``complete``; the saver is a ``Flows``), and two parts the
saver holds, each on those flows: ``_listing`` (``list``) and ``_housekeeping``
(deleting, copying, pruning); ``_migrate``: :func:`migrate`.
``_encoding``: values and checkpoint states; ``_metadata``: the Cairn metadata of a
checkpoint and which filters the server applies; ``_threads``: thread and execution,
configs, what the saver remembers; ``_status``: the pauses and failures writes call
for; ``_held``: writes held for the next ``put``; ``_traffic``: writes waiting for
their checkpoint's ``put``, and the threads' locks; ``_text``: the strings the API
accepts.
"""

from __future__ import annotations

try:
    import langchain_core.runnables  # noqa: F401
    import langgraph.checkpoint.base  # noqa: F401 (LangGraph is an optional dependency)
except ImportError as e:  # pragma: no cover
    raise ImportError("cairn.langgraph needs LangGraph: pip install 'cairn-client[langgraph]'") from e

from ._encoding import FORMAT, TYPED
from ._metadata import NS_KEY as NS_KEY
from ._metadata import PARTIAL_KEY as PARTIAL_KEY
from ._migrate import Migrated, migrate
from ._saver import CairnSaver
from ._status import ERROR_SOURCE_NODE as ERROR_SOURCE_NODE
from ._threads import ThreadEnded

__all__ = ["FORMAT", "TYPED", "CairnSaver", "Migrated", "ThreadEnded", "migrate"]
