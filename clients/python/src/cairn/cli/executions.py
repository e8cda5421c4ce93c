"""``cairn executions``: list, show, start, replay, roll back, pause, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

import click

from .. import models
from .._specs import OMIT
from .checkpoints import CHECKPOINT_COLUMNS, checkpoint_row
from .config import state
from .output import (
    IsoTime,
    answer,
    api_json,
    chart,
    command,
    emit_json,
    fields,
    json_argument,
    pretty,
    show_list,
    table,
    when,
)

EXECUTION_STATUSES = list(get_args(models.ExecutionStatus))


@click.group()
def executions() -> None:
    """Runs: list, show, start, replay, roll back, pause, cancel."""


def parse_tags(given: tuple[str, ...]) -> dict[str, str]:
    """``--tag KEY:VALUE`` options as a mapping (split at the first ``:``)."""
    tags: dict[str, str] = {}
    for raw in given:
        key, colon, value = raw.partition(":")
        if not colon or key in tags:
            raise click.BadParameter(f"{raw!r}: each --tag is KEY:VALUE, each key once", param_hint="--tag")
        tags[key] = value
    return tags


TAG_OPTION = click.option("--tag", "tag", multiple=True, metavar="KEY:VALUE")


@command(executions, "list")
@click.option("--status", type=click.Choice(EXECUTION_STATUSES))
@click.option("--workflow", "workflow_id", metavar="WORKFLOW_ID", help="Only this workflow's executions.")
@TAG_OPTION
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def executions_list(status: Any, workflow_id: str | None, tag: tuple[str, ...], follow: bool) -> None:
    """The executions, newest first; with --tag (repeatable), those with every tag given."""
    tags = parse_tags(tag)
    pager = state().client().executions.list(status=status, workflow_id=workflow_id, tags=tags)
    show_list(
        pager,
        follow,
        ["id", "workflow_id", "status", "attempt", "checkpoints", "created_at", "error", "tags"],
        lambda e: [
            e.id,
            e.workflow_id,
            e.status,
            e.attempt,
            e.checkpoint_count,
            when(e.created_at),
            e.error.error_type if e.error else None,
            " ".join(f"{k}:{v}" for k, v in e.tags.items()) or None,
        ],
    )


@command(executions, "stats")
@click.option("--bucket", type=click.Choice(["hour", "day"]), default="day", show_default=True)
@click.option(
    "--after", "created_after", type=IsoTime(), help="The window's start (default: 24 hours or 30 days ago)."
)
@click.option("--before", "created_before", type=IsoTime(), help="The window's end (default: now).")
def executions_stats(bucket: Any, created_after: datetime | None, created_before: datetime | None) -> None:
    """Executions started per UTC hour or day, by their status now, and failures recorded,
    as a text chart (the bar is the executions started)."""
    stats = (
        state()
        .client()
        .executions.stats(bucket=bucket, created_after=created_after, created_before=created_before)
    )
    chart(
        stats,
        ["total", *EXECUTION_STATUSES, "failures"],
        [
            (b.start, b.total, [b.total, *(getattr(b.by_status, s) for s in EXECUTION_STATUSES), b.failures])
            for b in stats.buckets
        ],
    )
    if not state().as_json:
        click.echo(f"{stats.total} executions, {stats.failures} failures", err=True)


EXECUTION_FIELDS = [
    "id",
    "workflow_id",
    "status",
    "attempt",
    "checkpoint_count",
    "current_checkpoint_id",
    "cancel_reason",
    "metadata",
    "tags",
    "created_at",
    "updated_at",
    "ended_at",
    "expires_at",
]


@command(executions, "show")
@click.argument("execution_id")
def executions_show(execution_id: str) -> None:
    """One execution: its fields, error, input, output and checkpoints.

    With --json, the execution as the API sends it (`cairn checkpoints list ID --all --json`
    for its checkpoints).
    """
    client = state().client()
    e = client.executions.get(execution_id)
    if state().as_json:
        emit_json(api_json(e))
        return
    checkpoints = list(client.checkpoints.list(execution_id=execution_id))
    fields(e, EXECUTION_FIELDS)
    if e.error:
        click.echo(f"\nerror: {e.error.error_type}: {e.error.message}")
    for name, value in (("input", e.input), ("output", e.output)):
        click.echo(f"\n{name}:")
        click.echo(pretty(value) if value is not None else "(none)")
    click.echo(f"\ncheckpoints ({len(checkpoints)}):")
    if checkpoints:
        table(CHECKPOINT_COLUMNS, (checkpoint_row(c) for c in checkpoints))
    else:
        click.echo("(none)")


def done(e: models.Execution, what: str) -> None:
    answer(e, f"{e.id} {what}: {e.status}, attempt {e.attempt}")


@command(executions, "start")
@click.argument("workflow_id")
@click.option("--input", "raw_input", metavar="JSON", help="The execution's input, as JSON.")
@TAG_OPTION
def executions_start(workflow_id: str, raw_input: str | None, tag: tuple[str, ...]) -> None:
    """Starts an execution of a workflow (it costs a credit), with the tags given
    (--tag KEY:VALUE, repeatable)."""
    value = OMIT if raw_input is None else json_argument(raw_input, "--input")
    tags = parse_tags(tag)
    done(state().client().executions.create(workflow_id=workflow_id, input=value, tags=tags), "started")


@command(executions, "replay")
@click.argument("execution_id")
@click.option("--from", "from_checkpoint", metavar="CHECKPOINT_ID", help="Replay from this checkpoint.")
@click.option("--from-start", is_flag=True, help="Replay from the start.")
@click.option("--preview", is_flag=True, help="Show what the replay would run again; change nothing.")
def executions_replay(
    execution_id: str, from_checkpoint: str | None, from_start: bool, preview: bool
) -> None:
    """Replays a failed or paused execution, from its current checkpoint unless told
    otherwise (it costs a credit). With --preview, the steps and tool calls recorded after
    that checkpoint, which the replay would run again."""
    if from_checkpoint is not None and from_start:
        raise click.UsageError("--from and --from-start exclude each other")
    checkpoint_id: Any = None if from_start else OMIT if from_checkpoint is None else from_checkpoint
    client = state().client()
    if preview:
        show_preview(client.executions.replay_preview(execution_id, checkpoint_id=checkpoint_id))
        return
    done(client.executions.replay(execution_id, checkpoint_id=checkpoint_id), "replayed")


def show_preview(p: models.ReplayPreview) -> None:
    """A replay preview for people (the API's JSON with --json)."""
    if state().as_json:
        emit_json(api_json(p))
        return
    at = p.from_checkpoint
    start = f"checkpoint #{at.sequence} {at.name or ''}".rstrip() if at else "the start"
    more = "+" if p.more else ""
    click.echo(
        f"A replay of {p.execution_id} from {start} runs again {p.checkpoints_after}{more} checkpoints:"
    )
    for title, counted in (("steps", p.steps), ("tool calls", p.tool_calls)):
        listed = ", ".join(f"{c.name} x{c.count}" for c in counted) or "none recorded"
        click.echo(f"  {title}: {listed}")
    cost = f"it costs {p.credits} credit{'' if p.credits == 1 else 's'}"
    verdict = cost if p.replayable else f"refused now: {p.refused}"
    click.echo(f"  {verdict}")


@command(executions, "rollback")
@click.argument("execution_id")
@click.option("--to", "checkpoint_id", required=True, metavar="CHECKPOINT_ID", help="The checkpoint to keep.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def executions_rollback(execution_id: str, checkpoint_id: str, yes: bool) -> None:
    """Rolls an execution back to one of its checkpoints; every later checkpoint is deleted."""
    if not yes:
        click.confirm(
            f"Roll {execution_id} back to {checkpoint_id}? Every later checkpoint is deleted.",
            abort=True,
            err=True,
        )
    e = state().client().executions.rollback(execution_id, checkpoint_id=checkpoint_id)
    if state().as_json:
        emit_json(api_json(e))
        return
    n = e.discarded_checkpoints
    discarded = "" if n is None else f"; {n} checkpoint{'' if n == 1 else 's'} discarded"
    click.echo(f"{e.id} rolled back to {checkpoint_id}: {e.status}{discarded}")


@command(executions, "pause")
@click.argument("execution_id")
def executions_pause(execution_id: str) -> None:
    """Pauses a running execution."""
    done(state().client().executions.pause(execution_id), "paused")


@command(executions, "cancel")
@click.argument("execution_id")
@click.option("--reason", help="Why (kept with the execution).")
def executions_cancel(execution_id: str, reason: str | None) -> None:
    """Cancels a running or paused execution."""
    e = state().client().executions.cancel(execution_id, reason=OMIT if reason is None else reason)
    done(e, "cancelled")
