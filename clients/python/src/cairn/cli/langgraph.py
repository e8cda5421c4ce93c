"""``cairn langgraph``: LangGraph threads moved into Cairn (``pip install
'cairn-client[langgraph]'``; a SQLite source needs ``langgraph-checkpoint-sqlite``, a
PostgreSQL one ``langgraph-checkpoint-postgres``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from .config import CommandError, state
from .output import command, emit_json


@click.group()
def langgraph() -> None:
    """LangGraph: move threads from another checkpointer into Cairn."""


@contextlib.contextmanager
def _source(kind: str, where: str) -> Iterator[Any]:
    """The saver of ``--from``, opened read-only: the source is never written."""
    try:
        if kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as e:
        package = "langgraph-checkpoint-sqlite" if kind == "sqlite" else "langgraph-checkpoint-postgres"
        raise CommandError(
            "missing_dependency", f"{e.name or e}: pip install 'cairn-client[langgraph]' {package}"
        ) from None
    if kind == "sqlite":
        import sqlite3
        from pathlib import Path

        if not Path(where).is_file():
            raise click.BadParameter(f"{where}: no such file", param_hint="--from")
        uri = f"file:{Path(where).resolve()}?mode=ro"
        with sqlite3.connect(uri, uri=True, check_same_thread=False) as conn:
            yield SqliteSaver(conn)
        return
    conninfo = psycopg.conninfo.make_conninfo(where, options="-c default_transaction_read_only=on")
    try:
        opened = PostgresSaver.from_conn_string(conninfo)
        saver = opened.__enter__()
    except psycopg.Error as e:
        raise click.BadParameter(f"cannot connect: {e}", param_hint="--from") from None
    try:
        yield saver
    finally:
        opened.__exit__(None, None, None)


@command(langgraph, "migrate")
@click.option(
    "--from", "source", required=True, metavar="sqlite:PATH|postgres:DSN", help="Where the threads are now."
)
@click.option("--workflow", required=True, help="The Cairn workflow (id or name) the threads go to.")
@click.option(
    "--thread", "threads", multiple=True, metavar="THREAD_ID", help="Only this thread (repeatable)."
)
def langgraph_migrate(source: str, workflow: str, threads: tuple[str, ...]) -> None:
    """Copies LangGraph threads (checkpoints, metadata, parents, writes) into Cairn, where
    they continue under CairnSaver(workflow=...), from a SqliteSaver file or a
    PostgresSaver database (read only). Running it again copies nothing twice."""
    kind, _, where = source.partition(":")
    if kind not in ("sqlite", "postgres") or not where:
        raise click.BadParameter(
            "must be sqlite:PATH (a SqliteSaver's file) or postgres:DSN (a PostgresSaver's database)",
            param_hint="--from",
        )
    try:
        from ..langgraph import CairnSaver, migrate
    except ImportError as e:
        hint = f"{e.name or e}: pip install 'cairn-client[langgraph]'"
        raise CommandError("missing_dependency", hint) from None
    with _source(kind, where) as saver:
        target = CairnSaver(state().client(), workflow=workflow)
        done = migrate(saver, target, list(threads) or None)
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
