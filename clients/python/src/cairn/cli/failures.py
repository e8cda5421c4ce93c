"""``cairn failures``: list, investigate, resolve or ignore, one by one or by group."""

from __future__ import annotations

from typing import Any, get_args

import click

from .. import models
from .config import state
from .output import answer, api_json, command, emit_json, fields, pretty, show, show_list, table, when

FAILURE_STATUSES = list(get_args(models.FailureStatus))


@click.group()
def failures() -> None:
    """Failures: list, investigate, resolve or ignore."""


@command(failures, "list")
@click.option("--status", type=click.Choice(FAILURE_STATUSES))
@click.option("--group", "group_id", metavar="GROUP_ID", help="Only this failure group's (fgrp_...).")
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def failures_list(status: Any, group_id: str | None, follow: bool) -> None:
    """The failures, newest first; each names its group (failures of one cause share it)."""
    pager = state().client().failures.list(status=status, group_id=group_id)
    show_list(
        pager,
        follow,
        ["id", "execution_id", "error_type", "status", "created_at", "group_id", "message"],
        lambda f: [f.id, f.execution_id, f.error_type, f.status, when(f.created_at), f.group_id, f.message],
    )


FAILURE_FIELDS = [
    "id",
    "execution_id",
    "workflow_id",
    "error_type",
    "message",
    "status",
    "created_at",
    "resolved_at",
    "group_id",
    "fingerprint",
]


@command(failures, "show")
@click.argument("failure_id")
def failures_show(failure_id: str) -> None:
    """One failure: its details, traceback and recovery commands."""
    f = state().client().failures.get(failure_id)
    if state().as_json:
        emit_json(api_json(f))
        return
    fields(f, FAILURE_FIELDS)
    details = dict(f.details)
    trace = details.pop("traceback", None)
    if details:
        click.echo(f"\ndetails:\n{pretty(details)}")
    if trace is not None:
        click.echo("\ntraceback:")
        text = trace if isinstance(trace, str) else pretty(trace)
        click.echo(text, nl=not text.endswith("\n"))
    click.echo("\nrecovery commands:")
    if f.recovery_commands:
        table(["id", "type", "status"], ([c.id, c.type, c.status] for c in f.recovery_commands))
    else:
        click.echo("(none)")


def settled(s: models.FailureSettled) -> None:
    answer(s, f"{s.id}: {s.status}")


@command(failures, "resolve")
@click.argument("failure_id")
def failures_resolve(failure_id: str) -> None:
    """Marks a failure resolved."""
    settled(state().client().failures.resolve(failure_id))


@command(failures, "ignore")
@click.argument("failure_id")
def failures_ignore(failure_id: str) -> None:
    """Marks an open failure ignored."""
    settled(state().client().failures.ignore(failure_id))


@command(failures, "stats")
def failures_stats() -> None:
    """Failure counts by status and the 30-day failure rate."""
    show(
        state().client().failures.stats(),
        [
            "total_failures",
            "open_failures",
            "resolved_failures",
            "ignored_failures",
            "failure_rate_last_30_days",
        ],
    )


# ---- groups: the failures of one cause ----


@command(failures, "groups")
@click.option("--status", type=click.Choice(FAILURE_STATUSES))
@click.option("--workflow", "workflow_id", metavar="WORKFLOW_ID", help="Only this workflow's groups.")
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def failures_groups(status: Any, workflow_id: str | None, follow: bool) -> None:
    """Failure groups (the failures of one cause), the most recently seen first."""
    pager = state().client().failures.groups(status=status, workflow_id=workflow_id)
    show_list(
        pager,
        follow,
        ["id", "status", "open", "total", "error_type", "last_seen", "fingerprint"],
        lambda g: [
            g.id,
            f"{g.status} by replay" if g.resolved_by == "replay" else g.status,
            g.counts.open,
            g.counts.total,
            g.error_type,
            when(g.last_seen),
            g.fingerprint,
        ],
    )


@failures.group("group")
def failures_group() -> None:
    """One failure group: show it, or resolve or ignore its open failures."""


GROUP_FIELDS = [
    "id",
    "status",
    "workflow_id",
    "error_type",
    "agent_name",
    "fingerprint",
    "sample_message",
    "counts",
    "resolved_by",
    "first_seen",
    "last_seen",
    "failures_per_hour",
]


@command(failures_group, "show")
@click.argument("group_id")
def failures_group_show(group_id: str) -> None:
    """A group: what its failures share, their counts by status, and how many were made in
    each of the last 24 hours (oldest first)."""
    show(state().client().failures.group(group_id), GROUP_FIELDS)


def settle_group(group_id: str, verb: str) -> None:
    """Resolves or ignores the group's open failures, a hundred per request, until none
    are left; prints how many."""
    client = state().client()
    act = client.failures.resolve_group if verb == "resolve" else client.failures.ignore_group
    done = 0
    while True:
        g = act(group_id)
        done += g.settled
        if not g.remaining:
            break
    answer(g, f"{g.id}: {done} failure{'' if done == 1 else 's'} {verb}d; the group is {g.status}")


@command(failures_group, "resolve")
@click.argument("group_id")
def failures_group_resolve(group_id: str) -> None:
    """Resolves every open failure of the group."""
    settle_group(group_id, "resolve")


@command(failures_group, "ignore")
@click.argument("group_id")
def failures_group_ignore(group_id: str) -> None:
    """Ignores every open failure of the group."""
    settle_group(group_id, "ignore")
