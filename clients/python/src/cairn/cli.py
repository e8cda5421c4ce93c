"""``cairn``: the Cairn API from the command line, on the client library.

Configuration, setting by setting, strongest first:

1. ``--api-key`` / ``--api-url``;
2. ``CAIRN_API_KEY`` / ``CAIRN_API_URL``;
3. the profile (``--profile``, default ``default``) in ``$XDG_CONFIG_HOME/cairn/config.toml``
   (``~/.config/cairn/config.toml`` without ``XDG_CONFIG_HOME``): a TOML table per profile with
   ``api_key`` and ``api_url``, as ``cairn login`` writes it (mode 0600);
4. for the URL, the library's default (the local stack).

Output: tables for people; ``--json`` prints the API's JSON unchanged (a list prints a JSON
array of its items). A list prints its first page and says on stderr how much it left out;
``--all`` follows every page (with a progress bar on stderr when that is a terminal).

Exit codes:

====  ==========================================================================
0     ok
1     error: any other API error, a connection error or timeout, a local file error
2     usage (click's own: unknown command or option, bad value)
3     not found (``not_found``)
4     unauthorized (``unauthorized``), or no API key configured
5     invalid state or conflict (``invalid_state``, ``version_mismatch``, ``idempotency_in_progress``)
6     invalid input (``validation_failed``, ``payload_too_large``, ``malformed_request``)
7     insufficient credits (``insufficient_credits``)
====  ==========================================================================

An error is printed on stderr as ``error: <code>: <detail>``, then its field errors and
``request id: ...`` when it has them; never as a Python traceback.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast, get_args

import click
import httpx
import pydantic
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import errors, models
from ._client import Cairn
from ._resources import Pager
from ._specs import OMIT

M = TypeVar("M", bound=models.Model)
F = TypeVar("F", bound=Callable[..., Any])

#: The exit code of each kind of API error (the first class that matches); any other is 1.
EXIT_CODES: tuple[tuple[type[errors.CairnError], int], ...] = (
    (errors.NotFound, 3),
    (errors.Unauthorized, 4),
    (errors.InvalidState, 5),
    (errors.VersionMismatch, 5),
    (errors.IdempotencyInProgress, 5),
    (errors.ValidationFailed, 6),
    (errors.PayloadTooLarge, 6),
    (errors.MalformedRequest, 6),
    (errors.InsufficientCredits, 7),
)

EPILOG = """\b
Exit codes:
  0  ok
  1  error (any other API error, connection error or timeout, file error)
  2  usage
  3  not found
  4  unauthorized, or no API key configured
  5  invalid state or conflict
  6  invalid input (validation failed, payload too large, malformed request)
  7  insufficient credits
"""

WORKFLOW_TYPES = list(get_args(models.WorkflowType))
WORKFLOW_STATUSES = list(get_args(models.WorkflowStatus))
EXECUTION_STATUSES = list(get_args(models.ExecutionStatus))
FAILURE_STATUSES = list(get_args(models.FailureStatus))
TRANSACTION_TYPES = ["topup", "usage", "subscription"]


class CommandError(Exception):
    """A problem of the command line itself (configuration, files), shown like an API error."""

    def __init__(self, code: str, detail: str, exit_code: int = 1) -> None:
        super().__init__(detail)
        self.code, self.detail, self.exit_code = code, detail, exit_code


# ---- the profile file ----


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/cairn/config.toml``, else ``~/.config/cairn/config.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "cairn" / "config.toml"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SECTION = re.compile(r"\[\s*([A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\")\s*\]\s*(#.*)?")
_PAIR = re.compile(r"([A-Za-z0-9_-]+)\s*=\s*(.*)")


def parse_minimal_toml(text: str) -> dict[str, Any]:
    """The subset of TOML that ``cairn login`` writes, for Python 3.10 without ``tomli``:
    ``[profile]`` (or ``["quoted"]``) tables of ``key = "string"`` (or ``'literal'``) pairs,
    comments and blank lines. Anything else is a ``ValueError``."""
    data: dict[str, Any] = {}
    table: dict[str, Any] | None = None
    decoder = json.JSONDecoder()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        section = _SECTION.fullmatch(line)
        if section:
            name = section.group(1)
            name = json.loads(name) if name.startswith('"') else name
            if name in data:
                raise ValueError(f"line {number}: table [{name}] defined twice")
            table = data[name] = {}
            continue
        pair = _PAIR.fullmatch(line)
        if pair is None or table is None:
            raise ValueError(f'line {number}: expected [profile] or key = "value"')
        key, rest = pair.groups()
        if rest.startswith('"') and not rest.startswith('"""'):
            try:
                value, end = decoder.raw_decode(rest)
            except json.JSONDecodeError:
                raise ValueError(f"line {number}: bad string") from None
        elif rest.startswith("'") and not rest.startswith("'''") and "'" in rest[1:]:
            end = rest.index("'", 1) + 1
            value = rest[1 : end - 1]
        else:
            raise ValueError(f"line {number}: only string values are supported")
        tail = rest[end:].strip()
        if tail and not tail.startswith("#"):
            raise ValueError(f"line {number}: unexpected {tail!r} after the value")
        if key in table:
            raise ValueError(f"line {number}: {key} defined twice")
        table[key] = value
    return data


