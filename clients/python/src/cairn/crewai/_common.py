"""What :class:`CairnFlowPersistence` and :class:`CairnEventListener` share: the client
made from the environment, workflows found by name and executions found by key (cached
per client, so every persistence object CrewAI builds shares them), and values turned
into JSON the way CrewAI's SQLite backend stores them."""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from cairn import Cairn, _runs, errors, models

#: Executions remembered per client (least recently used go first).
_CACHE_SIZE = 10_000
_STRIPES = 64
#: Cairn's bounds: a checkpoint's name, an execution's output, a metadata value.
NAME_CHARS = 200
OUTPUT_BYTES = 256 * 1024
VALUE_CHARS = 500

_default: Cairn | None = None
_default_lock = threading.Lock()


def default_client() -> Cairn:
    """The process-wide client made from ``CAIRN_API_KEY`` and ``CAIRN_API_URL`` on
    first use (CrewAI rebuilds persistence objects from their fields alone)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Cairn()
        return _default


# ---- JSON as CrewAI's SQLite backend stores it ----


def _json_default(value: Any) -> Any:
    """What ``json.dumps`` cannot encode, as CrewAI's ``SQLiteFlowPersistence`` stores
    it: models as JSON, sets and tuples as lists, dates as ISO strings, the rest as
    ``str`` (UUID, Decimal, Path, ...)."""
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json")
        except Exception:
            return value.model_dump(mode="python")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value)


def to_json(value: Any) -> Any:
    """``value`` as the JSON CrewAI's SQLite backend would read back."""
    return json.loads(json.dumps(value, default=_json_default))


def state_dict(state: dict[str, Any] | BaseModel) -> dict[str, Any]:
    """A flow state (a dict or a pydantic model) as a JSON object."""
    if isinstance(state, BaseModel):
        state = _json_default(state)
    if not isinstance(state, dict):
        raise ValueError(f"state_data must be either a Pydantic BaseModel or dict, got {type(state)}")
    stored: dict[str, Any] = to_json(state)
    return stored


def text(value: Any, limit: int) -> str:
    """``value`` as text without control characters, at most ``limit`` characters."""
    return "".join(" " if c < " " or "\x7f" <= c <= "\x9f" else c for c in str(value))[:limit]


def bounded_output(value: Any) -> Any:
    """An execution's output within Cairn's 256 KiB: the value as JSON, or its start."""
    output = to_json(value)
    encoded = json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    if len(encoded.encode()) <= OUTPUT_BYTES - 1024:
        return output
    return {"truncated": True, "start": encoded[: (OUTPUT_BYTES // 8)]}


# ---- workflows and executions, per client ----


@dataclass
class Known:
    """What is known of an execution: its id, status and current checkpoint."""

    id: str
    status: str
    current: str | None

    @classmethod
    def of(cls, execution: models.ExecutionSummary) -> Known:
        return cls(execution.id, execution.status, execution.current_checkpoint_id)


class Registry:
    """One client's executions by ``(workflow id, key)``."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.executions: OrderedDict[tuple[str, str], Known] = OrderedDict()
        self._stripes = [threading.RLock() for _ in range(_STRIPES)]

    def lock(self, key: str) -> threading.RLock:
        """The lock that orders the calls about one execution key."""
        return self._stripes[hash(key) % _STRIPES]

    def known(self, workflow_id: str, key: str) -> Known | None:
        with self.mutex:
            found = self.executions.get((workflow_id, key))
            if found is not None:
                self.executions.move_to_end((workflow_id, key))
            return found

    def remember(self, workflow_id: str, key: str, execution: models.ExecutionSummary) -> Known:
        return self.keep(workflow_id, key, Known.of(execution))

    def keep(self, workflow_id: str, key: str, known: Known) -> Known:
        with self.mutex:
            self.executions[(workflow_id, key)] = known
            self.executions.move_to_end((workflow_id, key))
            while len(self.executions) > _CACHE_SIZE:
                self.executions.popitem(last=False)
        return known

    def forget(self, workflow_id: str, key: str) -> None:
        with self.mutex:
            self.executions.pop((workflow_id, key), None)


_registries: weakref.WeakKeyDictionary[Cairn, Registry] = weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry(client: Cairn) -> Registry:
    """The caches of ``client``, shared by every object that uses it."""
    with _registries_lock:
        found = _registries.get(client)
        if found is None:
            found = _registries[client] = Registry()
        return found


def workflow_id(client: Cairn, workflow: str) -> str:
    """The id of ``workflow`` (an id, or a name: found, else created as a ``crewai``
    workflow); a name is looked up once per client (the run core's rule)."""
    return _runs.workflow_id(client, workflow, "crewai")


def quietly_ended(call: Any, *args: Any, **kwargs: Any) -> models.Execution | None:
    """``call(*args, **kwargs)``, or None when the execution is no longer in a status that
    allows it (a second failure of one run, a completion after a cancel)."""
    try:
        result: models.Execution = call(*args, **kwargs)
    except errors.InvalidState:
        return None
    return result
