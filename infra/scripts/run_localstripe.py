"""Starts localstripe (PyPI, a stateful fake of Stripe's API that signs and sends
webhooks) for the local stack and the tests: bound to 127.0.0.1 only (it binds every
interface by default) and with its state in a file of ours instead of
/tmp/localstripe.pickle.

localstripe lacks Checkout Sessions, Billing Portal sessions, disputes, the
`customer.subscription.updated`, `invoice.paid` and `charge.refunded` events, its Stripe.js stand-in
cannot pay with a card typed into its card Element, and it sends each webhook once
where Stripe retries a delivery that failed. The TEST-ONLY ADDITIONS below add minimal
versions of them. They exist only here, in the local stand-in; Cairn's
functions call Stripe's real API paths and never these helpers.

Usage: python3 run_localstripe.py PORT STATE_FILE (named so as not to shadow the package)
Prices: one plan per STRIPE_PRICE_DEVELOPER|PRO|ENTERPRISE found in the environment.
"""

import asyncio
import builtins
import hashlib
import hmac
import html
import json
import logging
import os
import socket
import sys
import time

import aiohttp
from aiohttp import web

import localstripe.resources as resources
from localstripe import server
from localstripe.errors import UserError
from localstripe.resources import (Charge, Customer, Event, Invoice, PaymentIntent, PaymentMethod,
                                   Plan, Refund, Subscription, random_id, store)
import localstripe.webhooks as webhooks
from localstripe.webhooks import schedule_webhook

DEFAULT_STATE = "/tmp/localstripe.pickle"


# ---------------------------------------------------------------------------------------
# TEST-ONLY ADDITIONS (not Stripe's API surface beyond the Checkout Session (create, retrieve,
# expire) and Billing Portal session endpoints).
# ---------------------------------------------------------------------------------------

# Monthly price in cents of each plan's test price (1 credit = 1 cent).
PLAN_AMOUNTS = {"DEVELOPER": 1_000, "PRO": 10_000, "ENTERPRISE": 100_000}

# Sessions live in memory: a restart forgets open checkouts, which a fake may.
SESSIONS = {}


class Exported:
    """Anything localstripe's Event can carry: a plain dict."""

    def __init__(self, data):
        self.data = data

    def _export(self, expand=None):
        return dict(self.data)


# Stripe retries a webhook delivery answered with anything but a 2xx, or not answered
# (with backoff, for days in live mode); localstripe sends each once. The local stack's
# gateway (cargo lambda watch) now and then answers with a 500 of its own before any
# function runs (docs/testing.md, "The emulator's quirks"), which lost a top-up's credits for good.
# Here a failed delivery is sent again after 1, 2, 4 and 8 s, each attempt signed at
# its own time as Stripe signs it; Cairn's webhook applies an event once however often
# it arrives.
WEBHOOK_RETRY_DELAYS = (1, 2, 4, 8)


async def _deliver(webhook, event_type, payload):
    logger = logging.getLogger("aiohttp.access")
    for attempt, delay in enumerate((0, *WEBHOOK_RETRY_DELAYS), start=1):
        await asyncio.sleep(delay)
        signed_at = int(time.time())
        signature = hmac.new(webhook.secret.encode("utf-8"), b"%d.%s" % (signed_at, payload), hashlib.sha256)
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Stripe-Signature": f"t={signed_at},v1={signature.hexdigest()}",
        }
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(webhook.url, data=payload, headers=headers) as answer:
                    if 200 <= answer.status < 300:
                        logger.info('webhook "%s" delivered (attempt %d)', event_type, attempt)
                        return
                    logger.info('webhook "%s" answered %d (attempt %d)', event_type, answer.status, attempt)
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            logger.info('webhook "%s" failed (attempt %d): %s', event_type, attempt, error)
    logger.warning('webhook "%s" given up after %d attempts', event_type, len(WEBHOOK_RETRY_DELAYS) + 1)


async def _send_webhook(event):
    """localstripe's own sender (the event's JSON, 1 s later, to every webhook that takes
    its type), with Stripe's retries."""
    payload = json.dumps(event._export(), indent=2, sort_keys=True).encode("utf-8")
    await asyncio.sleep(1)
    await asyncio.gather(
        *(
            _deliver(webhook, event.type, payload)
            for webhook in list(webhooks._webhooks.values())
            if webhook.events is None or event.type in webhook.events
        )
    )