def toml_loads() -> Callable[[str], dict[str, Any]]:
    """``tomllib.loads`` (3.11+), else ``tomli.loads`` if installed, else the minimal parser."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads
    try:
        tomli = importlib.import_module("tomli")
    except ImportError:
        return parse_minimal_toml
    return cast(Callable[[str], dict[str, Any]], tomli.loads)


def read_profiles(path: Path) -> dict[str, dict[str, str]]:
    """The profiles (top-level tables) of a config file; none when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise CommandError("config", f"cannot read {path}: {e.strerror or e}") from None
    try:
        data = toml_loads()(text)
    except ValueError as e:
        raise CommandError("config", f"{path} is not valid TOML: {e}") from None
    return {
        name: {k: str(v) for k, v in values.items() if not isinstance(v, dict)}
        for name, values in data.items()
        if isinstance(values, dict)
    }


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name)


def toml_dumps(profiles: dict[str, dict[str, str]]) -> str:
    """Profiles as TOML (JSON string escapes are valid TOML basic strings)."""
    return "\n".join(
        f"[{_toml_key(name)}]\n" + "".join(f"{_toml_key(k)} = {json.dumps(v)}\n" for k, v in values.items())
        for name, values in profiles.items()
    )


def write_profiles(path: Path, profiles: dict[str, dict[str, str]]) -> None:
    """Writes the config file atomically (a temporary file renamed over it), mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(toml_dumps(profiles))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- state of one invocation ----


class State:
    """The global options, and the client made from them on first use."""

    def __init__(
        self, ctx: click.Context, api_key: str | None, api_url: str | None, profile: str, as_json: bool
    ) -> None:
        self.ctx = ctx
        self.api_key, self.api_url, self.profile, self.as_json = api_key, api_url, profile, as_json
        self._client: Cairn | None = None

    def settings(self) -> tuple[str | None, str | None]:
        """The key and URL: flags, then the environment, then the profile."""
        key = self.api_key or os.environ.get("CAIRN_API_KEY") or None
        url = self.api_url or os.environ.get("CAIRN_API_URL") or None
        if key is None or url is None:
            saved = read_profiles(config_path()).get(self.profile, {})
            key = key or saved.get("api_key") or None
            url = url or saved.get("api_url") or None
        return key, url

    def client(self) -> Cairn:
        if self._client is None:
            key, url = self.settings()
            if not key:
                raise errors.Unauthorized(
                    f"no API key: run `cairn login` (profile {self.profile!r} in {config_path()}), "
                    "set CAIRN_API_KEY, or pass --api-key"
                )
            self._client = Cairn(key, base_url=url)
            self.ctx.call_on_close(self._client.close)
        return self._client


def state() -> State:
    return click.get_current_context().find_object(State) or _no_state()


def _no_state() -> State:
    raise RuntimeError("cairn commands run under the cairn group")


def _json_flag(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    found = ctx.find_object(State)
    if value and found is not None:
        found.as_json = True


def command(group: click.Group, name: str) -> Callable[[F], click.Command]:
    """A subcommand of ``group`` that also takes ``--json`` after its name."""

    def decorate(fn: F) -> click.Command:
        fn = click.option(
            "--json",
            is_flag=True,
            expose_value=False,
            callback=_json_flag,
            help="Print the API's JSON (same as the global --json).",
        )(fn)
        return group.command(name)(fn)

    return decorate


# ---- output ----


def stdout_console() -> Console:
    # Piped output is not folded to a terminal's width.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 1000)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def api_json(value: models.Model) -> Any:
    """The JSON the API sent, unchanged (``model_dump`` would rewrite its timestamps)."""
    return value.api_json()


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def when(value: Any) -> str:
    """A timestamp for a table: ISO 8601 to the second, UTC as ``Z``."""
    if value is None:
        return ""
    return str(value.isoformat(timespec="seconds")).replace("+00:00", "Z")


def size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def table(columns: list[str], rows: Iterable[list[Any]]) -> None:
    """Rows for people. Cells are plain text (never rich markup); a cell too wide for the
    screen folds, it never loses characters (ids are copied from here)."""
    t = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*[Text("" if v is None else str(v)) for v in row])
    stdout_console().print(t)


def fields(value: models.Model, names: list[str]) -> None:
    """``name  value`` lines of the API's JSON (objects as compact JSON)."""
    data = api_json(value)
    width = max(len(n) for n in names)
    for name in names:
        shown = data.get(name) if isinstance(data, dict) else None
        if isinstance(shown, (dict, list)):
            shown = json.dumps(shown, ensure_ascii=False)
        click.echo(f"{name:<{width}}  {'' if shown is None else shown}".rstrip())


