"""``cairn executions bulk``: replay or cancel every execution a filter matches, and
follow the job."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .. import models
from .config import state
from .executions import EXECUTION_STATUSES, TAG_OPTION, executions, parse_tags
from .output import IsoTime, api_json, command, emit_json, show_list, table, when

F = TypeVar("F", bound=Callable[..., Any])

#: Seconds between two looks at a job being followed.
POLL_SECONDS = 1.0


@executions.group("bulk")
def bulk() -> None:
    """Bulk jobs: replay or cancel every execution a filter matches (--dry-run counts)."""


def filter_options(fn: F) -> F:
    """The filter's options, all of which must hold."""
    options = [
        click.option("--status", type=click.Choice(EXECUTION_STATUSES)),
        click.option("--workflow", "workflow_id", metavar="WORKFLOW_ID"),
        TAG_OPTION,
        click.option("--failure-group", metavar="GROUP_ID", help="With an open failure in the group."),
        click.option("--error-type", metavar="TYPE", help="Executions whose error has this type."),
        click.option("--after", "created_after", type=IsoTime(), help="Made after this time."),
        click.option("--before", "created_before", type=IsoTime(), help="Made before this time."),
        click.option("--dry-run", is_flag=True, help="Count and show what matches; change nothing."),
        click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
        click.option("--wait", is_flag=True, help="Follow the job until it ends."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def progress(job: models.BulkJob, width: int = 30) -> str:
    """One line: a bar of what the job has reached, and its counts."""
    most = max(job.matched, job.reached, 1)
    filled = min(width, round(job.reached * width / most))
    counts = f"{job.reached}/{job.matched} reached: {job.done} done, {job.skipped} skipped"
    counts += f", {job.failed} failed"
    return f"{job.id} [{'#' * filled}{'.' * (width - filled)}] {counts} ({job.status})"


def follow(job: models.BulkJob) -> models.BulkJob:
    """Polls the job until it ends, redrawing its progress line on a terminal."""
    client = state().client()
    live = sys.stderr.isatty() and not state().as_json
    while job.status == "running":
        if live:
            click.echo(f"\r{progress(job)}", nl=False, err=True)
        time.sleep(POLL_SECONDS)
        job = client.executions.bulk_job(job.id)
    if live:
        click.echo("\r", nl=False, err=True)
    return job


def report_job(job: models.BulkJob) -> None:
    if state().as_json:
        emit_json(api_json(job))
        return
    click.echo(progress(job))
    for kind, reasons in (("skipped", job.skipped_by_reason), ("failed", job.failed_by_reason)):
        for why, n in reasons.items():
            click.echo(f"  {kind} {n}: {why}")
    if job.error:
        click.echo(f"  error: {job.error}")


def run(action: models.BulkAction, given: dict[str, Any]) -> None:
    dry_run, yes, wait = given.pop("dry_run"), given.pop("yes"), given.pop("wait")
    given["tags"] = parse_tags(given.pop("tag"))
    client = state().client()
    if dry_run:
        dry = client.executions.bulk_dry_run(action, **given)
        if state().as_json:
            emit_json(api_json(dry))
            return
        cost = f"; replaying them costs {dry.credits_needed} credits" if action == "replay" else ""
        click.echo(f"{dry.matched} executions match{cost}")
        if dry.executions:
            columns = ["id", "workflow_id", "status", "attempt", "created_at", "error"]
            rows = (
                [e.id, e.workflow_id, e.status, e.attempt, when(e.created_at), e.error and e.error.error_type]
                for e in dry.executions
            )
            table(columns, rows)
        return
    if not yes:
        click.confirm(f"{action.capitalize()} every execution that matches?", abort=True, err=True)
    job = client.executions.bulk(action, **given)
    report_job(follow(job) if wait else job)


@command(bulk, "replay")
@filter_options
def bulk_replay(**given: Any) -> None:
    """Replays every execution the filter matches (from its current checkpoint; a credit
    each), at most once each. Without --wait, prints the job to follow with `show`."""
    run("replay", given)


@command(bulk, "cancel")
@filter_options
def bulk_cancel_executions(**given: Any) -> None:
    """Cancels every execution the filter matches (those running or paused)."""
    run("cancel", given)


@command(bulk, "show")
@click.argument("bulk_id")
@click.option("--wait", is_flag=True, help="Follow the job until it ends, with a progress bar.")
def bulk_show(bulk_id: str, wait: bool) -> None:
    """A bulk job's progress."""
    job = state().client().executions.bulk_job(bulk_id)
    report_job(follow(job) if wait else job)


@command(bulk, "list")
@click.option("--all", "every", is_flag=True, help="Every page, not only the first.")
def bulk_list(every: bool) -> None:
    """The bulk jobs, newest first."""
    show_list(
        state().client().executions.bulk_jobs(),
        every,
        ["id", "action", "status", "matched", "done", "skipped", "failed", "created_at"],
        lambda j: [j.id, j.action, j.status, j.matched, j.done, j.skipped, j.failed, when(j.created_at)],
    )


@command(bulk, "cancel-job")
@click.argument("bulk_id")
def bulk_cancel_job(bulk_id: str) -> None:
    """Stops a bulk job: no round starts after; what it did stays done."""
    report_job(state().client().executions.cancel_bulk(bulk_id))