# schedule_webhook (every localstripe module's) looks this name up when it runs.
webhooks._send_webhook = _send_webhook


def base_url(request):
    return f"http://{request.host}"


def create_plans():
    for name, amount in PLAN_AMOUNTS.items():
        price = os.environ.get(f"STRIPE_PRICE_{name}")
        if price and store.get(f"plan:{price}") is None:
            Plan(id=price, amount=amount, currency="usd", interval="month",
                 product={"name": f"Cairn {name.capitalize()}"})


async def create_checkout_session(request):
    """POST /v1/checkout/sessions (mode=subscription, one line item)."""
    data = await server.get_post_data(request) or {}
    items = data.get("line_items") or []
    if data.get("mode") != "subscription" or len(items) != 1:
        raise UserError(400, "only subscription checkouts with one line item are faked")
    Customer._api_retrieve(data.get("customer", ""))
    Plan._api_retrieve(items[0].get("price", ""))
    session_id = "cs_test_" + random_id(24)
    session = {
        "id": session_id, "object": "checkout.session", "mode": "subscription",
        "customer": data["customer"], "client_reference_id": data.get("client_reference_id"),
        "metadata": data.get("metadata") or {}, "price": items[0]["price"],
        "subscription_metadata": (data.get("subscription_data") or {}).get("metadata") or {},
        "success_url": data.get("success_url"), "cancel_url": data.get("cancel_url"),
        "status": "open", "payment_status": "unpaid", "subscription": None,
        "url": f"{base_url(request)}/_config/cairn_test/checkout/{session_id}",
    }
    SESSIONS[session_id] = session
    return server.json_response(session)


async def retrieve_checkout_session(request):
    """GET /v1/checkout/sessions/{id}."""
    session = SESSIONS.get(request.match_info["id"])
    if session is None:
        raise UserError(404, "No such checkout session")
    return server.json_response(session)


async def expire_checkout_session(request):
    """POST /v1/checkout/sessions/{id}/expire: only an open session can be expired."""
    session = SESSIONS.get(request.match_info["id"])
    if session is None:
        raise UserError(404, "No such checkout session")
    if session["status"] != "open":
        raise UserError(400, "Only Checkout Sessions with a status of open can be expired")
    session.update(status="expired", url=None)
    return server.json_response(session)


async def checkout_page(request):
    """GET: the hosted checkout page (a button that completes the checkout)."""
    session = SESSIONS.get(request.match_info["id"])
    if session is None:
        raise UserError(404, "No such checkout session")
    action = f"/_config/cairn_test/checkout/{session['id']}/complete"
    body = (f"<!doctype html><title>Test checkout</title><h1>Test checkout (localstripe)</h1>"
            f"<p>Subscribe to {html.escape(session['price'])} with the test card 4242.</p>"
            f"<form method=post action='{action}'><input type=hidden name=redirect value=1>"
            f"<button>Pay and subscribe</button></form>")
    return web.Response(text=body, content_type="text/html")


async def complete_checkout(request):
    """POST: pays the checkout as a customer would: saves the card (payment_method,
    default pm_card_visa), creates the subscription (its invoice is charged), then sends
    the signed checkout.session.completed and invoice.paid events."""
    session = SESSIONS.get(request.match_info["id"])
    if session is None:
        raise UserError(404, "No such checkout session")
    if session["status"] != "open":
        raise UserError(409, "The checkout session is already complete")
    data = await server.get_post_data(request) or {}
    card = PaymentMethod._api_retrieve(data.get("payment_method") or "pm_card_visa")
    PaymentMethod._api_attach(card.id, customer=session["customer"])
    Customer._api_update(session["customer"], invoice_settings={"default_payment_method": card.id})
    subscription = Subscription._api_create(
        customer=session["customer"], items=[{"plan": session["price"]}],
        metadata=dict(session["subscription_metadata"]))
    session.update(status="complete", payment_status="paid", subscription=subscription.id)
    public = {k: v for k, v in session.items() if k not in ("price", "subscription_metadata")}
    schedule_webhook(Event("checkout.session.completed", Exported(public)))
    for invoice in Invoice._api_list_all(None, customer=session["customer"],
                                         subscription=subscription.id, limit=99)._list:
        if invoice.status == "paid":
            schedule_webhook(Event("invoice.paid", invoice))
    if data.get("redirect"):
        raise web.HTTPSeeOther(session["success_url"])
    return server.json_response(public)


