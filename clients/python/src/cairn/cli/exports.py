"""``cairn export``: the tenant's records (or one workflow's) into a directory."""

from __future__ import annotations

from pathlib import Path

import click

from .config import state
from .output import emit_json


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--workflow", "workflow_id", metavar="WORKFLOW_ID", help="Only this workflow's records.")
def export(directory: Path, workflow_id: str | None) -> None:
    """Exports the tenant's records into DIRECTORY and waits for it: every workflow,
    execution (then its checkpoints, with their states) and failure, as gzip JSON Lines
    (`<export id>-00001.jsonl.gz`, ...; each line {"type": ..., "data": ...}), beside the
    export itself (`<export id>.json`). Needs a full key (`*`)."""
    s = state()
    client = s.client()
    started = client.exports.create(workflow_id=workflow_id)
    click.echo(f"{started.id}: exporting", err=True)
    done = client.exports.wait(started.id)
    paths = client.exports.save(done, directory)
    if s.as_json:
        emit_json(done.api_json())
        return
    for path in paths:
        click.echo(str(path))
    c = done.counts
    click.echo(
        f"{done.id}: {c.workflows} workflows, {c.executions} executions, {c.checkpoints} checkpoints, "
        f"{c.failures} failures in {len(paths)} parts",
        err=True,
    )
