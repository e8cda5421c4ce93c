"""``cairn checkpoints``: an execution's checkpoints and their states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import models
from .config import CommandError, state
from .output import command, pretty, show, show_list, size, when

CHECKPOINT_COLUMNS = ["sequence", "id", "name", "size", "attempt", "created_at"]


def checkpoint_row(c: models.Checkpoint) -> list[Any]:
    return [c.sequence, c.id, c.name, size(c.state_size_bytes), c.attempt, when(c.created_at)]


@click.group()
def checkpoints() -> None:
    """An execution's checkpoints and their states."""


@command(checkpoints, "list")
@click.argument("execution_id")
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def checkpoints_list(execution_id: str, follow: bool) -> None:
    """The checkpoints of an execution, by sequence."""
    pager = state().client().checkpoints.list(execution_id=execution_id)
    show_list(pager, follow, CHECKPOINT_COLUMNS, checkpoint_row)


CHECKPOINT_FIELDS = [
    "id",
    "execution_id",
    "workflow_id",
    "sequence",
    "name",
    "parent_checkpoint_id",
    "attempt",
    "metadata",
    "state_size_bytes",
    "created_at",
]


@command(checkpoints, "show")
@click.argument("checkpoint_id")
@click.option("--state", "with_state", is_flag=True, help="Print the checkpoint's state (JSON).")
@click.option(
    "--output",
    metavar="FILE",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the state to FILE instead (implies --state).",
)
def checkpoints_show(checkpoint_id: str, with_state: bool, output: Path | None) -> None:
    """One checkpoint; with --state, its state."""
    wanted = with_state or output is not None
    c = state().client().checkpoints.get(checkpoint_id, include_state=wanted)
    if not wanted:
        show(c, CHECKPOINT_FIELDS)
        return
    if c.state is None:
        raise CommandError("no_state", f"the API sent no state for {c.id}")
    text = pretty(c.state) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote the state of {c.id} ({size(c.state_size_bytes)} of JSON) to {output}", err=True)
