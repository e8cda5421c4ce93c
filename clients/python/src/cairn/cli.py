"""``cairn``: the command line for operators, on the client library.

Configuration, strongest first: ``--api-key`` / ``--api-url``, then ``CAIRN_API_KEY`` /
``CAIRN_API_URL``, then the profile (``--profile``, default ``default``) in
``$XDG_CONFIG_HOME/cairn/config.toml`` (``~/.config/cairn/config.toml``) that
``cairn login`` writes with mode 0600.

Output: tables for people; ``--json`` prints the API's JSON unchanged (a list prints a
JSON array of its items). Lists print their first page unless ``--all``.

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 unauthorized (or no key), 5 invalid
state or conflict, 6 invalid input, 7 insufficient credits.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from . import errors, models
from ._client import Cairn, Pager

EXIT_CODES = {
    errors.NotFound: 3,
    errors.Unauthorized: 4,
    errors.InvalidState: 5,
    errors.VersionMismatch: 5,
    errors.IdempotencyInProgress: 5,
    errors.ValidationFailed: 6,
    errors.PayloadTooLarge: 6,
    errors.MalformedRequest: 6,
    errors.IdempotencyKeyReused: 6,
    errors.InsufficientCredits: 7,
}

# Piped output is not cut to a terminal's width.
WORKFLOW_TYPES = ["crewai", "langgraph", "autogen", "semantic_kernel", "custom"]

out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 400)
err = Console(stderr=True, highlight=False, soft_wrap=True)
M = TypeVar("M", bound=models.Model)


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cairn" / "config.toml"


def read_profiles(path: Path) -> dict[str, dict[str, str]]:
    """The profiles of a config file (``[name]`` sections of ``key = "value"`` lines)."""
    if not path.exists():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib

        data = tomllib.loads(path.read_text())
        return {k: {a: str(b) for a, b in v.items()} for k, v in data.items() if isinstance(v, dict)}
    # Python 3.10 has no tomllib: the subset cairn login writes.
    profiles: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = profiles.setdefault(line[1:-1].strip(), {})
        elif "=" in line and section is not None:
            name, value = line.split("=", 1)
            section[name.strip()] = str(json.loads(value.strip()))
    return profiles


def write_profiles(path: Path, profiles: dict[str, dict[str, str]]) -> None:
    """Writes the config file atomically, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(
        f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + "\n"
        for name, values in profiles.items()
    )
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class State:
    def __init__(self, api_key: str | None, api_url: str | None, profile: str, as_json: bool) -> None:
        self.api_key, self.api_url, self.profile, self.as_json = api_key, api_url, profile, as_json

    def client(self) -> Cairn:
        saved = read_profiles(config_path()).get(self.profile, {})
        key = self.api_key or os.environ.get("CAIRN_API_KEY") or saved.get("api_key")
        url = self.api_url or os.environ.get("CAIRN_API_URL") or saved.get("api_url")
        if not key:
            raise errors.Unauthorized("no API key: run cairn login, or set CAIRN_API_KEY, or pass --api-key")
        return Cairn(key, base_url=url)


pass_state = click.make_pass_decorator(State)


def dump(value: Any) -> Any:
    """The API's JSON of an answer, unchanged."""
    return value.api_json() if isinstance(value, models.Model) else value


def emit_json(value: Any) -> None:
    out.out(json.dumps(value, indent=2, ensure_ascii=False), highlight=False)


def when(value: Any) -> str:
    return "" if value is None else str(value.isoformat(timespec="seconds")).replace("+00:00", "Z")


def table(columns: list[str], rows: Iterable[list[Any]]) -> None:
    """Rows for people; a cell too wide for the screen folds, never loses characters (ids
    are copied from here)."""
    t = Table(box=None, pad_edge=False)
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    out.print(t)


