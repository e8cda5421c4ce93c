"""``cairn failures``: list, investigate, resolve or ignore."""

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
