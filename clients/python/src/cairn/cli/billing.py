"""``cairn billing``: balance, transactions, top-ups (1 credit = US$0.01)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from .config import state
from .output import IsoTime, answer, chart, command, show, show_list, when

TRANSACTION_TYPES = ["topup", "usage", "subscription", "refund", "dispute"]


@click.group()
def billing() -> None:
    """Credits: balance, transactions, top-ups (1 credit = US$0.01)."""


@command(billing, "balance")
def billing_balance() -> None:
    """The credit balance."""
    b = state().client().billing.balance()
    answer(b, f"{b.credits_balance} credits (US${b.balance_usd:.2f})")


@command(billing, "usage")
@click.option("--bucket", type=click.Choice(["hour", "day"]), default="day", show_default=True)
@click.option(
    "--after", "created_after", type=IsoTime(), help="The window's start (default: 24 hours or 30 days ago)."
)
@click.option("--before", "created_before", type=IsoTime(), help="The window's end (default: now).")
def billing_usage(bucket: Any, created_after: datetime | None, created_before: datetime | None) -> None:
    """Credits used per UTC hour or day, as a text chart."""
    usage = (
        state()
        .client()
        .billing.usage(bucket=bucket, created_after=created_after, created_before=created_before)
    )
    chart(
        usage, ["credits", "charges"], [(b.start, b.credits, [b.credits, b.charges]) for b in usage.buckets]
    )
    if not state().as_json:
        click.echo(f"{usage.credits} credits in {usage.charges} charges", err=True)


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