def items(state: State, pager: Pager[M], follow: bool) -> list[M]:
    """The first page, or every page with ``--all`` (a line says what was left out)."""
    if follow:
        if not err.is_terminal:
            return list(pager)
        # A progress bar on a terminal's stderr while every page is read.
        from rich.progress import Progress

        found: list[M] = []
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("reading pages", total=None)
            for page in pager.pages():
                found.extend(page.items)
                progress.update(task, total=max(page.total, len(found)), completed=len(found))
        return found
    page = pager.first_page()
    if len(page.items) < page.total:
        err.print(f"showing {len(page.items)} of {page.total}; --all for every page")
    return list(page.items)


def show_list(
    state: State, pager: Pager[M], follow: bool, columns: list[str], row: Callable[[M], list[Any]]
) -> None:
    found = items(state, pager, follow)
    if state.as_json:
        emit_json([dump(x) for x in found])
    elif not found:
        err.print("nothing to show")
    else:
        table(columns, (row(x) for x in found))


def fields(value: models.Model, names: list[str]) -> None:
    data = value.api_json()
    width = max(len(n) for n in names)
    for name in names:
        shown = data.get(name)
        if isinstance(shown, (dict, list)):
            shown = json.dumps(shown, ensure_ascii=False)
        out.print(f"{name:<{width}}  {'' if shown is None else shown}")


@click.group(
    epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 unauthorized, 5 invalid state, "
    "6 invalid input, 7 insufficient credits."
)
@click.option("--api-key", envvar=None, help="API key (else CAIRN_API_KEY, else the profile).")
@click.option("--api-url", help="API base URL (else CAIRN_API_URL, else the profile, else the local stack).")
@click.option("--profile", default="default", show_default=True, help="Profile in the config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
@click.pass_context
def cli(ctx: click.Context, api_key: str | None, api_url: str | None, profile: str, as_json: bool) -> None:
    """Cairn from the command line: workflows, executions, checkpoints, failures, billing."""
    ctx.obj = State(api_key, api_url, profile, as_json)


@cli.command()
@click.option("--api-key", "key", help="The key (asked for when not given).")
@click.option("--api-url", "url", help="The API base URL to keep with it.")
@pass_state
def login(state: State, key: str | None, url: str | None) -> None:
    """Checks an API key and keeps it in the profile."""
    key = key or state.api_key or click.prompt("API key", hide_input=True)
    url = url or state.api_url or os.environ.get("CAIRN_API_URL")
    with Cairn(key, base_url=url) as client:
        client.billing.balance()
    path = config_path()
    profiles = read_profiles(path)
    profiles[state.profile] = {"api_key": key, **({"api_url": url} if url else {})}
    write_profiles(path, profiles)
    err.print(f"saved profile {state.profile!r} in {path}")


@cli.group()
def workflows() -> None:
    """Registered workflows."""


@workflows.command("list")
@click.option("--status", type=click.Choice(["draft", "published", "archived"]))
@click.option("--type", "workflow_type", type=click.Choice(WORKFLOW_TYPES))
@click.option("--all", "follow", is_flag=True, help="Every page.")
@pass_state
def workflows_list(state: State, status: Any, workflow_type: Any, follow: bool) -> None:
    """The workflows, newest first."""
    pager = state.client().workflows.list(status=status, workflow_type=workflow_type)
    show_list(
        state,
        pager,
        follow,
        ["id", "name", "type", "status", "version", "updated"],
        lambda w: [w.id, w.name, w.workflow_type, w.status, w.version, when(w.updated_at)],
    )


@workflows.command("show")
@click.argument("workflow_id")
@pass_state
def workflows_show(state: State, workflow_id: str) -> None:
    """One workflow."""
    w = state.client().workflows.get(workflow_id)
    if state.as_json:
        emit_json(dump(w))
        return
    fields(
        w,
        [
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
        ],
    )


def json_option(raw: str | None, name: str) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=name) from None


