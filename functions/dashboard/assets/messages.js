// What the page tells the user: the error and notice banners, and the confirmation
// dialog (the page's <dialog>).

import { ApiError } from './api.js';
import { $, h } from './dom.js';
import { code } from './ui.js';

export function showError(error) {
  const banner = $('#error');
  const problem = error instanceof ApiError ? error.problem : null;
  const detail = error instanceof Error ? error.message : String(error);
  const parts = [h('p', { class: 'banner-text' }, detail)];
  const fieldErrors = Array.isArray(problem?.errors) ? problem.errors : [];
  if (fieldErrors.length) {
    parts.push(h('ul', { class: 'field-errors' },
      fieldErrors.map((fe) => h('li', {}, h('strong', {}, String(fe?.field ?? '')), ': ', String(fe?.message ?? '')))));
  }
  if (problem?.code === 'version_mismatch') parts.push(h('p', {}, 'Reload the page to see the current version, then try again.'));
  if (problem?.request_id) parts.push(h('p', { class: 'banner-meta' }, 'Request id: ', code(String(problem.request_id))));
  const dismiss = h('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss this message', onclick: () => { banner.hidden = true; } }, '×');
  banner.replaceChildren(h('div', { class: 'banner-body' }, parts), dismiss);
  banner.hidden = false;
  banner.scrollIntoView({ block: 'nearest' });
}

export function showNotice(text) {
  const banner = $('#notice');
  const dismiss = h('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss this message', onclick: () => { banner.hidden = true; } }, '×');
  banner.replaceChildren(h('div', { class: 'banner-body' }, h('p', { class: 'banner-text' }, text)), dismiss);
  banner.hidden = false;
  banner.scrollIntoView({ block: 'nearest' });
}

export function clearMessages() {
  for (const id of ['#error', '#notice']) {
    const el = $(id);
    el.hidden = true;
    el.replaceChildren();
  }
}

/** A required field's trimmed value; when it is empty, says what is missing (message) and
 * puts the focus there, and the value is ''. */
export function required(input, message) {
  const value = input.value.trim();
  if (!value) {
    showError(new Error(message));
    input.focus();
  }
  return value;
}

/** Shows an error unless it was already handled (a 401 that went to sign-in). */
export function report(error) {
  if (error?.handled) return;
  showError(error);
}

/**
 * Asks in the page's <dialog>. Resolves true for OK; false for Cancel, Escape or a click
 * outside. The first control (Cancel) gets focus; focus returns to the opener afterwards.
 */
export function confirmDialog({ title, message, ok = 'OK', danger = false }) {
  const dialog = $('#confirm');
  const okButton = $('#confirm-ok');
  const cancelButton = $('#confirm-cancel');
  if (dialog.open) dialog.close('cancel');
  $('#confirm-title').textContent = title;
  $('#confirm-message').replaceChildren(...[].concat(message).map((m) => (m instanceof Node ? m : h('p', {}, String(m)))));
  okButton.textContent = ok;
  okButton.classList.toggle('button-danger', danger);
  okButton.classList.toggle('button-primary', !danger);
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const listeners = new AbortController();
    const { signal } = listeners;
    okButton.addEventListener('click', () => dialog.close('ok'), { signal });
    cancelButton.addEventListener('click', () => dialog.close('cancel'), { signal });
    dialog.addEventListener('click', (event) => {
      if (event.target === dialog) dialog.close('cancel'); // the backdrop
    }, { signal });
    dialog.addEventListener('close', () => {
      listeners.abort();
      resolve(dialog.returnValue === 'ok');
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
    }, { signal });
    dialog.returnValue = '';
    dialog.showModal();
    cancelButton.focus();
  });
}

async function copySecret(secretEl, button) {
  const text = secretEl.textContent;
  let copied = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      copied = true;
    }
  } catch {
    copied = false;
  }
  if (copied) {
    button.textContent = 'Copied';
    showNotice('The secret is on the clipboard.');
  } else {
    const selection = window.getSelection();
    const range = document.createRange();
    range.selectNodeContents(secretEl);
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = 'Selected: press Ctrl+C';
    showNotice('The clipboard is not available here: the secret is selected, press Ctrl+C (⌘C on a Mac) to copy it.');
  }
}

/**
 * A secret shown this once (a new API key, a webhook endpoint's signing secret), with
 * Copy and "I have saved it" (onDismiss). testid prefixes the hooks: <testid>-secret
 * (data-<testid>-id = ownerId), <testid>-copy, <testid>-secret-dismiss. The Copy button
 * takes the focus once the box is on the page.
 */
export function secretBox({ title, secret, ownerId, testid, note, onDismiss }) {
  const secretEl = h('code', { class: 'secret', testid: `${testid}-secret`, [`data-${testid}-id`]: ownerId, tabindex: '0' }, secret);
  const copyButton = h('button', { type: 'button', class: 'button button-primary', testid: `${testid}-copy` }, 'Copy');
  copyButton.addEventListener('click', () => copySecret(secretEl, copyButton));
  const dismiss = h('button', { type: 'button', class: 'button', testid: `${testid}-secret-dismiss` }, 'I have saved it');
  dismiss.addEventListener('click', onDismiss);
  const titleId = `${testid}-secret-title`;
  const box = h('div', { class: 'secret-box', role: 'region', 'aria-labelledby': titleId },
    h('h3', { id: titleId }, title),
    h('p', {}, h('strong', {}, 'Copy it now: it is shown only this once.'), ' ', note),
    h('div', { class: 'secret-line' }, secretEl, copyButton),
    h('div', { class: 'actions' }, dismiss));
  queueMicrotask(() => copyButton.focus());
  return box;
}