async def create_portal_session(request):
    """POST /v1/billing_portal/sessions"""
    data = await server.get_post_data(request) or {}
    customer = Customer._api_retrieve(data.get("customer", ""))
    session_id = "bps_" + random_id(24)
    session = {"id": session_id, "object": "billing_portal.session", "customer": customer.id,
               "return_url": data.get("return_url"),
               "url": f"{base_url(request)}/_config/cairn_test/portal/{session_id}"}
    SESSIONS[session_id] = session
    return server.json_response(session)


async def portal_page(request):
    session = SESSIONS.get(request.match_info["id"])
    if session is None:
        raise UserError(404, "No such portal session")
    subscriptions = Subscription._api_list_all(None, customer=session["customer"], limit=99)._list
    rows = "".join(f"<li>{html.escape(s.id)}: {html.escape(s.status)}</li>" for s in subscriptions)
    body = (f"<!doctype html><title>Test portal</title><h1>Billing portal (localstripe)</h1>"
            f"<ul>{rows}</ul><a href='{html.escape(session['return_url'] or '/')}'>Back</a>")
    return web.Response(text=body, content_type="text/html")


def send_subscription_updated():
    """localstripe updates subscriptions without telling anyone; Stripe sends
    customer.subscription.updated."""
    update = Subscription._api_update.__func__

    def _api_update(cls, id, **data):
        subscription = update(cls, id, **data)
        schedule_webhook(Event("customer.subscription.updated", subscription))
        return subscription

    Subscription._api_update = classmethod(_api_update)


def send_charge_refunded():
    """localstripe refunds without telling anyone; Stripe sends charge.refunded (the
    charge, with its amount_refunded so far)."""
    create = Refund._api_create.__func__

    def _api_create(cls, **data):
        refund = create(cls, **data)
        schedule_webhook(Event("charge.refunded", Charge._api_retrieve(refund.charge)))
        return refund

    Refund._api_create = classmethod(_api_create)


# Disputes live in memory, as sessions do.
DISPUTES = {}


async def open_dispute(request):
    """POST /_config/cairn_test/charges/{id}/dispute (amount, default the charge's): what
    a cardholder's bank does; Stripe sends charge.dispute.created."""
    charge = Charge._api_retrieve(request.match_info["id"])
    data = await server.get_post_data(request) or {}
    dispute = {
        "id": "dp_" + random_id(24), "object": "dispute", "charge": charge.id,
        "payment_intent": charge.payment_intent, "amount": int(data.get("amount") or charge.amount),
        "currency": charge.currency, "status": "needs_response", "created": int(time.time()),
    }
    DISPUTES[dispute["id"]] = dispute
    schedule_webhook(Event("charge.dispute.created", Exported(dispute)))
    return server.json_response(dispute)


async def close_dispute(request):
    """POST /_config/cairn_test/disputes/{id}/close (status: won or lost): the bank's
    decision; Stripe sends charge.dispute.closed."""
    dispute = DISPUTES.get(request.match_info["id"])
    if dispute is None:
        raise UserError(404, "No such dispute")
    data = await server.get_post_data(request) or {}
    if data.get("status") not in ("won", "lost"):
        raise UserError(400, "status must be won or lost")
    dispute["status"] = data["status"]
    schedule_webhook(Event("charge.dispute.closed", Exported(dict(dispute))))
    return server.json_response(dispute)


# localstripe's stand-in for Stripe.js confirms a card payment only for a payment intent
# already waiting for 3-D Secure (`requires_action`); Stripe.js itself sends the card from
# its card Element and confirms. This override does the same through confirm_card below,
# then falls back to localstripe's 3-D Secure dialog when the card asks for it. Served
# after localstripe's own script, at /_config/cairn_test/js/v3/ (the local stack's
# STRIPE_JS_URL).
STRIPE_JS_OVERRIDE = r"""
// TEST-ONLY ADDITION (Cairn, infra/scripts/run_localstripe.py): confirmCardPayment with
// a card Element sends the card and confirms, as Stripe.js does.
(() => {
  const localStripe = Stripe;
  Stripe = (apiKey) => {
    const stripe = localStripe(apiKey);
    const authenticate = stripe.confirmCardPayment;
    stripe.confirmCardPayment = async (clientSecret, data) => {
      const element = data && data.payment_method && data.payment_method.card;
      const card = element && element.value && element.value.card;
      if (!card || !card.number) {
        return {error: {type: 'validation_error', message: 'Your card number is incomplete.'}};
      }
      const pi = clientSecret.match(/^(pi_\w+)_secret_/)[1];
      const response = await fetch(
        `${LOCALSTRIPE_BASE_API}/_config/cairn_test/payment_intents/${pi}/confirm_card`,
        {method: 'POST', body: JSON.stringify({client_secret: clientSecret, card})});
      const body = await response.json().catch(() => ({}));
      if (response.status !== 200 || body.error) {
        return {error: (body.error && body.error.message) ? body.error : {message: 'Your card was declined.'}};
      }
      if (body.status === 'requires_action') return authenticate(clientSecret, data);
      if (body.status !== 'succeeded') {
        return {error: body.last_payment_error || {message: `The payment is ${body.status}.`}};
      }
      return {paymentIntent: body};
    };
    return stripe;
  };
})();
"""