@workflows.command("create")
@click.option("--name", required=True)
@click.option("--type", "workflow_type", type=click.Choice(WORKFLOW_TYPES), required=True)
@click.option("--description")
@click.option("--definition", help="The definition, as a JSON object.")
@pass_state
def workflows_create(
    state: State, name: str, workflow_type: Any, description: str | None, definition: str | None
) -> None:
    """Registers a workflow."""
    extra: dict[str, Any] = {}
    if description is not None:
        extra["description"] = description
    if definition is not None:
        extra["definition"] = json_option(definition, "--definition")
    w = state.client().workflows.create(name=name, workflow_type=workflow_type, **extra)
    if state.as_json:
        emit_json(dump(w))
    else:
        out.print(f"{w.id} created ({w.status})")


@cli.group()
def executions() -> None:
    """Runs: list, inspect, start, replay, roll back, pause, cancel."""


@executions.command("list")
@click.option("--status", type=click.Choice(["running", "completed", "failed", "cancelled", "paused"]))
@click.option("--workflow", "workflow_id")
@click.option("--all", "follow", is_flag=True, help="Every page.")
@pass_state
def executions_list(state: State, status: Any, workflow_id: str | None, follow: bool) -> None:
    """The executions, newest first."""
    pager = state.client().executions.list(status=status, workflow_id=workflow_id)
    show_list(
        state,
        pager,
        follow,
        ["id", "workflow", "status", "attempt", "checkpoints", "created", "error"],
        lambda e: [
            e.id,
            e.workflow_id,
            e.status,
            e.attempt,
            e.checkpoint_count,
            when(e.created_at),
            e.error.error_type if e.error else None,
        ],
    )


CHECKPOINT_COLUMNS = ["seq", "id", "name", "bytes", "attempt", "created"]


def checkpoint_row(c: models.Checkpoint) -> list[Any]:
    return [c.sequence, c.id, c.name, c.state_size_bytes, c.attempt, when(c.created_at)]


def show_execution(state: State, e: models.Execution, checkpoints: list[models.Checkpoint]) -> None:
    if state.as_json:
        emit_json({**dump(e), "checkpoints": [dump(c) for c in checkpoints]})
        return
    fields(
        e,
        [
            "id",
            "workflow_id",
            "status",
            "attempt",
            "current_checkpoint_id",
            "checkpoint_count",
            "metadata",
            "cancel_reason",
            "created_at",
            "updated_at",
            "ended_at",
        ],
    )
    if e.error:
        out.print(f"\nerror  {e.error.error_type}: {e.error.message}")
    for name, value in (("input", e.input), ("output", e.output)):
        if value is not None:
            out.print(f"\n{name}\n{json.dumps(value, indent=2, ensure_ascii=False)}")
    if checkpoints:
        out.print("\ncheckpoints")
        table(CHECKPOINT_COLUMNS, (checkpoint_row(c) for c in checkpoints))


@executions.command("show")
@click.argument("execution_id")
@pass_state
def executions_show(state: State, execution_id: str) -> None:
    """One execution with its error, input, output and checkpoint timeline."""
    client = state.client()
    e = client.executions.get(execution_id)
    show_execution(state, e, list(client.checkpoints.list(execution_id=execution_id)))


@executions.command("start")
@click.argument("workflow_id")
@click.option("--input", "raw_input", help="The input, as JSON.")
@pass_state
def executions_start(state: State, workflow_id: str, raw_input: str | None) -> None:
    """Starts an execution (it costs credits)."""
    value = json_option(raw_input, "--input")
    done(state, state.client().executions.create(workflow_id=workflow_id, input=value), "started")


def done(state: State, e: models.Execution, what: str) -> None:
    if state.as_json:
        emit_json(dump(e))
    else:
        out.print(f"{e.id} {what}: {e.status}, attempt {e.attempt}")


