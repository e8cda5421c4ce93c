"""Cairn's Python client library: the API as typed resources, and tracing that makes
every run of your agent code a Cairn execution with a checkpoint per step.

::

    from cairn import Cairn

    client = Cairn()  # CAIRN_API_KEY, CAIRN_API_URL
    for execution in client.executions.list(status="failed"):
        print(execution.id, execution.error)
"""

from . import errors, models
from ._client import AsyncCairn, Cairn
from ._resources import AsyncPager, Pager
from ._specs import OMIT
from .tracing import AsyncRun, Run

__all__ = ["OMIT", "AsyncCairn", "AsyncPager", "AsyncRun", "Cairn", "Pager", "Run", "errors", "models"]
__version__ = "0.1.0"
