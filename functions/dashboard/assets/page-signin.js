// The sign-in page (#/signin): an API key, checked against the API before it is kept.

import { api } from './api.js';
import { h, setBusy } from './dom.js';
import { clearMessages, required, showError } from './messages.js';
import { navigate } from './router.js';
import { setKey, signin } from './session.js';
import { code, labelled } from './ui.js';

export async function pageSignin(ctx) {
  const input = h('input', {
    id: 'signin-key', name: 'api-key', type: 'password', testid: 'signin-key', required: true,
    autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off', placeholder: 'cairn_…',
    'aria-describedby': 'signin-key-hint',
  });
  const submit = h('button', { type: 'submit', class: 'button button-primary', testid: 'signin-submit' }, 'Sign in');
  const form = h('form', { class: 'panel form signin', novalidate: true },
    labelled('signin-key', 'API key', input,
      'Paste a key of your tenant (it starts with cairn_). It is kept in this browser tab only, and forgotten when the tab closes or you sign out.'),
    h('div', { class: 'actions' }, submit));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const key = required(input, 'Paste an API key first.');
    if (!key) return;
    const done = setBusy(submit, 'Checking…');
    try {
      await api('GET', '/billing/balance', { key });
      setKey(key);
      signin.message = null;
      const target = signin.returnTo && !signin.returnTo.startsWith('#/signin') ? signin.returnTo : '#/overview';
      signin.returnTo = null;
      navigate(target);
    } catch (error) {
      done();
      if (error.status === 401) {
        showError(new Error(`That API key was not accepted (${error.message}). Check that you pasted the whole key and that it has not been revoked.`));
      } else {
        showError(error);
      }
      input.focus();
    }
  });

  ctx.mount(
    h('div', { class: 'signin-wrap' },
      h('h1', { class: 'page-title', tabindex: '-1' }, 'Sign in to Cairn'),
      h('p', { class: 'lead' }, 'The dashboard of your Cairn tenant: executions and their checkpoints, failures, workflows, billing and API keys.'),
      form,
      h('p', { class: 'hint' }, 'No key yet? Your operator creates the first one with ', code('cairn-admin key create --tenant ten_…'), '; later keys can be made on the API keys page.')),
  );
  // Kept until the next sign-in or sign-out: a page that made several calls may end the
  // session more than once, and each render of this page shows why.
  if (signin.message) showError(new Error(signin.message));
  input.focus();
}