@executions.command("replay")
@click.argument("execution_id")
@click.option("--from", "from_checkpoint", help="Replay from this checkpoint (default: the current one).")
@click.option("--from-start", is_flag=True, help="Replay from the start.")
@pass_state
def executions_replay(state: State, execution_id: str, from_checkpoint: str | None, from_start: bool) -> None:
    """Replays a failed or paused execution (it costs credits)."""
    if from_checkpoint and from_start:
        raise click.UsageError("--from and --from-start exclude each other")
    client = state.client().executions
    if from_start:
        e = client.replay(execution_id, checkpoint_id=None)
    elif from_checkpoint:
        e = client.replay(execution_id, checkpoint_id=from_checkpoint)
    else:
        e = client.replay(execution_id)
    done(state, e, "replayed")


@executions.command("rollback")
@click.argument("execution_id")
@click.option("--to", "checkpoint_id", required=True, help="The checkpoint to roll back to.")
@click.option("--yes", is_flag=True, help="Do not ask.")
@pass_state
def executions_rollback(state: State, execution_id: str, checkpoint_id: str, yes: bool) -> None:
    """Rolls an execution back to a checkpoint; the checkpoints after it are deleted."""
    if not yes:
        click.confirm(
            f"Roll {execution_id} back to {checkpoint_id}, deleting every later checkpoint?",
            abort=True,
            err=True,
        )
    e = state.client().executions.rollback(execution_id, checkpoint_id=checkpoint_id)
    if state.as_json:
        emit_json(dump(e))
    else:
        out.print(
            f"{e.id} rolled back to {checkpoint_id}: {e.status}, "
            f"{e.discarded_checkpoints} checkpoints discarded"
        )


@executions.command("pause")
@click.argument("execution_id")
@pass_state
def executions_pause(state: State, execution_id: str) -> None:
    """Pauses a running execution."""
    done(state, state.client().executions.pause(execution_id), "paused")


@executions.command("cancel")
@click.argument("execution_id")
@click.option("--reason")
@pass_state
def executions_cancel(state: State, execution_id: str, reason: str | None) -> None:
    """Cancels a running or paused execution."""
    done(state, state.client().executions.cancel(execution_id, reason=reason), "cancelled")


@cli.group()
def checkpoints() -> None:
    """An execution's checkpoints and their states."""


@checkpoints.command("list")
@click.argument("execution_id")
@click.option("--all", "follow", is_flag=True, help="Every page.")
@pass_state
def checkpoints_list(state: State, execution_id: str, follow: bool) -> None:
    """The checkpoints of an execution, by sequence."""
    pager = state.client().checkpoints.list(execution_id=execution_id)
    show_list(
        state,
        pager,
        follow,
        CHECKPOINT_COLUMNS,
        checkpoint_row,
    )


@checkpoints.command("show")
@click.argument("checkpoint_id")
@click.option("--state", "with_state", is_flag=True, help="Print the state (JSON).")
@click.option(
    "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the state to this file."
)
@pass_state
def checkpoints_show(state: State, checkpoint_id: str, with_state: bool, output: Path | None) -> None:
    """One checkpoint; --state for its state."""
    c = state.client().checkpoints.get(checkpoint_id, include_state=with_state or output is not None)
    if output is not None:
        output.write_text(json.dumps(c.state, ensure_ascii=False))
        err.print(f"state of {c.id} ({c.state_size_bytes} bytes of JSON) written to {output}")
    elif with_state:
        emit_json(c.state)
    elif state.as_json:
        emit_json(dump(c))
    else:
        fields(
            c,
            [
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
            ],
        )


@cli.group()
def failures() -> None:
    """Failures: investigate and settle."""


@failures.command("list")
@click.option("--status", type=click.Choice(["open", "resolved", "ignored"]))
@click.option("--all", "follow", is_flag=True, help="Every page.")
@pass_state
def failures_list(state: State, status: Any, follow: bool) -> None:
    """The failures, newest first."""
    pager = state.client().failures.list(status=status)
    show_list(
        state,
        pager,
        follow,
        ["id", "execution", "type", "status", "created", "message"],
        lambda f: [f.id, f.execution_id, f.error_type, f.status, when(f.created_at), f.message[:80]],
    )