def collect(pager: Pager[M], follow: bool) -> list[M]:
    """The first page, or every page with ``--all``."""
    if not follow:
        page = pager.first_page()
        if len(page.items) < page.total:
            click.echo(f"showing {len(page.items)} of {page.total}; --all for every page", err=True)
        return list(page.items)
    pages = pager.pages()
    first = next(pages)
    found = list(first.items)
    console = stderr_console()
    if len(found) >= first.total or not console.is_terminal:
        for page in pages:
            found.extend(page.items)
        return found
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("reading pages"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("pages", total=first.total, completed=len(found))
        for page in pages:
            found.extend(page.items)
            progress.update(task, total=max(page.total, len(found)), completed=len(found))
    return found


def show_list(pager: Pager[M], follow: bool, columns: list[str], row: Callable[[M], list[Any]]) -> None:
    found = collect(pager, follow)
    if state().as_json:
        emit_json([api_json(x) for x in found])
    elif not found:
        click.echo("nothing to show", err=True)
    else:
        table(columns, (row(x) for x in found))


def show(value: models.Model, names: list[str]) -> None:
    if state().as_json:
        emit_json(api_json(value))
    else:
        fields(value, names)


def json_argument(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=name) from None


# ---- errors ----


def exit_code(error: errors.CairnError) -> int:
    return next((code for cls, code in EXIT_CODES if isinstance(error, cls)), 1)


def report(
    code: str, detail: str, field_errors: Iterable[dict[str, Any]] = (), request_id: str | None = None
) -> None:
    click.echo(f"error: {code}: {detail}", err=True)
    for e in field_errors:
        click.echo(f"  {e.get('field')}: {e.get('message')}", err=True)
    if request_id:
        click.echo(f"request id: {request_id}", err=True)


class CairnGroup(click.Group):
    """The root group: every failure below it becomes an ``error:`` line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.CairnError as e:
            report(e.code, e.detail, e.errors, e.request_id)
            code = exit_code(e)
        except CommandError as e:
            report(e.code, e.detail)
            code = e.exit_code
        except httpx.InvalidURL as e:
            report("invalid_url", str(e))
            code = 1
        except pydantic.ValidationError as e:
            count = e.error_count()
            report(
                "unexpected_response", f"the API's answer does not match the client's models ({count} errors)"
            )
            code = 1
        except json.JSONDecodeError:
            report("unexpected_response", "the API's answer is not JSON")
            code = 1
        except OSError as e:
            if e.errno == errno.EPIPE:
                raise  # click's own: quiet exit when the reader of a pipe goes away
            where = f": {e.filename}" if e.filename else ""
            report("io", f"{e.strerror or e}{where}")
            code = 1
        raise click.exceptions.Exit(code)


# ---- commands ----


@click.group(cls=CairnGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--api-key", metavar="KEY", help="API key (else CAIRN_API_KEY, else the profile).")
@click.option(
    "--api-url", metavar="URL", help="API base URL (else CAIRN_API_URL, else the profile, else local)."
)
@click.option("--profile", default="default", show_default=True, help="Profile of the config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON (lists: an array of items).")
@click.version_option(package_name="cairn-client", prog_name="cairn")
@click.pass_context
def cli(ctx: click.Context, api_key: str | None, api_url: str | None, profile: str, as_json: bool) -> None:
    """Cairn from the command line: workflows, executions, checkpoints, failures, billing.

    Configuration: --api-key/--api-url, else CAIRN_API_KEY/CAIRN_API_URL, else the profile
    in $XDG_CONFIG_HOME/cairn/config.toml (~/.config/cairn/config.toml) that `cairn login`
    writes.
    """
    ctx.obj = State(ctx, api_key, api_url, profile, as_json)


@cli.command()
@click.option("--api-key", "key", metavar="KEY", help="The key (asked for, hidden, when not given).")
@click.option("--api-url", "url", metavar="URL", help="The API base URL to keep with it.")
@click.option("--profile", "profile", help="The profile to write (default: the global --profile).")
def login(key: str | None, url: str | None, profile: str | None) -> None:
    """Checks an API key and keeps it in a profile of the config file (mode 0600)."""
    s = state()
    profile = profile or s.profile
    path = config_path()
    profiles = read_profiles(path)
    saved = profiles.get(profile, {})
    key = (key or s.api_key or click.prompt("API key", hide_input=True, err=True)).strip()
    if not key:
        raise click.UsageError("the API key is empty")
    url = url or s.api_url or os.environ.get("CAIRN_API_URL") or saved.get("api_url") or None
    with Cairn(key, base_url=url) as client:
        balance = client.billing.balance()
    entry = {k: v for k, v in saved.items() if k not in ("api_key", "api_url")}
    entry["api_key"] = key
    if url:
        entry["api_url"] = url
    profiles[profile] = entry
    write_profiles(path, profiles)
    click.echo(f"key accepted ({balance.credits_balance} credits); saved profile {profile!r} in {path}")
    if os.environ.get("CAIRN_API_KEY"):
        click.echo("note: CAIRN_API_KEY is set, and it wins over the profile", err=True)


# ---- workflows ----


@cli.group()
def workflows() -> None:
    """Registered workflows: list, show, create."""


@command(workflows, "list")
@click.option("--status", type=click.Choice(WORKFLOW_STATUSES))
@click.option("--type", "workflow_type", type=click.Choice(WORKFLOW_TYPES))
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def workflows_list(status: Any, workflow_type: Any, follow: bool) -> None:
    """The workflows, newest first."""
    pager = state().client().workflows.list(status=status, workflow_type=workflow_type)
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
    if state().as_json:
        emit_json(api_json(w))
    else:
        click.echo(f"{w.id} created ({w.status}, version {w.version})")


# ---- executions ----


@cli.group()
def executions() -> None:
    """Runs: list, show, start, replay, roll back, pause, cancel."""


@command(executions, "list")
@click.option("--status", type=click.Choice(EXECUTION_STATUSES))
@click.option("--workflow", "workflow_id", metavar="WORKFLOW_ID", help="Only this workflow's executions.")
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def executions_list(status: Any, workflow_id: str | None, follow: bool) -> None:
    """The executions, newest first."""
    pager = state().client().executions.list(status=status, workflow_id=workflow_id)
    show_list(
        pager,
        follow,
        ["id", "workflow_id", "status", "attempt", "checkpoints", "created_at", "error"],
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


CHECKPOINT_COLUMNS = ["sequence", "id", "name", "size", "attempt", "created_at"]


def checkpoint_row(c: models.Checkpoint) -> list[Any]:
    return [c.sequence, c.id, c.name, size(c.state_size_bytes), c.attempt, when(c.created_at)]


EXECUTION_FIELDS = [
    "id",
    "workflow_id",
    "status",
    "attempt",
    "checkpoint_count",
    "current_checkpoint_id",
    "cancel_reason",
    "metadata",
    "created_at",
    "updated_at",
    "ended_at",
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
    if state().as_json:
        emit_json(api_json(e))
    else:
        click.echo(f"{e.id} {what}: {e.status}, attempt {e.attempt}")


@command(executions, "start")
@click.argument("workflow_id")
@click.option("--input", "raw_input", metavar="JSON", help="The execution's input, as JSON.")
def executions_start(workflow_id: str, raw_input: str | None) -> None:
    """Starts an execution of a workflow (it costs a credit)."""
    value = OMIT if raw_input is None else json_argument(raw_input, "--input")
    done(state().client().executions.create(workflow_id=workflow_id, input=value), "started")


@command(executions, "replay")
@click.argument("execution_id")
@click.option("--from", "from_checkpoint", metavar="CHECKPOINT_ID", help="Replay from this checkpoint.")
@click.option("--from-start", is_flag=True, help="Replay from the start.")
def executions_replay(execution_id: str, from_checkpoint: str | None, from_start: bool) -> None:
    """Replays a failed or paused execution, from its current checkpoint unless told
    otherwise (it costs a credit)."""
    if from_checkpoint is not None and from_start:
        raise click.UsageError("--from and --from-start exclude each other")
    checkpoint_id: Any = None if from_start else OMIT if from_checkpoint is None else from_checkpoint
    done(state().client().executions.replay(execution_id, checkpoint_id=checkpoint_id), "replayed")


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


# ---- checkpoints ----


@cli.group()
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


# ---- failures ----


@cli.group()
def failures() -> None:
    """Failures: list, investigate, resolve or ignore."""


@command(failures, "list")
@click.option("--status", type=click.Choice(FAILURE_STATUSES))
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def failures_list(status: Any, follow: bool) -> None:
    """The failures, newest first."""
    pager = state().client().failures.list(status=status)
    show_list(
        pager,
        follow,
        ["id", "execution_id", "error_type", "status", "created_at", "message"],
        lambda f: [f.id, f.execution_id, f.error_type, f.status, when(f.created_at), f.message],
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
    if state().as_json:
        emit_json(api_json(s))
    else:
        click.echo(f"{s.id}: {s.status}")


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


# ---- billing ----


@cli.group()
def billing() -> None:
    """Credits: balance, transactions, top-ups (1 credit = US$0.01)."""


@command(billing, "balance")
def billing_balance() -> None:
    """The credit balance."""
    b = state().client().billing.balance()
    if state().as_json:
        emit_json(api_json(b))
    else:
        click.echo(f"{b.credits_balance} credits (US${b.balance_usd:.2f})")


@command(billing, "transactions")
@click.option("--type", "kind", type=click.Choice(TRANSACTION_TYPES))
@click.option("--all", "follow", is_flag=True, help="Every page, not only the first.")
def billing_transactions(kind: str | None, follow: bool) -> None:
    """The ledger, newest first."""
    pager = state().client().billing.transactions(type=kind)
    show_list(
        pager,
        follow,
        ["id", "type", "amount", "credits_after", "status", "created_at", "description"],
        lambda t: [
            t.id,
            t.type,
            f"{t.amount} {t.currency}",
            t.credits_after,
            t.payment_status,
            when(t.created_at),
            t.description,
        ],
    )


@command(billing, "topup")
@click.argument("amount_cents", type=click.IntRange(100, 1_000_000))
def billing_topup(amount_cents: int) -> None:
    """Starts a top-up of AMOUNT_CENTS (100 to 1000000): a Stripe PaymentIntent to complete
    with its client secret; the credits arrive once it is paid."""
    t = state().client().billing.topup(amount_cents=amount_cents)
    show(t, ["payment_intent_id", "client_secret", "amount_cents", "credits"])


def main() -> None:
    """The ``cairn`` entry point."""
    cli.main(prog_name="cairn")


if __name__ == "__main__":
    main()
