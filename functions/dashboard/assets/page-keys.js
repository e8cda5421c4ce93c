// API keys (#/keys): the tenant's keys, a new key's secret shown once, and revoking.

import { API, api } from './api.js';
import { SCOPE_AREAS } from './constants.js';
import { enc, h, setBusy } from './dom.js';
import { fmtNumber } from './format.js';
import { clearMessages, confirmDialog, report, required, secretBox, showNotice } from './messages.js';
import { endSession, section } from './router.js';
import { getKey } from './session.js';
import { badge, code, emptyState, labelled, pageHeader, tableWrap, timeEl } from './ui.js';

export async function pageKeys(ctx) {
  // Keys made or revoked on this page, until the list (read from an index DynamoDB fills
  // within about a second) shows them itself.
  const created = new Map();
  const revoked = new Map();
  const sessionPrefix = (getKey() || '').slice(0, 10);

  const nameInput = h('input', { id: 'key-name', name: 'name', type: 'text', required: true, maxlength: '100', testid: 'key-create-name', autocomplete: 'off', placeholder: 'CI deploys' });
  const createButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'key-create-submit' }, 'Create key');
  const secretSlot = h('div', { class: 'secret-slot' });
  // Each area: no access, read, or read and write (the default: a full key).
  const access = SCOPE_AREAS.map(([area, label]) => {
    const select = h('select', { id: `key-scope-${area}`, name: area, testid: `key-scope-${area}` },
      h('option', { value: 'write' }, 'Read and write'),
      h('option', { value: 'read' }, 'Read only'),
      h('option', { value: '' }, 'No access'));
    return { area, select, field: labelled(`key-scope-${area}`, label, select) };
  });
  const expiresInput = h('input', { id: 'key-expires', name: 'expires_at', type: 'datetime-local', testid: 'key-create-expires' });
  // A key for a coding agent (the MCP server): every area read only, none of the keys.
  const agentButton = h('button', { type: 'button', class: 'button', testid: 'key-preset-agent' }, 'For a coding agent (read only)');
  agentButton.addEventListener('click', () => {
    if (!nameInput.value.trim()) nameInput.value = 'coding agent';
    for (const a of access) a.select.value = a.area === 'keys' ? '' : 'read';
    nameInput.focus();
  });
  const form = h('form', { class: 'form inline-form', novalidate: true },
    labelled('key-name', 'Name', nameInput, 'What the key is for, so you can recognise it later.'),
    h('fieldset', { class: 'checks' }, h('legend', {}, 'Access (a key can only give what the key you signed in with holds)'),
      access.map((a) => a.field)),
    labelled('key-expires', 'Expires (optional)', expiresInput, 'From this time, in your time zone, the key is refused.'),
    h('div', { class: 'actions' }, createButton, agentButton));
  const list = h('div', { class: 'results' });

  const loadList = () => section(list, ctx, async () => {
    const data = await api('GET', '/keys');
    const items = Array.isArray(data.items) ? data.items.slice() : [];
    const seen = new Set(items.map((k) => k.id));
    for (const [id, item] of created) if (!seen.has(id)) items.unshift(item);
    for (const item of items) if (!item.revoked_at && revoked.has(item.id)) item.revoked_at = revoked.get(item.id);
    if (items.length === 0) {
      return emptyState('No API keys.', h('p', {}, 'Create one with the form above.'));
    }
    const rows = items.map((k) => {
      const live = !k.revoked_at;
      const mine = Boolean(sessionPrefix) && k.prefix === sessionPrefix && live;
      let revokeButton = null;
      if (live) {
        revokeButton = h('button', { type: 'button', class: 'button button-small button-danger-quiet', testid: 'key-revoke' }, 'Revoke');
        revokeButton.addEventListener('click', async () => {
          const ok = await confirmDialog({
            title: 'Revoke this key?',
            message: [
              `“${k.name ?? k.prefix}” (${k.prefix}…) stops working at its next request. This cannot be undone.`,
              mine ? 'This looks like the key this dashboard is signed in with: you will be signed out.' : 'Programs using it get 401 from then on.',
            ],
            ok: 'Revoke',
            danger: true,
          });
          if (!ok) return;
          const done = setBusy(revokeButton, 'Revoking…');
          try {
            await api('DELETE', `/keys/${enc(k.id)}`);
            revoked.set(k.id, new Date().toISOString());
            showNotice(`Key “${k.name ?? k.prefix}” revoked.`);
            if (mine) {
              // Our own key: the next request would be 401 anyway; say why now.
              endSession('You revoked the key this dashboard was signed in with. Sign in with another key.');
              return;
            }
            loadList();
          } catch (error) {
            if (revokeButton.isConnected) done();
            report(error);
          }
        });
      }
      return h('tr', { testid: 'key-row', 'data-id': k.id, 'data-live': live ? 'true' : 'false' },
        h('td', {}, k.name ?? h('span', { class: 'muted' }, 'unnamed'), mine ? [' ', h('span', { class: 'tag' }, 'this session')] : null),
        h('td', {}, code(`${k.prefix}…`)),
        h('td', { testid: 'key-scopes' }, scopesText(k.scopes)),
        h('td', {}, timeEl(k.created_at)),
        h('td', {}, k.expires_at ? timeEl(k.expires_at) : h('span', { class: 'muted' }, 'never')),
        h('td', {}, live ? badge('live', 'live', 'key-status') : [badge('revoked', 'revoked', 'key-status'), ' ', timeEl(k.revoked_at)]),
        h('td', { class: 'row-actions' }, revokeButton));
    });
    const table = h('table', { class: 'table', testid: 'keys-table' },
      h('caption', { class: 'visually-hidden' }, 'API keys, newest first'),
      h('thead', {}, h('tr', {}, ['Name', 'Prefix', 'Access', 'Created', 'Expires', 'Status', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    const liveCount = items.filter((k) => !k.revoked_at).length;
    return [tableWrap(table, 'API keys table'), h('p', { class: 'hint' },
      `${fmtNumber(liveCount)} live ${liveCount === 1 ? 'key' : 'keys'} of ${fmtNumber(items.length)}. The last live key cannot be revoked: create another first.`)];
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const name = required(nameInput, 'Give the key a name.');
    if (!name) return;
    const body = { name };
    // Everything read and write: no scopes sent (the signed-in key's own).
    if (access.some((a) => a.select.value !== 'write')) {
      body.scopes = access.filter((a) => a.select.value).map((a) => `${a.area}:${a.select.value}`);
      if (body.scopes.length === 0) {
        report(new Error('Give the key access to at least one area.'));
        return;
      }
    }
    if (expiresInput.value) {
      const at = new Date(expiresInput.value);
      if (Number.isNaN(at.getTime())) {
        report(new Error('The expiry is not a valid time.'));
        return;
      }
      body.expires_at = at.toISOString();
    }
    const done = setBusy(createButton, 'Creating…');
    try {
      const item = await api('POST', '/keys', { body });
      const secret = item.key;
      const listed = { id: item.id, name: item.name, prefix: item.prefix, created_at: item.created_at, revoked_at: item.revoked_at ?? null, scopes: item.scopes, expires_at: item.expires_at ?? null };
      created.set(item.id, listed);
      nameInput.value = '';
      expiresInput.value = '';
      for (const a of access) a.select.value = 'write';
      if (typeof secret === 'string' && secret) {
        secretSlot.replaceChildren(secretBox({
          title: `Your new key “${item.name ?? name}”`,
          secret,
          ownerId: item.id,
          testid: 'key',
          note: readOnly(item.scopes)
            ? ['Cairn stores only its hash. A coding agent connects with it to the MCP server at ',
              h('code', { testid: 'key-mcp-url' }, new URL(`${API}/mcp`, window.location.origin).href),
              ' (', code('cairn mcp config'), ' prints the configuration for Claude Code, Cursor, VS Code or Claude Desktop).']
            : 'Cairn stores only its hash.',
          onDismiss: () => {
            secretSlot.replaceChildren();
            nameInput.focus();
          },
        }));
      } else {
        showNotice('The key was created, but its secret was not returned (a repeated request). Revoke it and create another.');
      }
      loadList();
    } catch (error) {
      report(error);
    } finally {
      if (createButton.isConnected) done();
    }
  });

  ctx.mount(
    pageHeader('API keys'),
    h('section', { class: 'panel', 'aria-labelledby': 'key-create-title' },
      h('h2', { id: 'key-create-title' }, 'Create a key'), form, secretSlot),
    h('section', { class: 'panel', 'aria-labelledby': 'key-list-title' }, h('h2', { id: 'key-list-title' }, 'Keys'), list),
  );
  await loadList();
}

// Whether a key may only read (every scope `<area>:read`).
function readOnly(scopes) {
  return Array.isArray(scopes) && scopes.length > 0 && scopes.every((s) => s.endsWith(':read'));
}

// A key's scopes in words: "Full access", or each area with read or read/write.
function scopesText(scopes) {
  if (!Array.isArray(scopes) || scopes.includes('*')) return 'Full access';
  return scopes.map((s, i) => [i ? ' ' : null, code(s)]);
}
