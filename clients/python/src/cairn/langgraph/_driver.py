"""The saver's methods are written once, as *flows*: generators that yield the API calls
they need (an :data:`Op`) and get each answer back (or its error thrown in). A driver
runs a flow on a sync or an async client, through the client's internal interface
(:mod:`cairn._api`); a listing flow also yields its items (:class:`Out`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from .. import _runs, errors
from .. import _specs as specs
from .._resources import AsyncResources, Resources
from .._runs import Page as Page

T = TypeVar("T")
#: How long the saver waits out the API's rate limit (429, after the client's own
#: retries) before it raises: a graph is not failed for being throttled for a while.
THROTTLE_PATIENCE = 600.0
_log = logging.getLogger("cairn.langgraph")


@dataclass(frozen=True)
class Delete:
    """``executions.delete`` (its DELETE loop)."""

    execution_id: str


@dataclass(frozen=True)
class Out:
    """An item a listing flow yields to its caller."""

    item: CheckpointTuple


Op = specs.Spec[Any] | Page | Delete
Flow = Generator[Op, Any, T]
Listing = Generator[Op | Out, Any, None]


def _perform(client: Resources, op: Op) -> Any:
    if isinstance(op, Page):
        return client.api.page(op.spec, op.after)
    if isinstance(op, Delete):
        client.executions.delete(op.execution_id)
        return None
    return client.api.answer(op)


async def _aperform(client: AsyncResources, op: Op) -> Any:
    if isinstance(op, Page):
        return await client.api.page(op.spec, op.after)
    if isinstance(op, Delete):
        await client.executions.delete(op.execution_id)
        return None
    return await client.api.answer(op)


def _pause(throttled: errors.RateLimited, waited: float) -> float | None:
    """How long to wait before sending a throttled call again (its ``Retry-After``, else
    a second), or None once :data:`THROTTLE_PATIENCE` is spent. A 429 is refused before
    any work, so sending the call again is safe."""
    if waited >= THROTTLE_PATIENCE:
        return None
    pause = min(max(throttled.retry_after or 1.0, 0.05), THROTTLE_PATIENCE - waited)
    if not waited:
        _log.warning("the Cairn API is throttling this tenant: waiting %.1f s, then sending again", pause)
    return pause


def perform(client: Resources, op: Op) -> Any:
    waited = 0.0
    while True:
        try:
            return _perform(client, op)
        except errors.RateLimited as throttled:
            pause = _pause(throttled, waited)
            if pause is None:
                raise
            time.sleep(pause)
            waited += pause


async def aperform(client: AsyncResources, op: Op) -> Any:
    waited = 0.0
    while True:
        try:
            return await _aperform(client, op)
        except errors.RateLimited as throttled:
            pause = _pause(throttled, waited)
            if pause is None:
                raise
            await asyncio.sleep(pause)
            waited += pause


def run(client: Resources, flow: Flow[T]) -> T:
    """The flow's result, its calls made on ``client`` (the run core's driver, with
    LangGraph's ops and patience)."""
    return _runs.run(client, flow, perform)


async def arun(client: AsyncResources, flow: Flow[T]) -> T:
    """:func:`run` on an async client."""
    return await _runs.arun(client, flow, aperform)


def iterate(client: Resources, flow: Listing) -> Iterator[CheckpointTuple]:
    """The items of a listing flow, its calls made on ``client``."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                step = flow.send(value) if error is None else flow.throw(error)
            except StopIteration:
                return
            value, error = None, None
            if isinstance(step, Out):
                yield step.item
                continue
            try:
                value = perform(client, step)
            except errors.CairnError as e:
                error = e
    finally:
        flow.close()


async def aiterate(client: AsyncResources, flow: Listing) -> AsyncIterator[CheckpointTuple]:
    """:func:`iterate` on an async client."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                step = flow.send(value) if error is None else flow.throw(error)
            except StopIteration:
                return
            value, error = None, None
            if isinstance(step, Out):
                yield step.item
                continue
            try:
                value = await aperform(client, step)
            except errors.CairnError as e:
                error = e
    finally:
        flow.close()