async def stripe_js(request):
    """GET /_config/cairn_test/js/v3/: localstripe's Stripe.js stand-in plus the override."""
    path = os.path.join(os.path.dirname(os.path.realpath(server.__file__)), "localstripe-v3.js")
    with open(path) as f:
        script = f.read()
    return web.Response(text=script + STRIPE_JS_OVERRIDE, content_type="application/javascript")


async def confirm_card(request):
    """POST /_config/cairn_test/payment_intents/{id}/confirm_card {client_secret, card}:
    what Stripe.js does for confirmCardPayment with a card Element: makes a card payment
    method of the card typed (localstripe's test numbers: 4242... pays, 4000000000000341
    is declined, 4000002500003155 asks for 3-D Secure) and confirms the intent; the
    signed payment_intent.succeeded webhook follows as for any payment."""
    intent = PaymentIntent._api_retrieve(request.match_info["id"])
    data = await request.json()
    if not isinstance(data, dict) or data.get("client_secret") != intent.client_secret:
        raise UserError(401, "Unauthorized")
    card = data.get("card")
    if not isinstance(card, dict):
        raise UserError(400, "Bad request")
    if intent.status not in ("requires_payment_method", "requires_confirmation"):
        raise UserError(400, f"This PaymentIntent's status is {intent.status}")
    method = PaymentMethod(type="card", card={k: card.get(k) for k in ("number", "exp_month", "exp_year", "cvc")})
    intent.payment_method = method.id
    if intent.latest_charge is not None and intent.latest_charge.status == "failed":
        # A new attempt after a declined card: Stripe makes a new charge; localstripe's
        # status would otherwise stay requires_payment_method.
        intent.latest_charge = None
    intent._confirm(on_failure_now=intent._report_failure)
    return server.json_response(intent._export())


def add_test_only_routes(app):
    app.router.add_get("/_config/cairn_test/js/v3/", stripe_js)
    app.router.add_post("/_config/cairn_test/payment_intents/{id}/confirm_card", confirm_card)
    app.router.add_post("/v1/checkout/sessions", create_checkout_session)
    app.router.add_get("/v1/checkout/sessions/{id}", retrieve_checkout_session)
    app.router.add_post("/v1/checkout/sessions/{id}/expire", expire_checkout_session)
    app.router.add_post("/v1/billing_portal/sessions", create_portal_session)
    app.router.add_get("/_config/cairn_test/checkout/{id}", checkout_page)
    app.router.add_post("/_config/cairn_test/checkout/{id}/complete", complete_checkout)
    app.router.add_get("/_config/cairn_test/portal/{id}", portal_page)
    app.router.add_post("/_config/cairn_test/charges/{id}/dispute", open_dispute)
    app.router.add_post("/_config/cairn_test/disputes/{id}/close", close_dispute)
    send_subscription_updated()
    send_charge_refunded()

# ---------------------------------------------------------------------------------------


def main() -> None:
    port, state = int(sys.argv[1]), sys.argv[2]

    def redirected_open(path, *args, **kwargs):
        return builtins.open(state if path == DEFAULT_STATE else path, *args, **kwargs)

    # localstripe opens its state file by that literal path; point it at ours.
    resources.open = redirected_open
    resources.store.try_load_from_disk()
    add_test_only_routes(server.app)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    logging.basicConfig(level=logging.INFO)

    async def on_startup(app):
        create_plans()  # Plan() schedules a webhook, so it needs the running loop.
        store.dump_to_disk()

    server.app.on_startup.append(on_startup)
    web.run_app(server.app, sock=sock, print=None)


if __name__ == "__main__":
    main()
