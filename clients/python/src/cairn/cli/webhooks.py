"""``cairn webhooks``: the tenant's webhook endpoints: list, create (the secret printed
once), delete, send a test event, and list deliveries."""

from __future__ import annotations

import click

from .. import models
from .config import state
from .output import answer, command, show_items, when


@click.group()
def webhooks() -> None:
    """Webhook endpoints: list, create (the secret shown once), delete, test, deliveries."""


@command(webhooks, "list")
def webhooks_list() -> None:
    """The tenant's webhook endpoints, newest first, never their secrets."""
    found = state().client().webhook_endpoints.list()
    show_items(
        found,
        ["id", "url", "event_types", "enabled", "disabled_reason", "created_at"],
        lambda e: [
            e.id,
            e.url,
            ",".join(e.event_types) or "all",
            "yes" if e.enabled else "no",
            e.disabled_reason or "",
            when(e.created_at),
        ],
    )


@command(webhooks, "create")
@click.option("--url", required=True, help="Where events are posted: https, a public host.")
@click.option(
    "--event-type",
    "event_types",
    multiple=True,
    help="An event type to send (repeat for several; all when left out), e.g. execution.failed.",
)
@click.option("--workflow", "workflow_id", help="Only events of this workflow (wf_...).")
@click.option("--description", help="A note for you.")
def webhooks_create(
    url: str, event_types: tuple[str, ...], workflow_id: str | None, description: str | None
) -> None:
    """Registers an endpoint and prints its signing secret, this once.

    Verify each message with it (any Standard Webhooks library: `standardwebhooks`,
    `svix`). With --json, the API's answer (the secret in `secret`)."""
    e = (
        state()
        .client()
        .webhook_endpoints.create(
            url=url, event_types=list(event_types) or None, workflow_id=workflow_id, description=description
        )
    )
    answer(e, f"{e.id} created ({e.url})\nsecret: {e.secret}")
    click.echo("note: the secret is shown this once and cannot be shown again; store it now", err=True)


@command(webhooks, "delete")
@click.argument("endpoint_id")
def webhooks_delete(endpoint_id: str) -> None:
    """Deletes an endpoint: nothing more is sent to it."""
    state().client().webhook_endpoints.delete(endpoint_id)
    if not state().as_json:
        click.echo(f"{endpoint_id} deleted")


@command(webhooks, "test")
@click.argument("endpoint_id")
def webhooks_test(endpoint_id: str) -> None:
    """Sends a signed webhook.test event to the endpoint (see `cairn webhooks deliveries`)."""
    sent = state().client().webhook_endpoints.test(endpoint_id)
    answer(sent, f"test event {sent.event_id} sent (delivery {sent.delivery_id})")


@command(webhooks, "deliveries")
@click.argument("endpoint_id")
@click.option(
    "--limit", default=20, show_default=True, type=click.IntRange(1, 100), help="How many, newest first."
)
def webhooks_deliveries(endpoint_id: str, limit: int) -> None:
    """The endpoint's deliveries, newest first, with the last attempt of each."""
    page = state().client().webhook_endpoints.deliveries(endpoint_id, limit=limit)

    def last(d: models.WebhookDelivery) -> str:
        if not d.attempts:
            return ""
        a = d.attempts[-1]
        return str(a.status_code) if a.status_code is not None else (a.error or "")

    show_items(
        page.items,
        ["id", "event_type", "status", "attempts", "last", "next_attempt_at"],
        lambda d: [d.id, d.event_type, d.status, str(d.attempt_count), last(d), when(d.next_attempt_at)],
    )
