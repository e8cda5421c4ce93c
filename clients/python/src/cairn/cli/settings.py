"""``cairn settings``: how long ended executions and their checkpoints are kept."""

from __future__ import annotations

import click

from .. import models
from .config import state
from .output import command, show

RETENTION_FIELDS = [
    "executions_days",
    "effective_executions_days",
    "max_executions_days",
    "plan",
    "checkpoints",
    "checkpoints_days",
    "updated_at",
]


@click.group()
def settings() -> None:
    """The tenant's settings: retention."""


@command(settings, "retention")
def settings_retention() -> None:
    """How long ended executions and their checkpoints are kept."""
    show(state().client().settings.retention(), RETENTION_FIELDS)


@command(settings, "set-retention")
@click.option(
    "--executions-days",
    type=click.IntRange(1, 3650),
    help="Days an ended execution is kept (default: as long as the plan allows).",
)
@click.option(
    "--checkpoints",
    type=click.Choice(["all", "keep_latest", "days"]),
    default="all",
    show_default=True,
    help="keep_latest: only the checkpoint an ended execution stands at; days: the others go "
    "--checkpoints-days after the end.",
)
@click.option("--checkpoints-days", type=click.IntRange(1, 3650), help="With --checkpoints days.")
def settings_set_retention(
    executions_days: int | None, checkpoints: models.CheckpointRetention, checkpoints_days: int | None
) -> None:
    """Replaces the retention settings (an option left out takes its default); they apply
    to executions that end from now on."""
    r = (
        state()
        .client()
        .settings.set_retention(
            executions_days=executions_days, checkpoints=checkpoints, checkpoints_days=checkpoints_days
        )
    )
    show(r, RETENTION_FIELDS)
