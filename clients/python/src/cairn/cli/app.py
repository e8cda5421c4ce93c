"""The ``cairn`` command: the root group with its global options, ``cairn login``, one
group per resource (a module each), and how every failure becomes an ``error:`` line
and an exit code (see :mod:`cairn.cli`)."""

from __future__ import annotations

import errno
import json
import os
import sys
from typing import Any

import click
import httpx
import pydantic

from .. import errors
from .._client import Cairn
from . import (
    billing,
    bulk,
    checkpoints,
    executions,
    exports,
    failures,
    keys,
    langgraph,
    mcp,
    settings,
    webhooks,
    workflows,
)
from .config import CommandError, State, config_path, read_profiles, state, write_profiles
from .output import report

#: The exit code of each kind of API error (the first class that matches); any other is 1.
EXIT_CODES: tuple[tuple[type[errors.CairnError], int], ...] = (
    (errors.NotFound, 3),
    (errors.Unauthorized, 4),
    (errors.InsufficientScope, 4),
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
  4  unauthorized (or the key lacks the scope), or no API key configured
  5  invalid state or conflict
  6  invalid input (validation failed, payload too large, malformed request)
  7  insufficient credits
"""


def exit_code(error: errors.CairnError) -> int:
    return next((code for cls, code in EXIT_CODES if isinstance(error, cls)), 1)


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


@click.group(cls=CairnGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--api-key", metavar="KEY", help="API key (else CAIRN_API_KEY, else the profile).")
@click.option(
    "--api-url", metavar="URL", help="API base URL (else CAIRN_API_URL, else the profile, else local)."
)
@click.option("--profile", default="default", show_default=True, help="Profile of the config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON (lists: an array of items).")
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow a plain http:// API URL to another machine (the key travels in clear).",
)
@click.version_option(package_name="cairn-client", prog_name="cairn")
@click.pass_context
def cli(
    ctx: click.Context, api_key: str | None, api_url: str | None, profile: str, as_json: bool, insecure: bool
) -> None:
    """Cairn from the command line: workflows, executions, checkpoints, failures, billing, keys,
    webhooks, settings, export.

    Configuration: --api-key/--api-url, else CAIRN_API_KEY/CAIRN_API_URL, else the profile
    in $XDG_CONFIG_HOME/cairn/config.toml (~/.config/cairn/config.toml) that `cairn login`
    writes.
    """
    if api_key:
        warn_key_on_command_line()
    ctx.obj = State(ctx, api_key, api_url, profile, as_json, insecure)


def warn_key_on_command_line() -> None:
    click.echo(
        "warning: a key on the command line lands in your shell history and the process list; "
        "prefer `cairn login` (it asks, or reads standard input) or CAIRN_API_KEY",
        err=True,
    )


def read_key() -> str:
    """The key from a hidden prompt on a terminal, else the first line of standard input
    (``cairn login < key.txt``, ``printenv KEY | cairn login``)."""
    if sys.stdin.isatty():
        return str(click.prompt("API key", hide_input=True, err=True))
    return sys.stdin.readline()


@cli.command()
@click.option("--api-key", "key", metavar="KEY", help="The key (else asked for, hidden, or read from stdin).")
@click.option("--api-url", "url", metavar="URL", help="The API base URL to keep with it.")
@click.option("--profile", "profile", help="The profile to write (default: the global --profile).")
def login(key: str | None, url: str | None, profile: str | None) -> None:
    """Checks an API key and keeps it in a profile of the config file (mode 0600).

    The key is asked for without echo on a terminal, else read from standard input."""
    s = state()
    if key:
        warn_key_on_command_line()
    profile = profile or s.profile
    path = config_path()
    profiles = read_profiles(path)
    saved = profiles.get(profile, {})
    key = (key or s.api_key or read_key()).strip()
    if not key:
        raise click.UsageError("the API key is empty")
    url = url or s.api_url or os.environ.get("CAIRN_API_URL") or saved.get("api_url") or None
    insecure = s.insecure or saved.get("allow_insecure") == "true"
    with Cairn(key, base_url=url, allow_insecure=insecure) as client:
        balance = client.billing.balance()
    entry = {k: v for k, v in saved.items() if k not in ("api_key", "api_url", "allow_insecure")}
    entry["api_key"] = key
    if url:
        entry["api_url"] = url
    if insecure:
        entry["allow_insecure"] = "true"
    profiles[profile] = entry
    write_profiles(path, profiles)
    click.echo(f"key accepted ({balance.credits_balance} credits); saved profile {profile!r} in {path}")
    if os.environ.get("CAIRN_API_KEY"):
        click.echo("note: CAIRN_API_KEY is set, and it wins over the profile", err=True)


for group in (
    workflows.workflows,
    executions.executions,
    checkpoints.checkpoints,
    failures.failures,
    billing.billing,
    keys.keys,
    webhooks.webhooks,
    settings.settings,
    langgraph.langgraph,
    exports.export,
    mcp.mcp,
):
    cli.add_command(group)

# `cairn executions bulk` is registered on the executions group by its module.
assert bulk.bulk.name == "bulk"


def main() -> None:
    """The ``cairn`` entry point."""
    cli.main(prog_name="cairn")
