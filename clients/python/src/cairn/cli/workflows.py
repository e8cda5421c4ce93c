"""``cairn workflows``: list, show, create."""

from __future__ import annotations

from typing import Any, get_args

import click

from .. import models
from .._specs import OMIT
from .config import state
from .output import answer, command, json_argument, show, show_list, when

WORKFLOW_TYPES = list(get_args(models.WorkflowType))
WORKFLOW_STATUSES = list(get_args(models.WorkflowStatus))


@click.group()
def workflows() -> None:
    """Registered workflows: list, show, create."""


@command(workflows, "list")
@click.option("--status", type=click.Choice(WORKFLOW_STATUSES))
@click.option("--type", "workflow_type", type=click.Choice(WORKFLOW_TYPES))
@click.option("--name", help="Only workflows of exactly this name.")
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def workflows_list(status: Any, workflow_type: Any, name: str | None, follow: bool) -> None:
    """The workflows, newest first."""
    pager = state().client().workflows.list(status=status, workflow_type=workflow_type, name=name)
    show_list(
        pager,
        follow,
        ["id", "name", "type", "status", "version", "updated_at"],
        lambda w: [w.id, w.name, w.workflow_type, w.status, w.version, when(w.updated_at)],
    )


WORKFLOW_FIELDS = [
    "id",
    "name",
    "description",
    "workflow_type",
    "status",
    "version",
    "metadata",
    "definition",
    "created_at",
    "updated_at",
]


@command(workflows, "show")
@click.argument("workflow_id")
def workflows_show(workflow_id: str) -> None:
    """One workflow."""
    show(state().client().workflows.get(workflow_id), WORKFLOW_FIELDS)


@command(workflows, "create")
@click.option("--name", required=True)
@click.option("--type", "workflow_type", type=click.Choice(WORKFLOW_TYPES), required=True)
@click.option("--description")
@click.option("--definition", metavar="JSON", help="The definition, a JSON object.")
def workflows_create(name: str, workflow_type: Any, description: str | None, definition: str | None) -> None:
    """Registers a workflow (as a draft)."""
    w = (
        state()
        .client()
        .workflows.create(
            name=name,
            workflow_type=workflow_type,
            description=OMIT if description is None else description,
            definition=OMIT if definition is None else json_argument(definition, "--definition"),
        )
    )
    answer(w, f"{w.id} created ({w.status}, version {w.version})")
