"""``cairn keys``: the tenant's API keys: list, create (the secret printed once), revoke."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from .config import CommandError, state
from .output import IsoTime, answer, command, show_items, when


@click.group()
def keys() -> None:
    """API keys: list, create (the secret shown once), revoke."""


@command(keys, "list")
def keys_list() -> None:
    """The tenant's API keys, newest first, revoked ones too.

    Each with its prefix (its first 10 characters), never its secret."""
    found = state().client().keys.list()
    show_items(
        found,
        ["id", "name", "prefix", "scopes", "created_at", "expires_at", "revoked_at"],
        lambda k: [
            k.id,
            k.name,
            k.prefix,
            " ".join(k.scopes),
            when(k.created_at),
            when(k.expires_at),
            when(k.revoked_at),
        ],
    )


@command(keys, "create")
@click.option("--name", required=True, help="What the key is for (1 to 100 characters).")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    metavar="SCOPE",
    help="What it may do, repeatable: executions:read, checkpoints:write, ... or * "
    "(default: the scopes of the key you use).",
)
@click.option(
    "--expires-at",
    type=IsoTime(),
    help="When it stops working: an ISO 8601 time with its offset, such as 2027-01-01T00:00:00Z.",
)
def keys_create(name: str, scopes: tuple[str, ...], expires_at: datetime | None) -> None:
    """Creates an API key and prints its secret, this once.

    Cairn keeps only the secret's hash: store it now. With --json, the API's answer (the
    secret in `key`)."""
    options: dict[str, Any] = {"scopes": list(scopes)} if scopes else {}
    k = state().client().keys.create(name=name, expires_at=expires_at, **options)
    secret = "" if k.key is None else f"\nsecret: {k.key}"
    answer(k, f"{k.id} created ({k.name}, prefix {k.prefix}){secret}")
    if k.key is None:
        raise CommandError(
            "no_secret",
            f"{k.id} was made by an earlier try of this request, whose answer held its secret: "
            f"revoke it (cairn keys revoke {k.id}) and create another",
        )
    click.echo("note: the secret is shown this once and cannot be shown again; store it now", err=True)


@command(keys, "revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revokes an API key: from then on it authenticates nothing.

    Revoking a revoked key changes nothing; the tenant's last live key cannot be revoked
    (create another first). With --json, nothing is printed (the API answers no body)."""
    state().client().keys.revoke(key_id)
    if not state().as_json:
        click.echo(f"{key_id} revoked")
