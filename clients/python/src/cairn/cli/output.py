"""Output: tables and fields for people, the API's JSON with ``--json``, lists' pages,
and the ``error:`` lines of failures."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import models
from .._resources import Pager
from .config import State, state

M = TypeVar("M", bound=models.Model)
F = TypeVar("F", bound=Callable[..., Any])


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
    """A list's first page, or every page with ``--all``: see :func:`show_items`."""
    show_items(collect(pager, follow), columns, row)


def show_items(found: list[M], columns: list[str], row: Callable[[M], list[Any]]) -> None:
    """Items as a table of ``columns``, a ``row`` each; with ``--json`` as a JSON array."""
    if state().as_json:
        emit_json([api_json(x) for x in found])
    elif not found:
        click.echo("nothing to show", err=True)
    else:
        table(columns, (row(x) for x in found))


def answer(value: models.Model, text: str) -> None:
    """The API's JSON with ``--json``, else ``text`` for people."""
    if state().as_json:
        emit_json(api_json(value))
    else:
        click.echo(text)


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


def report(
    code: str, detail: str, field_errors: Iterable[dict[str, Any]] = (), request_id: str | None = None
) -> None:
    click.echo(f"error: {code}: {detail}", err=True)
    for e in field_errors:
        click.echo(f"  {e.get('field')}: {e.get('message')}", err=True)
    if request_id:
        click.echo(f"request id: {request_id}", err=True)


if TYPE_CHECKING:
    _TimeParam = click.ParamType[datetime]
else:  # click before 8.2 has no generic ParamType
    _TimeParam = click.ParamType


class IsoTime(_TimeParam):
    """An ISO 8601 time with its offset (``Z`` for UTC)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            self.fail("must be an ISO 8601 time, such as 2027-01-01T00:00:00Z", param, ctx)
        if parsed.tzinfo is None:
            self.fail("needs its offset (Z for UTC)", param, ctx)
        return parsed


#: The bars of :func:`chart`: eighths of a cell.
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: int, most: int, width: int = 30) -> str:
    """``value`` as a bar of at most ``width`` cells, ``most`` filling them all."""
    if most <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value * width * 8 / most))
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def bucket_label(start: datetime, hourly: bool) -> str:
    """A bucket's start as a chart's row label (UTC)."""
    return start.strftime("%Y-%m-%d %H:00" if hourly else "%Y-%m-%d")


def chart(value: models.Model, columns: list[str], rows: list[tuple[datetime, int, list[Any]]]) -> None:
    """A time series: with ``--json`` the API's JSON, else a table with a bar per
    bucket (``rows``: its start, the value its bar shows, then the other columns)."""
    if state().as_json:
        emit_json(api_json(value))
        return
    hourly = getattr(value, "bucket", "day") == "hour"
    most = max((shown for _, shown, _ in rows), default=0)
    table(
        ["hour (UTC)" if hourly else "day (UTC)", "", *columns],
        ([bucket_label(start, hourly), bar(shown, most), *rest] for start, shown, rest in rows),
    )
