// Webhooks (#/webhooks): the tenant's endpoints, a new endpoint's signing secret shown
// once, test events, enabling, deleting; and #/webhooks/<id>: one endpoint's recent
// deliveries with their attempts, and a Retry button.

import { api } from './api.js';
import { WEBHOOK_EVENT_TYPES } from './constants.js';
import { enc, h, link, setBusy } from './dom.js';
import { clearMessages, confirmDialog, report, required, secretBox, showNotice } from './messages.js';
import { section } from './router.js';
import { backLink, badge, code, emptyState, labelled, pageHeader, tableWrap, timeEl } from './ui.js';

function enabledBadge(endpoint) {
  return endpoint.enabled ? badge('live', 'enabled', 'webhook-status') : badge('failed', 'disabled', 'webhook-status');
}

export async function pageWebhooks(ctx) {
  const urlInput = h('input', { id: 'webhook-url', name: 'url', type: 'url', required: true, maxlength: '2048', testid: 'webhook-create-url', autocomplete: 'off', placeholder: 'https://orchestrator.example.com/hooks/cairn' });
  const boxes = WEBHOOK_EVENT_TYPES.map((type) => h('label', { class: 'check' },
    h('input', { type: 'checkbox', name: 'event_types', value: type, testid: 'webhook-create-type' }), ' ', code(type)));
  const createButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'webhook-create-submit' }, 'Add endpoint');
  const secretSlot = h('div', { class: 'secret-slot' });
  const form = h('form', { class: 'form', novalidate: true },
    labelled('webhook-url', 'URL', urlInput, 'https, on a public host. Each message is signed (Standard Webhooks).'),
    h('fieldset', { class: 'checks' }, h('legend', {}, 'Events (none ticked: every event but checkpoint.created)'), boxes),
    h('div', { class: 'actions' }, createButton));
  const list = h('div', { class: 'results' });

  const loadList = () => section(list, ctx, async () => {
    const data = await api('GET', '/webhook-endpoints');
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) {
      return emptyState('No webhook endpoints.', h('p', {}, 'Add one with the form above to be told of failures without polling.'));
    }
    const rows = items.map((e) => {
      const test = h('button', { type: 'button', class: 'button button-small', testid: 'webhook-test' }, 'Send test');
      test.addEventListener('click', async () => {
        const done = setBusy(test, 'Sending…');
        try {
          const sent = await api('POST', `/webhook-endpoints/${enc(e.id)}/test`, { body: {} });
          showNotice(`Test event ${sent.event_id} sent; see its delivery under Deliveries.`);
        } catch (error) {
          report(error);
        } finally {
          if (test.isConnected) done();
        }
      });
      const toggle = h('button', { type: 'button', class: 'button button-small', testid: 'webhook-toggle' }, e.enabled ? 'Disable' : 'Enable');
      toggle.addEventListener('click', async () => {
        const done = setBusy(toggle, e.enabled ? 'Disabling…' : 'Enabling…');
        try {
          await api('PATCH', `/webhook-endpoints/${enc(e.id)}`, { body: { enabled: !e.enabled } });
          showNotice(`Endpoint ${e.enabled ? 'disabled' : 'enabled'}.`);
          loadList();
        } catch (error) {
          if (toggle.isConnected) done();
          report(error);
        }
      });
      const remove = h('button', { type: 'button', class: 'button button-small button-danger-quiet', testid: 'webhook-delete' }, 'Delete');
      remove.addEventListener('click', async () => {
        const ok = await confirmDialog({
          title: 'Delete this endpoint?',
          message: [`Nothing more is sent to ${e.url}. Its deliveries stay listed for 30 days only through the API.`],
          ok: 'Delete',
          danger: true,
        });
        if (!ok) return;
        const done = setBusy(remove, 'Deleting…');
        try {
          await api('DELETE', `/webhook-endpoints/${enc(e.id)}`);
          showNotice('Endpoint deleted.');
          loadList();
        } catch (error) {
          if (remove.isConnected) done();
          report(error);
        }
      });
      return h('tr', { testid: 'webhook-row', 'data-id': e.id, 'data-enabled': e.enabled ? 'true' : 'false' },
        h('td', {}, link(`/webhooks/${enc(e.id)}`, e.url, { testid: 'webhook-link' })),
        h('td', {}, e.event_types.length ? e.event_types.map((t) => [code(t), ' ']) : h('span', { class: 'muted' }, 'every event but checkpoint.created')),
        h('td', {}, enabledBadge(e), e.disabled_reason ? h('p', { class: 'hint', testid: 'webhook-disabled-reason' }, e.disabled_reason) : null),
        h('td', {}, timeEl(e.created_at)),
        h('td', { class: 'row-actions' }, test, ' ', toggle, ' ', remove));
    });
    const table = h('table', { class: 'table', testid: 'webhooks-table' },
      h('caption', { class: 'visually-hidden' }, 'Webhook endpoints, newest first'),
      h('thead', {}, h('tr', {}, ['URL', 'Events', 'Status', 'Created', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Webhook endpoints table'), h('p', { class: 'hint' }, `${items.length} of 16 endpoints.`)];
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const url = required(urlInput, 'Give the URL events are posted to.');
    if (!url) return;
    const eventTypes = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
    const done = setBusy(createButton, 'Adding…');
    try {
      const made = await api('POST', '/webhook-endpoints', { body: { url, event_types: eventTypes } });
      urlInput.value = '';
      for (const b of boxes) b.querySelector('input').checked = false;
      if (typeof made.secret === 'string' && made.secret) {
        secretSlot.replaceChildren(secretBox({
          title: `The signing secret of ${made.url}`,
          secret: made.secret,
          ownerId: made.id,
          testid: 'webhook',
          note: 'Verify every message with it (any Standard Webhooks library).',
          onDismiss: () => {
            secretSlot.replaceChildren();
            urlInput.focus();
          },
        }));
      }
      loadList();
    } catch (error) {
      report(error);
    } finally {
      if (createButton.isConnected) done();
    }
  });

  ctx.mount(
    pageHeader('Webhooks'),
    h('section', { class: 'panel', 'aria-labelledby': 'webhook-create-title' },
      h('h2', { id: 'webhook-create-title' }, 'Add an endpoint'), form, secretSlot),
    h('section', { class: 'panel', 'aria-labelledby': 'webhook-list-title' }, h('h2', { id: 'webhook-list-title' }, 'Endpoints'), list),
  );
  await loadList();
}

function lastAttempt(d) {
  const a = d.attempts[d.attempts.length - 1];
  if (!a) return h('span', { class: 'muted' }, '—');
  return a.status_code ? code(String(a.status_code)) : h('span', { class: 'muted' }, a.error || 'no answer');
}

export async function pageWebhook(ctx) {
  const id = ctx.route.id;
  const endpoint = await api('GET', `/webhook-endpoints/${enc(id)}`);
  const list = h('div', { class: 'results' });
  const loadDeliveries = () => section(list, ctx, async () => {
    const page = await api('GET', `/webhook-endpoints/${enc(id)}/deliveries?limit=50`);
    const items = Array.isArray(page.items) ? page.items : [];
    if (items.length === 0) {
      return emptyState('No deliveries yet.', h('p', {}, 'Send a test event from the Webhooks page, or wait for the next event.'));
    }
    const rows = items.map((d) => {
      let retry = null;
      if (d.status !== 'succeeded') {
        retry = h('button', { type: 'button', class: 'button button-small', testid: 'delivery-retry' }, 'Retry now');
        retry.addEventListener('click', async () => {
          const done = setBusy(retry, 'Retrying…');
          try {
            await api('POST', `/webhook-endpoints/${enc(id)}/deliveries/${enc(d.id)}/retry`, { body: {} });
            showNotice('The delivery is due again now.');
            loadDeliveries();
          } catch (error) {
            if (retry.isConnected) done();
            report(error);
          }
        });
      }
      return h('tr', { testid: 'delivery-row', 'data-id': d.id, 'data-status': d.status },
        h('td', {}, code(d.event_type)),
        h('td', {}, badge(d.status === 'succeeded' ? 'completed' : d.status, d.status, 'delivery-status')),
        h('td', { testid: 'delivery-attempts' }, String(d.attempt_count)),
        h('td', { testid: 'delivery-last' }, lastAttempt(d)),
        h('td', {}, timeEl(d.created_at)),
        h('td', {}, d.next_attempt_at ? timeEl(d.next_attempt_at) : h('span', { class: 'muted' }, '—')),
        h('td', { class: 'row-actions' }, retry));
    });
    const table = h('table', { class: 'table', testid: 'deliveries-table' },
      h('caption', { class: 'visually-hidden' }, 'Deliveries, newest first'),
      h('thead', {}, h('tr', {}, ['Event', 'Status', 'Attempts', 'Last answer', 'Created', 'Next attempt', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    return tableWrap(table, 'Deliveries table');
  });
  const refresh = h('button', { type: 'button', class: 'button', testid: 'deliveries-refresh' }, 'Refresh');
  refresh.addEventListener('click', () => loadDeliveries());
  ctx.mount(
    backLink('/webhooks', 'All endpoints'),
    pageHeader(endpoint.url, enabledBadge(endpoint)),
    endpoint.disabled_reason ? h('p', { class: 'panel state-error', testid: 'webhook-disabled-reason' }, `Disabled by Cairn: ${endpoint.disabled_reason}`) : null,
    h('section', { class: 'panel', 'aria-labelledby': 'deliveries-title' },
      h('h2', { id: 'deliveries-title' }, 'Recent deliveries'), h('div', { class: 'actions' }, refresh), list),
  );
  await loadDeliveries();
}