@failures.command("show")
@click.argument("failure_id")
@pass_state
def failures_show(state: State, failure_id: str) -> None:
    """One failure with its traceback and recovery commands."""
    f = state.client().failures.get(failure_id)
    if state.as_json:
        emit_json(dump(f))
        return
    fields(
        f,
        ["id", "execution_id", "workflow_id", "error_type", "message", "status", "created_at", "resolved_at"],
    )
    details = dict(f.details)
    trace = details.pop("traceback", None)
    if details:
        out.print(f"\ndetails\n{json.dumps(details, indent=2, ensure_ascii=False)}")
    if isinstance(trace, str):
        out.print("\ntraceback")
        out.out(trace, highlight=False)
    if f.recovery_commands:
        out.print("\nrecovery commands")
        table(["id", "type", "status"], ([c.id, c.type, c.status] for c in f.recovery_commands))


@failures.command("resolve")
@click.argument("failure_id")
@pass_state
def failures_resolve(state: State, failure_id: str) -> None:
    """Marks a failure resolved."""
    settled(state, state.client().failures.resolve(failure_id))


@failures.command("ignore")
@click.argument("failure_id")
@pass_state
def failures_ignore(state: State, failure_id: str) -> None:
    """Marks an open failure ignored."""
    settled(state, state.client().failures.ignore(failure_id))


def settled(state: State, s: models.FailureSettled) -> None:
    if state.as_json:
        emit_json(dump(s))
    else:
        out.print(f"{s.id}: {s.status}")


@failures.command("stats")
@pass_state
def failures_stats(state: State) -> None:
    """Counts by status and the 30-day failure rate."""
    s = state.client().failures.stats()
    if state.as_json:
        emit_json(dump(s))
    else:
        fields(
            s,
            [
                "total_failures",
                "open_failures",
                "resolved_failures",
                "ignored_failures",
                "failure_rate_last_30_days",
            ],
        )


@cli.group()
def billing() -> None:
    """Credits: balance, transactions, top-ups."""


@billing.command("balance")
@pass_state
def billing_balance(state: State) -> None:
    """The credit balance (1 credit = US$0.01)."""
    b = state.client().billing.balance()
    if state.as_json:
        emit_json(dump(b))
    else:
        out.print(f"{b.credits_balance} credits (US${b.balance_usd:.2f})")


@billing.command("transactions")
@click.option("--type", "kind", type=click.Choice(["topup", "usage", "subscription"]))
@click.option("--all", "follow", is_flag=True, help="Every page.")
@pass_state
def billing_transactions(state: State, kind: str | None, follow: bool) -> None:
    """The ledger, newest first."""
    pager = state.client().billing.transactions(type=kind)
    show_list(
        state,
        pager,
        follow,
        ["id", "type", "amount", "after", "created", "description"],
        lambda t: [t.id, t.type, t.amount, t.credits_after, when(t.created_at), t.description],
    )


@billing.command("topup")
@click.argument("amount_cents", type=click.IntRange(100, 1_000_000))
@pass_state
def billing_topup(state: State, amount_cents: int) -> None:
    """Starts a top-up; complete the payment with the client secret."""
    t = state.client().billing.topup(amount_cents=amount_cents)
    if state.as_json:
        emit_json(dump(t))
    else:
        out.print(
            f"payment intent {t.payment_intent_id} for {t.credits} credits; client secret {t.client_secret}"
        )


def report(error: errors.CairnError) -> int:
    err.print(f"error: {error.code}: {error.detail}", markup=False)
    for e in error.errors:
        err.print(f"  {e.get('field')}: {e.get('message')}", markup=False)
    if error.request_id:
        err.print(f"request id: {error.request_id}", markup=False)
    return next((code for cls, code in EXIT_CODES.items() if isinstance(error, cls)), 1)


def main(argv: list[str] | None = None) -> None:
    """The ``cairn`` entry point."""
    try:
        cli.main(args=argv, prog_name="cairn", standalone_mode=False)
    except errors.CairnError as error:
        sys.exit(report(error))
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(1)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except OSError as e:
        err.print(f"error: {e}", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
