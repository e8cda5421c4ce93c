"""``cairn langgraph``: LangGraph threads moved into Cairn (``pip install
'cairn-client[langgraph]'``; a SQLite source needs ``langgraph-checkpoint-sqlite``)."""

from __future__ import annotations

import click

from .config import CommandError, state
from .output import command, emit_json


@click.group()
def langgraph() -> None:
    """LangGraph: move threads from another checkpointer into Cairn."""


@command(langgraph, "migrate")
@click.option("--from", "source", required=True, metavar="sqlite:PATH", help="Where the threads are now.")
@click.option("--workflow", required=True, help="The Cairn workflow (id or name) the threads go to.")
@click.option(
    "--thread", "threads", multiple=True, metavar="THREAD_ID", help="Only this thread (repeatable)."
)
def langgraph_migrate(source: str, workflow: str, threads: tuple[str, ...]) -> None:
    """Copies LangGraph threads (checkpoints, metadata, parents, writes) into Cairn, where
    they continue under CairnSaver(workflow=...). Running it again copies nothing twice."""
    kind, _, where = source.partition(":")
    if kind != "sqlite" or not where:
        raise click.BadParameter("must be sqlite:PATH (a SqliteSaver's database file)", param_hint="--from")
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver

        from ..langgraph import CairnSaver, migrate
    except ImportError as e:
        raise CommandError(
            "missing_dependency",
            f"{e.name or e}: pip install 'cairn-client[langgraph]' langgraph-checkpoint-sqlite",
        ) from None
    import sqlite3
    from pathlib import Path

    if not Path(where).is_file():
        raise click.BadParameter(f"{where}: no such file", param_hint="--from")
    # Read only: the source is never written.
    with sqlite3.connect(f"file:{Path(where).resolve()}?mode=ro", uri=True, check_same_thread=False) as conn:
        target = CairnSaver(state().client(), workflow=workflow)
        done = migrate(SqliteSaver(conn), target, list(threads) or None)
    if state().as_json:
        emit_json(
            {
                "threads": done.threads,
                "checkpoints": done.checkpoints,
                "writes": done.writes,
                "skipped": list(done.skipped),
            }
        )
        return
    copied = f"{done.threads} threads, {done.checkpoints} checkpoints and {done.writes} writes"
    click.echo(f"{copied} copied into {workflow}")
    if done.skipped:
        click.echo(f"left alone (their execution moved on in Cairn): {', '.join(done.skipped)}", err=True)
