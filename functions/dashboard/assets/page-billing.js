// Billing (#/billing): the balance, a top-up (paid by card where Stripe is configured),
// the subscription and the transactions.

import { api, loadConfig, safeHttpUrl } from './api.js';
import { cardForm } from './card.js';
import { PLANS } from './constants.js';
import { h, hashFor, positiveInt, setBusy } from './dom.js';
import { dateFormat, fmtNumber, fmtUsd, signedFormat } from './format.js';
import { clearMessages, confirmDialog, report, showError, showNotice } from './messages.js';
import { navigate, section } from './router.js';
import { badge, code, emptyState, field, labelled, pageHeader, pager, tableWrap, timeEl } from './ui.js';

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

function returnUrl() {
  return `${window.location.origin}${window.location.pathname}#/billing`;
}

export async function pageBilling(ctx) {
  const p = ctx.route.params;
  const page = positiveInt(p.get('page'), 1);
  const pageSize = 20;

  const balance = h('div', { class: 'stats' });
  const subscription = h('div', { testid: 'subscription' });
  const transactions = h('div', { class: 'results' });

  const amountInput = h('input', {
    id: 'topup-amount', name: 'amount', type: 'number', min: '1', max: '10000', step: '0.01', inputmode: 'decimal',
    required: true, testid: 'topup-amount', placeholder: '25.00', 'aria-describedby': 'topup-amount-hint',
  });
  const topupButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'topup-submit' }, 'Top up');
  const topupResult = h('div', { class: 'topup-result', testid: 'topup-result', hidden: true, role: 'status' });
  const topupForm = h('form', { class: 'form inline-form', novalidate: true },
    labelled('topup-amount', 'Amount (US$)', amountInput, 'From $1.00 to $10,000.00; 1 credit = $0.01.'),
    h('div', { class: 'actions' }, topupButton));
  topupForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const dollars = Number(amountInput.value);
    const cents = Math.round(dollars * 100);
    if (!amountInput.value || !Number.isFinite(dollars) || cents < 100 || cents > 1000000) {
      showError(new Error('Enter an amount from $1.00 to $10,000.00.'));
      amountInput.focus();
      return;
    }
    const done = setBusy(topupButton, 'Creating the payment…');
    try {
      const [result, config] = await Promise.all([api('POST', '/billing/topup', { body: { amount_cents: cents } }), loadConfig()]);
      const amount = fmtUsd((result.amount_cents ?? cents) / 100);
      const lines = [
        h('p', {}, h('strong', {}, `A payment of ${amount} was created`), ` (${fmtNumber(result.credits ?? cents)} credits), Stripe payment `, code(String(result.payment_intent_id ?? '')), '.'),
      ];
      topupResult.replaceChildren(...lines);
      topupResult.hidden = false;
      amountInput.value = '';
      if (config.stripe_publishable_key && config.stripe_js_url && result.client_secret) {
        const before = Number((await api('GET', '/billing/balance')).credits_balance);
        const form = await cardForm(config, result.client_secret, amount, () => awaitCredits(before));
        topupResult.append(form);
        form.querySelector('input')?.focus();
      } else {
        topupResult.append(h('p', {}, 'Card entry needs Stripe.js with a Stripe publishable key configured for this dashboard, and none is configured, so the card cannot be entered here. The credits arrive once Stripe reports the payment as paid.'));
      }
    } catch (error) {
      report(error);
    } finally {
      if (topupButton.isConnected) done();
    }
  });

  /** After a payment: Stripe's webhook adds the credits within seconds; show them. */
  const awaitCredits = async (before) => {
    for (let i = 0; i < 20 && !ctx.stale(); i += 1) {
      await sleep(500);
      const b = await api('GET', '/billing/balance').catch(() => null);
      if (b && Number(b.credits_balance) > before) break;
    }
    if (!ctx.stale()) await Promise.all([loadBalance(), loadTransactions()]);
  };

  ctx.mount(
    pageHeader('Billing'),
    balance,
    h('div', { class: 'two-col' },
      h('section', { class: 'panel', 'aria-labelledby': 'topup-title' },
        h('h2', { id: 'topup-title' }, 'Top up credits'),
        h('p', { class: 'hint' }, 'Every execution start and every replay costs 1 credit.'),
        topupForm, topupResult),
      h('section', { class: 'panel', 'aria-labelledby': 'sub-title' }, h('h2', { id: 'sub-title' }, 'Subscription'), subscription)),
    h('section', { class: 'panel', 'aria-labelledby': 'tx-title' }, h('h2', { id: 'tx-title' }, 'Transactions'), transactions),
  );

  const loadBalance = () => section(balance, ctx, async () => {
    const b = await api('GET', '/billing/balance');
    return [
      h('div', { class: 'stat stat-wide' },
        h('p', { class: 'stat-label' }, 'Balance'),
        h('p', { class: 'stat-value' }, h('span', { testid: 'balance' }, fmtNumber(b.credits_balance)), ' credits'),
        h('p', { class: 'stat-note', testid: 'balance-usd' }, fmtUsd(b.balance_usd))),
    ];
  });

  /** Goes to the Stripe page (what: checkout, portal) whose address open() answers. */
  const goToStripe = async (button, busyText, what, open) => {
    const done = setBusy(button, busyText);
    try {
      const url = safeHttpUrl(await open());
      if (!url) throw new Error(`The ${what} address the API answered is not an http(s) URL.`);
      window.location.assign(url);
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  };

  const checkout = (planId, button) => goToStripe(button, 'Opening checkout…', 'checkout', async () => {
    const result = await api('POST', '/billing/subscriptions/create-checkout', { body: { plan_id: planId, return_url: returnUrl() } });
    return result.checkout_url;
  });

  const planButtons = () => h('div', { class: 'plans' }, PLANS.map(([id, label, credits]) => {
    const b = h('button', { type: 'button', class: 'button plan', testid: `plan-${id}` },
      h('span', { class: 'plan-name' }, label), h('span', { class: 'plan-credits' }, `${fmtNumber(credits)} credits a month`));
    b.addEventListener('click', () => checkout(id, b));
    return b;
  }));

  const loadSubscription = () => section(subscription, ctx, async () => {
    let sub;
    try {
      sub = await api('GET', '/billing/subscriptions/status');
    } catch (error) {
      if (error.status !== 404) throw error;
      return [
        emptyState('No subscription.', h('p', {}, 'A plan adds credits every month. Choose one to continue at Stripe’s checkout page:')),
        planButtons(),
      ];
    }
    const portalButton = h('button', { type: 'button', class: 'button', testid: 'subscription-portal' }, 'Manage in the billing portal');
    portalButton.addEventListener('click', () => goToStripe(portalButton, 'Opening…', 'portal', async () => {
      const result = await api('POST', '/billing/subscriptions/portal', { body: { return_url: returnUrl() } });
      return result.portal_url;
    }));
    const cancel = async (immediately, button) => {
      const ok = await confirmDialog(immediately
        ? { title: 'Cancel the subscription now?', message: ['The subscription ends at once; no more monthly credits.', 'Credits you have stay.'], ok: 'Cancel now', danger: true }
        : { title: 'Cancel at the end of the period?', message: [`The subscription stays active until ${sub.current_period_end ? dateFormat.format(new Date(sub.current_period_end)) : 'the end of the current period'}, then ends.`], ok: 'Cancel at period end', danger: true });
      if (!ok) return;
      const done = setBusy(button, 'Cancelling…');
      try {
        const result = await api('POST', '/billing/subscriptions/cancel', { query: { immediately: immediately ? 'true' : 'false' } });
        showNotice(result?.message || 'Subscription cancelled.');
        loadSubscription();
      } catch (error) {
        if (button.isConnected) done();
        report(error);
      }
    };
    const cancelled = sub.status === 'cancelled';
    const cancelEnd = h('button', { type: 'button', class: 'button button-danger-quiet', testid: 'subscription-cancel' }, 'Cancel at period end');
    const cancelNow = h('button', { type: 'button', class: 'button button-danger-quiet', testid: 'subscription-cancel-now' }, 'Cancel now');
    cancelEnd.addEventListener('click', () => cancel(false, cancelEnd));
    cancelNow.addEventListener('click', () => cancel(true, cancelNow));
    const planLabel = new Map(PLANS.map(([id, label]) => [id, label]));
    return [
      h('dl', { class: 'fields' },
        field('Plan', planLabel.get(sub.plan_id) ?? String(sub.plan_id)),
        field('Status', badge(sub.status, null, 'subscription-status')),
        field('Current period', timeEl(sub.current_period_start, { dateOnly: true }), ' – ', timeEl(sub.current_period_end, { dateOnly: true })),
        field('Renews', cancelled ? 'no (cancelled)' : sub.cancel_at_period_end ? 'no: ends with this period' : 'yes')),
      h('div', { class: 'actions' },
        portalButton,
        !cancelled && !sub.cancel_at_period_end ? cancelEnd : null,
        !cancelled ? cancelNow : null),
      cancelled ? [h('p', {}, 'This subscription is cancelled. Start a new one:'), planButtons()] : null,
    ];
  });

  const loadTransactions = () => section(transactions, ctx, async () => {
    const data = await api('GET', '/billing/transactions', { query: { page, page_size: pageSize } });
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) {
      return emptyState(page > 1 ? 'This page is past the last transaction.' : 'No transactions yet.',
        h('p', {}, 'Top-ups, subscription credits and the 1-credit charge of each execution start or replay appear here.'));
    }
    const rows = items.map((t) => h('tr', { testid: 'transaction-row', 'data-id': t.id },
      h('td', {}, timeEl(t.created_at)),
      h('td', {}, badge(t.type)),
      h('td', {}, t.description ?? ''),
      h('td', { class: ['num', t.amount < 0 ? 'negative' : 'positive'] }, typeof t.amount === 'number' ? signedFormat.format(t.amount) : '—'),
      h('td', { class: 'num' }, fmtNumber(t.credits_after)),
      h('td', {}, t.payment_status ?? h('span', { class: 'muted' }, '—'))));
    const table = h('table', { class: 'table', testid: 'transactions-table' },
      h('caption', { class: 'visually-hidden' }, 'Transactions, newest first'),
      h('thead', {}, h('tr', {}, ['Date', 'Type', 'Description', 'Credits', 'Balance after', 'Payment'].map((t, i) =>
        h('th', { scope: 'col', class: i === 3 || i === 4 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Transactions table'), pager({
      page, pageSize, total: data.total ?? items.length, noun: 'transactions',
      onPage: (n) => navigate(hashFor('/billing', { page: n === 1 ? '' : n })),
    })];
  });

  await Promise.all([loadBalance(), loadSubscription(), loadTransactions()]);
}
