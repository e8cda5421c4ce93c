// Cairn tenant dashboard: one ES module, no framework, no build step, no third-party code.
//
// Served from /dashboard/ on the API's own origin under
//   default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;
//   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'
// so this file never uses inline handlers, style attributes, element.style, eval or
// innerHTML: the DOM is built with createElement/textContent (see h() below), API text is
// never parsed as HTML, and visibility goes through the `hidden` attribute and classes.
//
// The API key lives in sessionStorage only (this tab, until it closes or "Sign out").
// Every API call sends it as X-API-Key to /api/v1 (same origin); any 401 signs out.
//
// Routes (location.hash): #/signin, #/executions, #/executions/<id>, #/failures,
// #/failures/<id>, #/workflows, #/workflows/<id>, #/billing, #/keys. List filters and
// pages live in the hash's query (#/executions?status=paused&page=2), so Back works.
//
// Stable hooks for tests (data-testid):
//   signin-key               the API key input on the sign-in page
//   signin-submit            its submit button
//   signout                  the Sign out button (in the top bar on every signed-in page)
//   nav-executions, nav-failures, nav-workflows, nav-billing, nav-keys   the main navigation links
//   error                    the visible error banner (role=alert); the API's detail and field messages
//   notice                   the success banner (role=status)
//   empty                    any empty state (says what to do next)
//   loading                  any loading placeholder
//   pager-prev, pager-next, pager-info   paging controls of a list
//   executions-table         the executions table
//   execution-row            one row of it (data-id = execution id)
//   execution-status         an execution's status badge (in each row, and on the execution page)
//   execution-attempt        the execution page's attempt number
//   execution-filter-status, execution-filter-workflow, execution-filter-after,
//   execution-filter-before, execution-filter-page-size, execution-filter-submit   the list filters
//   checkpoints-table        the execution page's checkpoint timeline
//   checkpoint-row           one checkpoint (data-id, data-sequence; data-current="true" on the current one)
//   view-state               a checkpoint's "View state" button
//   replay-here              a checkpoint's "Replay from here" button
//   rollback-here            a checkpoint's "Roll back to here" button
//   state-view               the <pre> showing the loaded checkpoint state (data-checkpoint-id)
//   confirm-ok, confirm-cancel   the buttons of the confirmation <dialog>
//   stats-total, stats-open, stats-resolved, stats-ignored, stats-rate   failure statistics
//   failure-filter-status    the failures list's status filter
//   failure-row              one failure (data-id)
//   failure-status           a failure's status badge (in each row, and on the failure page)
//   failure-traceback        the failure page's traceback <pre>
//   failure-resolve, failure-ignore   the failure page's Resolve and Ignore buttons
//   workflow-filter-status   the workflows list's status filter
//   workflow-row             one workflow (data-id)
//   workflow-create-name, workflow-create-type, workflow-create-description,
//   workflow-create-definition, workflow-create-submit   the create form
//   workflow-status          a workflow's status badge
//   workflow-edit-name, workflow-edit-description, workflow-edit-definition, workflow-save
//   workflow-publish, workflow-archive, workflow-draft, workflow-delete   the workflow page's actions
//   balance                  the credit balance (credits)
//   balance-usd              the balance in US dollars
//   transactions-table, transaction-row (data-id)
//   topup-amount, topup-submit, topup-result   the top-up form and what it answered
//   subscription             the subscription panel
//   subscription-status      the subscription's status badge
//   plan-developer, plan-pro, plan-enterprise   checkout buttons (no subscription, or a cancelled one)
//   subscription-portal, subscription-cancel, subscription-cancel-now
//   key-row                  one API key (data-id; data-live="true" while live)
//   key-create-name, key-create-submit   the create form
//   key-secret               the new key's secret, shown once (data-key-id = its id)
//   key-copy                 its Copy button
//   key-secret-dismiss       "I have saved it" (hides the secret)
//   key-revoke               a live key's Revoke button

const API = '/api/v1';
const CONFIG_URL = '/dashboard/config.json';
const KEY_STORE = 'cairn.apiKey';

const EXECUTION_STATUSES = ['running', 'paused', 'failed', 'completed', 'cancelled'];
const FAILURE_STATUSES = ['open', 'resolved', 'ignored'];
const WORKFLOW_STATUSES = ['draft', 'published', 'archived'];
const WORKFLOW_TYPES = [
  ['crewai', 'CrewAI'],
  ['langgraph', 'LangGraph'],
  ['autogen', 'AutoGen'],
  ['semantic_kernel', 'Semantic Kernel'],
  ['custom', 'Custom'],
];
const PLANS = [
  ['developer', 'Developer', 1000],
  ['pro', 'Pro', 10000],
  ['enterprise', 'Enterprise', 100000],
];
const PAGE_SIZES = [10, 20, 50, 100];
const KNOWN_BADGES = new Set([
  ...EXECUTION_STATUSES, ...FAILURE_STATUSES, ...WORKFLOW_STATUSES,
  'active', 'trialing', 'past_due', 'cancel_at_period_end', 'live', 'revoked', 'current',
  'pending', 'completed', 'topup', 'usage', 'subscription',
]);
// A state shown in full up to this many characters of pretty JSON; beyond, on request.
const STATE_PREVIEW_CHARS = 200000;

// ---------------------------------------------------------------- formatting (Intl)

const numberFormat = new Intl.NumberFormat(undefined);
const signedFormat = new Intl.NumberFormat(undefined, { signDisplay: 'exceptZero' });
const percentFormat = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });
const usdFormat = new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD' });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const byteFormats = ['byte', 'kilobyte', 'megabyte', 'gigabyte'].map(
  (unit) => new Intl.NumberFormat(undefined, { style: 'unit', unit, unitDisplay: unit === 'byte' ? 'long' : 'short', maximumFractionDigits: 1 }),
);

function fmtNumber(n) {
  return typeof n === 'number' && Number.isFinite(n) ? numberFormat.format(n) : '—';
}

function fmtBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  let value = n;
  let i = 0;
  while (value >= 1024 && i < byteFormats.length - 1) {
    value /= 1024;
    i += 1;
  }
  return byteFormats[i].format(value);
}

function fmtUsd(dollars) {
  return typeof dollars === 'number' && Number.isFinite(dollars) ? usdFormat.format(dollars) : '—';
}

/** A <time> element for an RFC 3339 timestamp (local time shown, UTC in the title). */
function timeEl(iso, { dateOnly = false } = {}) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', {}, String(iso));
  return h('time', { datetime: iso, title: iso }, (dateOnly ? dateFormat : dateTimeFormat).format(d));
}

function prettyJson(value) {
  return JSON.stringify(value, null, 2);
}

// ---------------------------------------------------------------- DOM helpers

/**
 * Creates an element. props: class (string or array), text, testid (data-testid),
 * on<event> (a listener), value/checked/disabled/selected (properties), any other key as
 * an attribute (true: present, false/null/undefined: left out). Children: nodes, strings
 * (as text, never parsed), numbers, arrays of them; null/false/undefined are skipped.
 */
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  const properties = props || {};
  for (const [key, value] of Object.entries(properties)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') {
      el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : String(value);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'testid') {
      el.setAttribute('data-testid', String(value));
    } else if (key.startsWith('on')) {
      // Listeners only: an on* attribute would be an inline handler, which the CSP blocks.
      if (typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'value') {
      // set after the children (a <select> needs its options first)
    } else if (key === 'checked' || key === 'disabled' || key === 'selected') {
      el[key] = true;
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  appendChildren(el, children);
  if (properties.value !== undefined && properties.value !== null) el.value = String(properties.value);
  return el;
}

function appendChildren(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

const $ = (selector) => document.querySelector(selector);

function badge(status, label, testid) {
  const known = KNOWN_BADGES.has(status) ? status : 'other';
  return h('span', { class: ['badge', `badge-${known}`], testid }, label || String(status ?? '—').replaceAll('_', ' '));
}

function code(text, cls) {
  return h('code', { class: cls }, text ?? '—');
}

function field(label, ...value) {
  return [h('dt', {}, label), h('dd', {}, ...value)];
}

function jsonBlock(value, testid) {
  if (value === null || value === undefined) return h('p', { class: 'muted', testid }, 'None');
  return h('pre', { class: 'json', tabindex: '0', testid }, prettyJson(value));
}

function tableWrap(table, label) {
  // A focusable, labelled scroll region: tables scroll sideways on narrow screens.
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': label }, table);
}

function emptyState(title, ...body) {
  return h('div', { class: 'empty', testid: 'empty' }, h('p', { class: 'empty-title' }, title), ...body);
}

function loadingState(text = 'Loading…') {
  return h('p', { class: 'loading', testid: 'loading', role: 'status' }, text);
}

function enc(id) {
  return encodeURIComponent(id);
}

function hashFor(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== '') query.set(key, String(value));
  }
  const qs = query.toString();
  return `#${path}${qs ? `?${qs}` : ''}`;
}

function link(path, text, props = {}) {
  return h('a', { href: `#${path}`, ...props }, text);
}

function positiveInt(value, fallback) {
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n >= 1 ? n : fallback;
}

function setBusy(button, busyText) {
  const original = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  if (busyText) button.textContent = busyText;
  return () => {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = original;
  };
}

// ---------------------------------------------------------------- session (sessionStorage only)

let memoryKey = null; // used only when sessionStorage is unavailable

function getKey() {
  try {
    return window.sessionStorage.getItem(KEY_STORE);
  } catch {
    return memoryKey;
  }
}

function setKey(key) {
  try {
    window.sessionStorage.setItem(KEY_STORE, key);
  } catch {
    memoryKey = key;
  }
}

function clearKey() {
  memoryKey = null;
  try {
    window.sessionStorage.removeItem(KEY_STORE);
  } catch {
    // nothing stored
  }
}

// ---------------------------------------------------------------- API client

class ApiError extends Error {
  constructor(status, problem, fallback) {
    const detail = (problem && typeof problem.detail === 'string' && problem.detail) || fallback || `HTTP ${status}`;
    super(detail);
    this.name = 'ApiError';
    this.status = status;
    this.problem = problem && typeof problem === 'object' ? problem : null;
    this.code = this.problem?.code ?? null;
    this.handled = false;
  }
}

/** Why the next sign-in page is shown (set when a 401 ends the session). */
let signinMessage = null;
/** Where to go after signing in (the page a signed-out visitor asked for). */
let returnTo = null;

/**
 * Calls the API. Returns the parsed JSON (null for 204). Throws ApiError with the
 * problem's detail. A 401 ends the session and goes to the sign-in page (the error is
 * then marked handled), unless opts.key is given (the sign-in check itself).
 */
async function api(method, path, opts = {}) {
  const key = opts.key ?? getKey();
  const url = new URL(API + path, window.location.origin);
  for (const [name, value] of Object.entries(opts.query || {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value));
  }
  const headers = { Accept: 'application/json, application/problem+json', ...(opts.headers || {}) };
  if (key) headers['X-API-Key'] = key;
  const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (cause) {
    throw new ApiError(0, null, `Could not reach the Cairn API (${cause?.message || 'network error'}). Check your connection and try again.`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (response.status === 401 && !opts.key) {
    const error = new ApiError(401, data, 'Your API key was not accepted.');
    error.handled = true;
    endSession(`${error.message} It may have been revoked. Sign in again with a live key.`);
    throw error;
  }
  if (!response.ok) {
    throw new ApiError(response.status, data, `The API answered ${response.status} ${response.statusText || ''}`.trim());
  }
  if (response.status === 204) return null;
  if (data === null && text) throw new ApiError(response.status, null, 'The API answered something that is not JSON.');
  return data;
}

let dashboardConfig = null;

/** GET /dashboard/config.json (no key needed); {stripe_publishable_key: null} when unavailable. */
async function loadConfig() {
  if (dashboardConfig) return dashboardConfig;
  try {
    const response = await fetch(CONFIG_URL, { cache: 'no-store', credentials: 'omit' });
    const data = response.ok ? await response.json() : {};
    dashboardConfig = {
      stripe_publishable_key: typeof data?.stripe_publishable_key === 'string' && data.stripe_publishable_key ? data.stripe_publishable_key : null,
      stripe_js_url: safeHttpUrl(data?.stripe_js_url),
    };
  } catch {
    dashboardConfig = { stripe_publishable_key: null, stripe_js_url: null };
  }
  return dashboardConfig;
}

let stripeLoading = null;

/** Loads Stripe.js once, from the address config.json names (the page's CSP admits that
 * origin only when card payments are configured). */
function loadStripe(url) {
  if (typeof window.Stripe === 'function') return Promise.resolve(window.Stripe);
  if (!stripeLoading) {
    stripeLoading = new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = url;
      script.addEventListener('load', () => (typeof window.Stripe === 'function'
        ? resolve(window.Stripe)
        : reject(new Error('Stripe.js loaded but did not start.'))));
      script.addEventListener('error', () => {
        stripeLoading = null;
        script.remove();
        reject(new Error('Stripe.js could not be loaded, so the card cannot be entered here. Check the connection and try again.'));
      });
      document.head.append(script);
    });
  }
  return stripeLoading;
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

let workflowNameCache = { at: 0, names: new Map() };

/** Names of the tenant's newest 100 workflows, for labelling lists (best effort, 60 s cache). */
async function workflowNames() {
  if (Date.now() - workflowNameCache.at < 60000) return workflowNameCache.names;
  try {
    const data = await api('GET', '/workflows', { query: { page: 1, page_size: 100 } });
    const names = new Map();
    for (const wf of data.items || []) names.set(wf.id, wf.name);
    workflowNameCache = { at: Date.now(), names };
  } catch (error) {
    if (error.handled) throw error;
  }
  return workflowNameCache.names;
}

// ---------------------------------------------------------------- messages

function showError(error) {
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

function showNotice(text) {
  const banner = $('#notice');
  const dismiss = h('button', { type: 'button', class: 'banner-close', 'aria-label': 'Dismiss this message', onclick: () => { banner.hidden = true; } }, '×');
  banner.replaceChildren(h('div', { class: 'banner-body' }, h('p', { class: 'banner-text' }, text)), dismiss);
  banner.hidden = false;
  banner.scrollIntoView({ block: 'nearest' });
}

function clearMessages() {
  for (const id of ['#error', '#notice']) {
    const el = $(id);
    el.hidden = true;
    el.replaceChildren();
  }
}

/** Shows an error unless it was already handled (a 401 that went to sign-in). */
function report(error) {
  if (error?.handled) return;
  showError(error);
}

// ---------------------------------------------------------------- confirmation dialog

/**
 * Asks in the page's <dialog>. Resolves true for OK; false for Cancel, Escape or a click
 * outside. The first control (Cancel) gets focus; focus returns to the opener afterwards.
 */
function confirmDialog({ title, message, ok = 'OK', danger = false }) {
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

// ---------------------------------------------------------------- router

let renderSeq = 0;
let pendingNotice = null;

function parseRoute() {
  const raw = window.location.hash.replace(/^#/, '') || '/';
  const [pathPart, queryPart = ''] = raw.split('?', 2);
  const segments = pathPart.split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return { name: segments[0] || '', id: segments[1] || null, params: new URLSearchParams(queryPart), hash: `#${raw}` };
}

const PAGES = {
  signin: { title: 'Sign in', render: pageSignin, public: true },
  executions: { title: 'Executions', render: pageExecutions, detail: pageExecution, nav: 'executions' },
  failures: { title: 'Failures', render: pageFailures, detail: pageFailure, nav: 'failures' },
  workflows: { title: 'Workflows', render: pageWorkflows, detail: pageWorkflow, nav: 'workflows' },
  billing: { title: 'Billing', render: pageBilling, nav: 'billing' },
  keys: { title: 'API keys', render: pageKeys, nav: 'keys' },
};

function navigate(hash) {
  if (window.location.hash === hash) render();
  else window.location.hash = hash;
}

/** Renders the current route again (after an action), with an optional success notice. */
function rerender(notice) {
  pendingNotice = notice || null;
  render();
}

function endSession(message) {
  if (!window.location.hash.startsWith('#/signin')) returnTo = window.location.hash;
  clearKey();
  workflowNameCache = { at: 0, names: new Map() };
  signinMessage = message || null;
  if (window.location.hash.startsWith('#/signin')) render();
  else window.location.hash = '#/signin';
}

async function render({ keepFocus = false } = {}) {
  const seq = ++renderSeq;
  const route = parseRoute();
  const signedIn = Boolean(getKey());
  const page = PAGES[route.name];

  if (!page) {
    window.location.replace(signedIn ? '#/executions' : '#/signin');
    return;
  }
  if (!signedIn && !page.public) {
    returnTo = route.hash;
    window.location.replace('#/signin');
    return;
  }
  if (signedIn && route.name === 'signin') {
    window.location.replace('#/executions');
    return;
  }

  const dialog = $('#confirm');
  if (dialog.open) dialog.close('cancel');
  clearMessages();
  $('#topbar').hidden = !signedIn;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === page.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${page.title} · Cairn`;

  const main = $('#main');
  const ctx = {
    route,
    stale: () => seq !== renderSeq,
    mount(...nodes) {
      if (seq !== renderSeq) return false;
      main.replaceChildren();
      appendChildren(main, nodes);
      main.removeAttribute('aria-busy');
      return true;
    },
  };
  main.setAttribute('aria-busy', 'true');
  main.replaceChildren(loadingState());

  if (pendingNotice) {
    showNotice(pendingNotice);
    pendingNotice = null;
  }

  const renderPage = route.id && page.detail ? page.detail : page.render;
  try {
    await renderPage(ctx);
  } catch (error) {
    if (ctx.stale() || error?.handled) return;
    report(error);
    ctx.mount(
      h('h1', { class: 'page-title', tabindex: '-1' }, page.title),
      h('div', { class: 'panel state-error' },
        h('p', {}, 'This page could not be loaded: ', error?.message || String(error)),
        h('button', { type: 'button', class: 'button', onclick: () => render() }, 'Try again')),
    );
  }
  if (!keepFocus && !ctx.stale()) {
    const heading = main.querySelector('h1');
    if (heading && document.activeElement !== $('#signin-key')) heading.focus({ preventScroll: true });
  }
}

/** Loads a part of a page into a container, with loading and error states and a retry. */
async function section(container, ctx, load) {
  container.setAttribute('aria-busy', 'true');
  container.replaceChildren(loadingState());
  try {
    const nodes = await load();
    if (ctx.stale()) return;
    container.replaceChildren();
    appendChildren(container, [].concat(nodes));
  } catch (error) {
    if (ctx.stale() || error?.handled) return;
    report(error);
    container.replaceChildren(h('div', { class: 'state-error' },
      h('p', {}, 'Could not load this: ', error?.message || String(error)),
      h('button', { type: 'button', class: 'button', onclick: () => section(container, ctx, load) }, 'Try again')));
  } finally {
    container.removeAttribute('aria-busy');
  }
}

function pager({ page, pageSize, total, noun, onPage }) {
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const first = total === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(total, page * pageSize);
  return h('nav', { class: 'pager', 'aria-label': `${noun} pages` },
    h('button', { type: 'button', class: 'button', testid: 'pager-prev', disabled: page <= 1, onclick: () => onPage(page - 1) }, '← Previous'),
    h('span', { class: 'pager-info', testid: 'pager-info' },
      total === 0 ? `No ${noun}` : `${fmtNumber(first)}–${fmtNumber(last)} of ${fmtNumber(total)} ${total === 1 ? noun.replace(/s$/, '') : noun} · page ${fmtNumber(page)} of ${fmtNumber(pages)}`),
    h('button', { type: 'button', class: 'button', testid: 'pager-next', disabled: page >= pages, onclick: () => onPage(page + 1) }, 'Next →'));
}

function pageHeader(title, ...extra) {
  return h('div', { class: 'page-header' }, h('h1', { class: 'page-title', tabindex: '-1' }, title), ...extra);
}

function backLink(path, text) {
  return h('p', { class: 'back' }, link(path, `← ${text}`));
}

function selectEl(props, options, current) {
  const select = h('select', props, options.map(([value, label]) => h('option', { value }, label)));
  select.value = current ?? '';
  return select;
}

function labelled(id, label, control, hint) {
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null);
}

// ---------------------------------------------------------------- sign-in

async function pageSignin(ctx) {
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
    const key = input.value.trim();
    if (!key) {
      showError(new Error('Paste an API key first.'));
      input.focus();
      return;
    }
    const done = setBusy(submit, 'Checking…');
    try {
      await api('GET', '/billing/balance', { key });
      setKey(key);
      signinMessage = null;
      const target = returnTo && !returnTo.startsWith('#/signin') ? returnTo : '#/executions';
      returnTo = null;
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
  if (signinMessage) showError(new Error(signinMessage));
  input.focus();
}

// ---------------------------------------------------------------- executions

function toIso(localValue, label) {
  if (!localValue) return undefined;
  const d = new Date(localValue);
  if (Number.isNaN(d.getTime())) throw new Error(`${label} is not a valid date and time.`);
  return d.toISOString();
}

function startSnippets() {
  const base = `${window.location.origin}${API}`;
  return [
    h('p', {}, 'A new account has no executions yet. Start one from your agent code with the Python client, which records a checkpoint per step:'),
    h('pre', { class: 'snippet', tabindex: '0' }, [
      'pip install cairn-client',
      `export CAIRN_API_URL=${base} CAIRN_API_KEY=cairn_…`,
      '',
      'from cairn import Cairn',
      '',
      'client = Cairn()',
      '',
      '@client.workflow("support-triage", workflow_type="crewai")',
      'def triage(run, ticket):',
      '    plan = run.step("plan", make_plan, ticket)   # checkpointed',
      '    return run.step("reply", write_reply, plan)',
      '',
      'triage({"id": "T-7"})   # starts an execution',
    ].join('\n')),
    h('p', {}, 'Or with curl: register a workflow (or create one on the ', link('/workflows', 'Workflows'), ' page), then start an execution of it:'),
    h('pre', { class: 'snippet', tabindex: '0' }, [
      `curl -s ${base}/workflows -H "X-API-Key: $CAIRN_API_KEY" \\`,
      `  -H 'Content-Type: application/json' -d '{"name":"Support triage","workflow_type":"custom"}'`,
      `curl -s ${base}/executions -H "X-API-Key: $CAIRN_API_KEY" \\`,
      `  -H 'Content-Type: application/json' -d '{"workflow_id":"wf_…","input":{"ticket":4711}}'`,
    ].join('\n')),
  ];
}

async function pageExecutions(ctx) {
  const p = ctx.route.params;
  const filters = {
    status: EXECUTION_STATUSES.includes(p.get('status')) ? p.get('status') : '',
    workflow_id: (p.get('workflow_id') || '').trim(),
    after: p.get('after') || '',
    before: p.get('before') || '',
  };
  const page = positiveInt(p.get('page'), 1);
  const pageSize = PAGE_SIZES.includes(Number(p.get('page_size'))) ? Number(p.get('page_size')) : 20;
  const filtered = Boolean(filters.status || filters.workflow_id || filters.after || filters.before);

  const statusSelect = selectEl({ id: 'ex-status', name: 'status', testid: 'execution-filter-status' },
    [['', 'Any status'], ...EXECUTION_STATUSES.map((s) => [s, s[0].toUpperCase() + s.slice(1)])], filters.status);
  const workflowInput = h('input', { id: 'ex-workflow', name: 'workflow_id', type: 'text', testid: 'execution-filter-workflow', value: filters.workflow_id, placeholder: 'wf_…', autocomplete: 'off', spellcheck: 'false' });
  const afterInput = h('input', { id: 'ex-after', name: 'after', type: 'datetime-local', step: '1', testid: 'execution-filter-after', value: filters.after });
  const beforeInput = h('input', { id: 'ex-before', name: 'before', type: 'datetime-local', step: '1', testid: 'execution-filter-before', value: filters.before });
  const sizeSelect = selectEl({ id: 'ex-size', name: 'page_size', testid: 'execution-filter-page-size' },
    PAGE_SIZES.map((n) => [String(n), String(n)]), String(pageSize));

  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter executions' },
    labelled('ex-status', 'Status', statusSelect),
    labelled('ex-workflow', 'Workflow id', workflowInput),
    labelled('ex-after', 'Created after', afterInput),
    labelled('ex-before', 'Created before', beforeInput),
    labelled('ex-size', 'Per page', sizeSelect),
    h('div', { class: 'filter-actions' },
      h('button', { type: 'submit', class: 'button button-primary', testid: 'execution-filter-submit' }, 'Apply'),
      filtered ? h('a', { class: 'button button-quiet', href: hashFor('/executions', { page_size: pageSize === 20 ? '' : pageSize }) }, 'Clear') : null));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate(hashFor('/executions', {
      status: statusSelect.value,
      workflow_id: workflowInput.value.trim(),
      after: afterInput.value,
      before: beforeInput.value,
      page_size: sizeSelect.value === '20' ? '' : sizeSelect.value,
    }));
  });

  const results = h('div', { class: 'results' });
  ctx.mount(pageHeader('Executions'), form, results);

  await section(results, ctx, async () => {
    const query = {
      status: filters.status,
      workflow_id: filters.workflow_id,
      created_after: toIso(filters.after, 'Created after'),
      created_before: toIso(filters.before, 'Created before'),
      page,
      page_size: pageSize,
    };
    const [data, names] = await Promise.all([api('GET', '/executions', { query }), workflowNames()]);
    const items = Array.isArray(data.items) ? data.items : [];
    const goPage = (n) => navigate(hashFor('/executions', {
      ...{ status: filters.status, workflow_id: filters.workflow_id, after: filters.after, before: filters.before },
      page: n === 1 ? '' : n,
      page_size: pageSize === 20 ? '' : pageSize,
    }));
    if (items.length === 0) {
      if (filtered) {
        return emptyState('No executions match these filters.',
          h('p', {}, 'Widen the time range, pick another status, or ', link('/executions', 'clear the filters'), '.'));
      }
      if (page > 1) {
        return emptyState('This page is past the last execution.', h('p', {}, link('/executions', 'Go to the first page'), '.'));
      }
      return emptyState('No executions yet.', ...startSnippets());
    }
    const rows = items.map((ex) => {
      const wfName = names.get(ex.workflow_id);
      return h('tr', { testid: 'execution-row', 'data-id': ex.id },
        h('td', {}, link(`/executions/${enc(ex.id)}`, code(ex.id))),
        h('td', {}, link(`/workflows/${enc(ex.workflow_id)}`, wfName ? h('span', { class: 'wf-name' }, wfName) : code(ex.workflow_id)),
          wfName ? h('div', { class: 'sub' }, code(ex.workflow_id)) : null),
        h('td', {}, badge(ex.status, null, 'execution-status')),
        h('td', { class: 'num' }, fmtNumber(ex.attempt)),
        h('td', { class: 'num' }, fmtNumber(ex.checkpoint_count)),
        h('td', {}, timeEl(ex.created_at)));
    });
    const table = h('table', { class: 'table', testid: 'executions-table' },
      h('caption', { class: 'visually-hidden' }, 'Executions, newest first'),
      h('thead', {}, h('tr', {}, ['Execution', 'Workflow', 'Status', 'Attempt', 'Checkpoints', 'Created'].map((t, i) =>
        h('th', { scope: 'col', class: i === 3 || i === 4 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Executions table'), pager({ page, pageSize, total: data.total ?? items.length, noun: 'executions', onPage: goPage })];
  });
}

async function pageExecution(ctx) {
  const id = ctx.route.id;
  const ex = await api('GET', `/executions/${enc(id)}`);
  if (ctx.stale()) return;

  const fields = h('dl', { class: 'fields' },
    field('Execution', code(ex.id)),
    field('Workflow', link(`/workflows/${enc(ex.workflow_id)}`, code(ex.workflow_id)), ' · ',
      link('/executions', 'its executions', { href: hashFor('/executions', { workflow_id: ex.workflow_id }) })),
    field('Status', badge(ex.status, null, 'execution-status')),
    field('Attempt', h('span', { testid: 'execution-attempt' }, fmtNumber(ex.attempt))),
    field('Checkpoints', fmtNumber(ex.checkpoint_count)),
    field('Current checkpoint', ex.current_checkpoint_id ? code(ex.current_checkpoint_id) : h('span', { class: 'muted' }, 'none (the start)')),
    ex.key ? field('Key', code(ex.key)) : null,
    field('Created', timeEl(ex.created_at)),
    field('Updated', timeEl(ex.updated_at)),
    field('Ended', timeEl(ex.ended_at)),
    ex.cancel_reason ? field('Cancel reason', ex.cancel_reason) : null,
  );

  const errorPanel = ex.error
    ? h('section', { class: 'panel panel-error', 'aria-labelledby': 'ex-error-title' },
      h('h2', { id: 'ex-error-title' }, 'Error'),
      h('p', {}, h('strong', {}, ex.error.error_type ?? 'Error'), ': ', ex.error.message ?? ''),
      h('p', {}, link('/failures', 'See the failures', { href: hashFor('/failures', { status: 'open' }) }), ' for its traceback and recovery commands.'))
    : null;

  const metadata = ex.metadata && Object.keys(ex.metadata).length
    ? h('section', { class: 'panel' }, h('h2', {}, 'Metadata'), jsonBlock(ex.metadata))
    : null;

  const timeline = h('div', { class: 'timeline' });
  const stateView = h('pre', { class: 'json state', testid: 'state-view', tabindex: '0', hidden: true });
  const stateInfo = h('p', { class: 'muted', id: 'state-info' }, 'Choose “View state” on a checkpoint to load its state here.');
  const stateMore = h('div', { class: 'actions', hidden: true });

  ctx.mount(
    backLink('/executions', 'Executions'),
    pageHeader('Execution', badge(ex.status, null, null)),
    h('section', { class: 'panel' }, fields),
    errorPanel,
    h('div', { class: 'two-col' },
      h('section', { class: 'panel' }, h('h2', {}, 'Input'), jsonBlock(ex.input, 'execution-input')),
      h('section', { class: 'panel' }, h('h2', {}, 'Output'), jsonBlock(ex.output, 'execution-output'))),
    metadata,
    h('section', { class: 'panel', 'aria-labelledby': 'cp-title' },
      h('h2', { id: 'cp-title' }, 'Checkpoints'),
      h('p', { class: 'hint' }, 'Replay runs the execution again from a checkpoint (failed or paused executions; 1 credit). Roll back pauses it at a checkpoint and deletes every later checkpoint with its state (running, paused or failed executions).'),
      timeline),
    h('section', { class: 'panel', 'aria-labelledby': 'state-title' },
      h('h2', { id: 'state-title' }, 'State'), stateInfo, stateView, stateMore),
  );

  const limit = 50;
  let offset = 0;

  async function showState(cp, button) {
    const done = setBusy(button, 'Loading…');
    stateInfo.textContent = `Loading the state of checkpoint #${cp.sequence}…`;
    try {
      const full = await api('GET', `/checkpoints/${enc(cp.id)}`, { query: { include_state: 'true' } });
      if (ctx.stale()) return;
      const text = prettyJson(full.state ?? null);
      stateInfo.replaceChildren(`Checkpoint #${full.sequence}`, full.name ? ` “${full.name}”` : '', ` · ${fmtBytes(full.state_size_bytes)} · `, timeEl(full.created_at));
      stateView.setAttribute('data-checkpoint-id', full.id);
      if (text.length > STATE_PREVIEW_CHARS) {
        stateView.textContent = `${text.slice(0, STATE_PREVIEW_CHARS)}\n…`;
        stateMore.replaceChildren(h('button', {
          type: 'button', class: 'button', onclick: (event) => {
            stateView.textContent = text;
            event.currentTarget.remove();
            stateMore.hidden = true;
          },
        }, `Show all (${fmtNumber(text.length)} characters)`));
        stateMore.hidden = false;
      } else {
        stateView.textContent = text;
        stateMore.replaceChildren();
        stateMore.hidden = true;
      }
      stateView.hidden = false;
      stateView.focus({ preventScroll: false });
    } catch (error) {
      stateInfo.textContent = 'The state could not be loaded.';
      report(error);
    } finally {
      if (button.isConnected) done();
    }
  }

  async function act(kind, cp, button) {
    const replay = kind === 'replay';
    const label = `checkpoint #${cp.sequence}${cp.name ? ` “${cp.name}”` : ''}`;
    const ok = await confirmDialog(replay
      ? {
        title: 'Replay from this checkpoint?',
        message: [`The execution (now ${ex.status}) runs again from ${label} as attempt ${ex.attempt + 1}.`, 'This costs 1 credit. Only failed or paused executions can be replayed.'],
        ok: 'Replay',
      }
      : {
        title: 'Roll back to this checkpoint?',
        message: [`The execution (now ${ex.status}) is paused at ${label}.`, 'Every later checkpoint is deleted with its state. This cannot be undone.'],
        ok: 'Roll back',
        danger: true,
      });
    if (!ok) return;
    const done = setBusy(button, replay ? 'Replaying…' : 'Rolling back…');
    try {
      const result = await api('POST', `/executions/${enc(ex.id)}/${replay ? 'replay' : 'rollback'}`, { body: { checkpoint_id: cp.id } });
      if (replay) {
        rerender(`Replayed from ${label}: attempt ${fmtNumber(result.attempt)}, now ${result.status}.`);
      } else {
        const n = result.discarded_checkpoints ?? 0;
        rerender(`Rolled back to ${label}: now ${result.status}; ${fmtNumber(n)} later checkpoint${n === 1 ? '' : 's'} deleted.`);
      }
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  }

  const loadCheckpoints = async () => {
    const data = await api('GET', '/checkpoints', { query: { execution_id: ex.id, limit, offset } });
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) {
      return emptyState(offset > 0 ? 'No more checkpoints.' : 'No checkpoints yet.',
        h('p', {}, 'Checkpoints are recorded while the execution runs: each ', code('run.step(...)'), ' of the Python client records one, or ', code(`POST ${API}/checkpoints`), ' with its execution_id and state.'));
    }
    const rows = items.map((cp) => {
      const current = cp.id === ex.current_checkpoint_id;
      const viewButton = h('button', { type: 'button', class: 'button button-small', testid: 'view-state' }, 'View state');
      const replayButton = h('button', { type: 'button', class: 'button button-small', testid: 'replay-here' }, 'Replay from here');
      const rollbackButton = h('button', { type: 'button', class: 'button button-small button-danger-quiet', testid: 'rollback-here' }, 'Roll back to here');
      viewButton.addEventListener('click', () => showState(cp, viewButton));
      replayButton.addEventListener('click', () => act('replay', cp, replayButton));
      rollbackButton.addEventListener('click', () => act('rollback', cp, rollbackButton));
      for (const b of [viewButton, replayButton, rollbackButton]) b.setAttribute('aria-describedby', `cp-label-${cp.sequence}`);
      return h('tr', { testid: 'checkpoint-row', 'data-id': cp.id, 'data-sequence': cp.sequence, 'data-current': current ? 'true' : null, class: current ? 'row-current' : null },
        h('td', { class: 'num' }, h('span', { id: `cp-label-${cp.sequence}` }, `#${cp.sequence}`)),
        h('td', {}, cp.name ? cp.name : h('span', { class: 'muted' }, 'unnamed'), current ? [' ', badge('current', 'current', 'checkpoint-current')] : null,
          h('div', { class: 'sub' }, code(cp.id))),
        h('td', { class: 'num' }, fmtBytes(cp.state_size_bytes)),
        h('td', {}, timeEl(cp.created_at)),
        h('td', { class: 'num' }, fmtNumber(cp.attempt)),
        h('td', { class: 'row-actions' }, viewButton, replayButton, rollbackButton));
    });
    const table = h('table', { class: 'table', testid: 'checkpoints-table' },
      h('caption', { class: 'visually-hidden' }, 'Checkpoints by sequence'),
      h('thead', {}, h('tr', {}, ['Seq', 'Name', 'Size', 'Created', 'Attempt', 'Actions'].map((t, i) =>
        h('th', { scope: 'col', class: i === 0 || i === 2 || i === 4 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    const total = data.total ?? items.length;
    const nodes = [tableWrap(table, 'Checkpoints table')];
    if (total > limit) {
      nodes.push(pager({
        page: Math.floor(offset / limit) + 1, pageSize: limit, total, noun: 'checkpoints',
        onPage: (n) => {
          offset = (n - 1) * limit;
          section(timeline, ctx, loadCheckpoints);
        },
      }));
    }
    return nodes;
  };
  await section(timeline, ctx, loadCheckpoints);
}

// ---------------------------------------------------------------- failures

async function pageFailures(ctx) {
  const p = ctx.route.params;
  const status = FAILURE_STATUSES.includes(p.get('status')) ? p.get('status') : '';
  const page = positiveInt(p.get('page'), 1);
  const limit = 20;

  const statusSelect = selectEl({ id: 'fail-status', name: 'status', testid: 'failure-filter-status' },
    [['', 'Any status'], ['open', 'Open'], ['resolved', 'Resolved'], ['ignored', 'Ignored']], status);
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter failures' },
    labelled('fail-status', 'Status', statusSelect),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit', class: 'button button-primary' }, 'Apply')));
  const apply = (event) => {
    event?.preventDefault();
    navigate(hashFor('/failures', { status: statusSelect.value }));
  };
  form.addEventListener('submit', apply);

  const stats = h('div', { class: 'stats' });
  const results = h('div', { class: 'results' });
  ctx.mount(pageHeader('Failures'), stats, form, results);

  const statsLoad = section(stats, ctx, async () => {
    const s = await api('GET', '/failures/stats');
    const card = (label, value, testid, note) => h('div', { class: 'stat' },
      h('p', { class: 'stat-label' }, label),
      h('p', { class: 'stat-value', testid }, value),
      note ? h('p', { class: 'stat-note' }, note) : null);
    return [
      card('Open', fmtNumber(s.open_failures), 'stats-open', 'need a decision'),
      card('Resolved', fmtNumber(s.resolved_failures), 'stats-resolved'),
      card('Ignored', fmtNumber(s.ignored_failures), 'stats-ignored'),
      card('Total', fmtNumber(s.total_failures), 'stats-total'),
      card('Failure rate', typeof s.failure_rate_last_30_days === 'number' ? percentFormat.format(s.failure_rate_last_30_days) : '—',
        'stats-rate', 'failures per attempt, last 30 days'),
    ];
  });

  const listLoad = section(results, ctx, async () => {
    const data = await api('GET', '/failures', { query: { status, limit, offset: (page - 1) * limit } });
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) {
      if (status) {
        return emptyState(`No ${status} failures.`, h('p', {}, link('/failures', 'Show failures of any status'), '.'));
      }
      return emptyState('No failures recorded.',
        h('p', {}, 'When an execution fails (an exception inside a ', code('@client.workflow'), ' function, or ',
          code(`POST ${API}/executions/{id}/fail`), '), the failure appears here with its traceback and a retry command.'));
    }
    const rows = items.map((f) => h('tr', { testid: 'failure-row', 'data-id': f.id },
      h('td', {}, link(`/failures/${enc(f.id)}`, code(f.id))),
      h('td', {}, h('strong', {}, f.error_type ?? ''), h('div', { class: 'sub message-cell' }, f.message ?? '')),
      h('td', {}, badge(f.status, null, 'failure-status')),
      h('td', {}, link(`/executions/${enc(f.execution_id)}`, code(f.execution_id))),
      h('td', {}, timeEl(f.created_at))));
    const table = h('table', { class: 'table', testid: 'failures-table' },
      h('caption', { class: 'visually-hidden' }, 'Failures, newest first'),
      h('thead', {}, h('tr', {}, ['Failure', 'Error', 'Status', 'Execution', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Failures table'), pager({
      page, pageSize: limit, total: data.total ?? items.length, noun: 'failures',
      onPage: (n) => navigate(hashFor('/failures', { status, page: n === 1 ? '' : n })),
    })];
  });
  await Promise.all([statsLoad, listLoad]);
}

async function pageFailure(ctx) {
  const f = await api('GET', `/failures/${enc(ctx.route.id)}`);
  if (ctx.stale()) return;
  const details = f.details && typeof f.details === 'object' ? { ...f.details } : {};
  const traceback = typeof details.traceback === 'string' ? details.traceback : null;
  delete details.traceback;
  const agent = details.agent_name;
  const task = details.task_id;
  delete details.agent_name;
  delete details.task_id;

  const resolveButton = h('button', { type: 'button', class: 'button button-primary', testid: 'failure-resolve', disabled: f.status === 'resolved' }, 'Resolve');
  const ignoreButton = h('button', { type: 'button', class: 'button', testid: 'failure-ignore', disabled: f.status !== 'open' }, 'Ignore');
  const act = async (kind, button) => {
    const done = setBusy(button, kind === 'resolve' ? 'Resolving…' : 'Ignoring…');
    try {
      const result = await api('POST', `/failures/${enc(f.id)}/${kind}`);
      rerender(result?.message || (kind === 'resolve' ? 'Failure resolved' : 'Failure ignored'));
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  };
  resolveButton.addEventListener('click', () => act('resolve', resolveButton));
  ignoreButton.addEventListener('click', () => act('ignore', ignoreButton));

  const commands = Array.isArray(f.recovery_commands) ? f.recovery_commands : [];
  ctx.mount(
    backLink('/failures', 'Failures'),
    pageHeader('Failure', badge(f.status, null, 'failure-status')),
    h('section', { class: 'panel' },
      h('p', { class: 'failure-message' }, h('strong', {}, f.error_type ?? 'Error'), ': ', f.message ?? ''),
      h('dl', { class: 'fields' },
        field('Failure', code(f.id)),
        field('Execution', link(`/executions/${enc(f.execution_id)}`, code(f.execution_id))),
        field('Workflow', link(`/workflows/${enc(f.workflow_id)}`, code(f.workflow_id))),
        agent !== undefined ? field('Agent', String(agent)) : null,
        task !== undefined ? field('Task', String(task)) : null,
        field('Created', timeEl(f.created_at)),
        field('Resolved', timeEl(f.resolved_at))),
      h('div', { class: 'actions' }, resolveButton, ignoreButton),
      h('p', { class: 'hint' }, 'Resolve when it is dealt with (its pending retry commands are cancelled); ignore an open failure you will not act on. To retry, replay the execution from its page.')),
    h('section', { class: 'panel' }, h('h2', {}, 'Traceback'),
      traceback ? h('pre', { class: 'traceback', tabindex: '0', testid: 'failure-traceback' }, traceback) : h('p', { class: 'muted' }, 'No traceback was recorded.')),
    Object.keys(details).length ? h('section', { class: 'panel' }, h('h2', {}, 'Other details'), jsonBlock(details)) : null,
    h('section', { class: 'panel' }, h('h2', {}, 'Recovery commands'),
      commands.length
        ? tableWrap(h('table', { class: 'table', testid: 'recovery-commands' },
          h('thead', {}, h('tr', {}, ['Command', 'Type', 'Status'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', {}, commands.map((c) => h('tr', { testid: 'recovery-command', 'data-id': c.id },
            h('td', {}, code(c.id)), h('td', {}, c.type ?? ''), h('td', {}, badge(c.status)))))), 'Recovery commands')
        : h('p', { class: 'muted' }, 'None.')),
  );
}

// ---------------------------------------------------------------- workflows

function parseDefinition(text) {
  const trimmed = text.trim();
  if (!trimmed) return null;
  let value;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    throw new Error(`The definition is not valid JSON: ${error.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error('The definition must be a JSON object ({…}), or empty.');
  }
  return value;
}

async function pageWorkflows(ctx) {
  const p = ctx.route.params;
  const status = WORKFLOW_STATUSES.includes(p.get('status')) ? p.get('status') : '';
  const page = positiveInt(p.get('page'), 1);
  const pageSize = 20;

  const statusSelect = selectEl({ id: 'wf-status', name: 'status', testid: 'workflow-filter-status' },
    [['', 'Any status'], ['draft', 'Draft'], ['published', 'Published'], ['archived', 'Archived']], status);
  const filterForm = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter workflows' },
    labelled('wf-status', 'Status', statusSelect),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit', class: 'button button-primary' }, 'Apply')));
  const apply = (event) => {
    event?.preventDefault();
    navigate(hashFor('/workflows', { status: statusSelect.value }));
  };
  filterForm.addEventListener('submit', apply);

  const nameInput = h('input', { id: 'wf-name', name: 'name', type: 'text', required: true, maxlength: '200', testid: 'workflow-create-name', autocomplete: 'off' });
  const typeSelect = selectEl({ id: 'wf-type', name: 'workflow_type', testid: 'workflow-create-type' }, WORKFLOW_TYPES, 'custom');
  const descInput = h('textarea', { id: 'wf-desc', name: 'description', rows: '2', maxlength: '2000', testid: 'workflow-create-description' });
  const defInput = h('textarea', { id: 'wf-def', name: 'definition', rows: '6', class: 'mono', spellcheck: 'false', testid: 'workflow-create-definition', placeholder: '{"agents": ["triager", "writer"]}' });
  const createButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'workflow-create-submit' }, 'Create workflow');
  const createForm = h('form', { class: 'form', novalidate: true },
    h('div', { class: 'form-grid' },
      labelled('wf-name', 'Name', nameInput),
      labelled('wf-type', 'Type', typeSelect)),
    labelled('wf-desc', 'Description (optional)', descInput),
    labelled('wf-def', 'Definition (optional JSON object)', defInput, 'The graph or agent configuration, at most 64 KiB.'),
    h('div', { class: 'actions' }, createButton));
  createForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const body = { name: nameInput.value.trim(), workflow_type: typeSelect.value };
    if (!body.name) {
      showError(new Error('Give the workflow a name.'));
      nameInput.focus();
      return;
    }
    try {
      const definition = parseDefinition(defInput.value);
      if (definition) body.definition = definition;
    } catch (error) {
      showError(error);
      defInput.focus();
      return;
    }
    if (descInput.value.trim()) body.description = descInput.value.trim();
    const done = setBusy(createButton, 'Creating…');
    try {
      const wf = await api('POST', '/workflows', { body });
      workflowNameCache.at = 0;
      pendingNotice = `Workflow “${wf.name}” created as a draft.`;
      navigate(`#/workflows/${enc(wf.id)}`);
    } catch (error) {
      done();
      report(error);
    }
  });

  const results = h('div', { class: 'results' });
  ctx.mount(
    pageHeader('Workflows'),
    filterForm,
    results,
    h('section', { class: 'panel', 'aria-labelledby': 'wf-create-title' }, h('h2', { id: 'wf-create-title' }, 'Create a workflow'), createForm),
  );

  await section(results, ctx, async () => {
    const data = await api('GET', '/workflows', { query: { status, page, page_size: pageSize } });
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) {
      if (status) return emptyState(`No ${status} workflows.`, h('p', {}, link('/workflows', 'Show workflows of any status'), '.'));
      return emptyState('No workflows yet.',
        h('p', {}, 'Create one with the form below, or let the Python client register it: ',
          code('@client.workflow("support-triage", workflow_type="crewai")'), ' finds the workflow by name or creates it.'));
    }
    const typeLabel = new Map(WORKFLOW_TYPES);
    const rows = items.map((wf) => h('tr', { testid: 'workflow-row', 'data-id': wf.id },
      h('td', {}, link(`/workflows/${enc(wf.id)}`, wf.name), h('div', { class: 'sub' }, code(wf.id))),
      h('td', {}, typeLabel.get(wf.workflow_type) ?? wf.workflow_type),
      h('td', {}, badge(wf.status, null, 'workflow-status')),
      h('td', { class: 'num' }, fmtNumber(wf.version)),
      h('td', {}, timeEl(wf.updated_at))));
    const table = h('table', { class: 'table', testid: 'workflows-table' },
      h('caption', { class: 'visually-hidden' }, 'Workflows, newest first'),
      h('thead', {}, h('tr', {}, ['Name', 'Type', 'Status', 'Version', 'Updated'].map((t, i) => h('th', { scope: 'col', class: i === 3 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Workflows table'), pager({
      page, pageSize, total: data.total ?? items.length, noun: 'workflows',
      onPage: (n) => navigate(hashFor('/workflows', { status, page: n === 1 ? '' : n })),
    })];
  });
}

async function pageWorkflow(ctx) {
  const wf = await api('GET', `/workflows/${enc(ctx.route.id)}`);
  if (ctx.stale()) return;
  const ifMatch = { 'If-Match': `"${wf.version}"` };
  const archived = wf.status === 'archived';

  const nameInput = h('input', { id: 'wfe-name', type: 'text', required: true, maxlength: '200', value: wf.name, testid: 'workflow-edit-name', disabled: archived, autocomplete: 'off' });
  const descInput = h('textarea', { id: 'wfe-desc', rows: '2', maxlength: '2000', testid: 'workflow-edit-description', disabled: archived, value: wf.description ?? '' });
  const defText = wf.definition === null || wf.definition === undefined ? '' : prettyJson(wf.definition);
  const defInput = h('textarea', { id: 'wfe-def', rows: '10', class: 'mono', spellcheck: 'false', testid: 'workflow-edit-definition', disabled: archived, value: defText });
  const saveButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'workflow-save', disabled: archived }, 'Save changes');
  const form = h('form', { class: 'form', novalidate: true },
    labelled('wfe-name', 'Name', nameInput),
    labelled('wfe-desc', 'Description', descInput),
    labelled('wfe-def', 'Definition (JSON object, or empty)', defInput),
    h('div', { class: 'actions' }, saveButton),
    archived ? h('p', { class: 'hint' }, 'An archived workflow is read-only: move it back to draft to change it.') : null);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const body = {};
    const name = nameInput.value.trim();
    if (!name) {
      showError(new Error('The name cannot be empty.'));
      nameInput.focus();
      return;
    }
    if (name !== wf.name) body.name = name;
    const desc = descInput.value.trim();
    if (desc !== (wf.description ?? '')) body.description = desc || null;
    try {
      const definition = parseDefinition(defInput.value);
      if (JSON.stringify(definition) !== JSON.stringify(wf.definition ?? null)) body.definition = definition;
    } catch (error) {
      showError(error);
      defInput.focus();
      return;
    }
    if (Object.keys(body).length === 0) {
      showNotice('Nothing changed.');
      return;
    }
    const done = setBusy(saveButton, 'Saving…');
    try {
      const updated = await api('PUT', `/workflows/${enc(wf.id)}`, { body, headers: ifMatch });
      workflowNameCache.at = 0;
      rerender(`Saved: version ${fmtNumber(updated.version)}.`);
    } catch (error) {
      done();
      report(error);
    }
  });

  const setStatus = async (status, button) => {
    const done = setBusy(button, 'Working…');
    try {
      const updated = await api('PUT', `/workflows/${enc(wf.id)}`, { body: { status }, headers: ifMatch });
      rerender(`The workflow is now ${updated.status}.`);
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  };
  const statusButton = (status, label, testid) => {
    const b = h('button', { type: 'button', class: 'button', testid }, label);
    b.addEventListener('click', () => setStatus(status, b));
    return b;
  };
  const deleteButton = h('button', { type: 'button', class: 'button button-danger', testid: 'workflow-delete' }, 'Delete');
  deleteButton.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: 'Delete this workflow?',
      message: [`“${wf.name}” is deleted for good.`, 'Its executions stay, listed by its id.'],
      ok: 'Delete',
      danger: true,
    });
    if (!ok) return;
    const done = setBusy(deleteButton, 'Deleting…');
    try {
      await api('DELETE', `/workflows/${enc(wf.id)}`, { headers: ifMatch });
      workflowNameCache.at = 0;
      pendingNotice = `Workflow “${wf.name}” deleted.`;
      navigate('#/workflows');
    } catch (error) {
      if (deleteButton.isConnected) done();
      report(error);
    }
  });

  const typeLabel = new Map(WORKFLOW_TYPES);
  ctx.mount(
    backLink('/workflows', 'Workflows'),
    pageHeader(wf.name, badge(wf.status, null, 'workflow-status')),
    h('section', { class: 'panel' },
      h('dl', { class: 'fields' },
        field('Workflow', code(wf.id)),
        field('Type', typeLabel.get(wf.workflow_type) ?? wf.workflow_type),
        field('Status', badge(wf.status)),
        field('Version', fmtNumber(wf.version)),
        field('Created', timeEl(wf.created_at)),
        field('Updated', timeEl(wf.updated_at)),
        field('Executions', h('a', { href: hashFor('/executions', { workflow_id: wf.id }) }, 'Show its executions'))),
      h('div', { class: 'actions' },
        wf.status === 'draft' ? statusButton('published', 'Publish', 'workflow-publish') : null,
        wf.status !== 'draft' ? statusButton('draft', 'Back to draft', 'workflow-draft') : null,
        wf.status !== 'archived' ? statusButton('archived', 'Archive', 'workflow-archive') : null,
        deleteButton),
      h('p', { class: 'hint' }, 'Archived workflows cannot start executions; move one back to draft to use or edit it again.')),
    h('section', { class: 'panel', 'aria-labelledby': 'wfe-title' }, h('h2', { id: 'wfe-title' }, 'Edit'), form),
    wf.metadata && Object.keys(wf.metadata).length ? h('section', { class: 'panel' }, h('h2', {}, 'Metadata'), jsonBlock(wf.metadata)) : null,
  );
}

// ---------------------------------------------------------------- billing

function safeHttpUrl(value) {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}

function returnUrl() {
  return `${window.location.origin}${window.location.pathname}#/billing`;
}

/** The card form of a top-up: Stripe.js's card Element and a Pay button; on success it
 * says so and calls `paid`. Errors are Stripe's own messages (a declined card, an
 * incomplete number), shown beside the form, which stays usable. */
async function cardForm(config, clientSecret, amount, paid) {
  const StripeJs = await loadStripe(config.stripe_js_url);
  const stripe = StripeJs(config.stripe_publishable_key);
  const card = stripe.elements().create('card');
  const mountPoint = h('div', { class: 'card-element', id: 'card-element', testid: 'card-element' });
  const cardError = h('p', { class: 'field-error', testid: 'card-error', role: 'alert', hidden: true });
  const pay = h('button', { type: 'submit', class: 'button button-primary', testid: 'card-pay' }, `Pay ${amount}`);
  const form = h('form', { class: 'form card-form', novalidate: true, 'aria-label': 'Card payment' },
    h('p', { class: 'field-label' }, 'Card'), mountPoint, cardError, h('div', { class: 'actions' }, pay));
  card.mount(mountPoint);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    cardError.hidden = true;
    const done = setBusy(pay, 'Paying…');
    let outcome;
    try {
      outcome = await stripe.confirmCardPayment(clientSecret, { payment_method: { card } });
    } catch (error) {
      outcome = { error: { message: error?.message || 'The payment could not be sent to Stripe.' } };
    }
    if (outcome?.error || outcome?.paymentIntent?.status !== 'succeeded') {
      cardError.textContent = outcome?.error?.message || 'The payment did not go through.';
      cardError.hidden = false;
      done();
      return;
    }
    card.destroy?.();
    form.replaceWith(h('p', { class: 'notice', testid: 'card-paid', role: 'status' },
      h('strong', {}, `Paid ${amount}.`), ' The credits are added as soon as Stripe confirms the payment (usually within seconds).'));
    paid();
  });
  return form;
}

async function pageBilling(ctx) {
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

  const checkout = async (planId, button) => {
    const done = setBusy(button, 'Opening checkout…');
    try {
      const result = await api('POST', '/billing/subscriptions/create-checkout', { body: { plan_id: planId, return_url: returnUrl() } });
      const url = safeHttpUrl(result.checkout_url);
      if (!url) throw new Error('The checkout address the API answered is not an http(s) URL.');
      window.location.assign(url);
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  };

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
    portalButton.addEventListener('click', async () => {
      const done = setBusy(portalButton, 'Opening…');
      try {
        const result = await api('POST', '/billing/subscriptions/portal', { body: { return_url: returnUrl() } });
        const url = safeHttpUrl(result.portal_url);
        if (!url) throw new Error('The portal address the API answered is not an http(s) URL.');
        window.location.assign(url);
      } catch (error) {
        if (portalButton.isConnected) done();
        report(error);
      }
    });
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

// ---------------------------------------------------------------- API keys

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
    showNotice('The key is on the clipboard.');
  } else {
    const selection = window.getSelection();
    const range = document.createRange();
    range.selectNodeContents(secretEl);
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = 'Selected: press Ctrl+C';
    showNotice('The clipboard is not available here: the key is selected, press Ctrl+C (⌘C on a Mac) to copy it.');
  }
}

async function pageKeys(ctx) {
  // Keys made or revoked on this page, until the list (read from an index DynamoDB fills
  // within about a second) shows them itself.
  const created = new Map();
  const revoked = new Map();
  const sessionPrefix = (getKey() || '').slice(0, 10);

  const nameInput = h('input', { id: 'key-name', name: 'name', type: 'text', required: true, maxlength: '100', testid: 'key-create-name', autocomplete: 'off', placeholder: 'CI deploys' });
  const createButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'key-create-submit' }, 'Create key');
  const secretSlot = h('div', { class: 'secret-slot' });
  const form = h('form', { class: 'form inline-form', novalidate: true },
    labelled('key-name', 'Name', nameInput, 'What the key is for, so you can recognise it later.'),
    h('div', { class: 'actions' }, createButton));
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
        h('td', {}, timeEl(k.created_at)),
        h('td', {}, live ? badge('live', 'live', 'key-status') : [badge('revoked', 'revoked', 'key-status'), ' ', timeEl(k.revoked_at)]),
        h('td', { class: 'row-actions' }, revokeButton));
    });
    const table = h('table', { class: 'table', testid: 'keys-table' },
      h('caption', { class: 'visually-hidden' }, 'API keys, newest first'),
      h('thead', {}, h('tr', {}, ['Name', 'Prefix', 'Created', 'Status', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    const liveCount = items.filter((k) => !k.revoked_at).length;
    return [tableWrap(table, 'API keys table'), h('p', { class: 'hint' },
      `${fmtNumber(liveCount)} live ${liveCount === 1 ? 'key' : 'keys'} of ${fmtNumber(items.length)}. The last live key cannot be revoked: create another first.`)];
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const name = nameInput.value.trim();
    if (!name) {
      showError(new Error('Give the key a name.'));
      nameInput.focus();
      return;
    }
    const done = setBusy(createButton, 'Creating…');
    try {
      const item = await api('POST', '/keys', { body: { name } });
      const secret = item.key;
      const listed = { id: item.id, name: item.name, prefix: item.prefix, created_at: item.created_at, revoked_at: item.revoked_at ?? null };
      created.set(item.id, listed);
      nameInput.value = '';
      if (typeof secret === 'string' && secret) {
        const secretEl = h('code', { class: 'secret', testid: 'key-secret', 'data-key-id': item.id, tabindex: '0' }, secret);
        const copyButton = h('button', { type: 'button', class: 'button button-primary', testid: 'key-copy' }, 'Copy');
        copyButton.addEventListener('click', () => copySecret(secretEl, copyButton));
        const dismiss = h('button', { type: 'button', class: 'button', testid: 'key-secret-dismiss' }, 'I have saved it');
        dismiss.addEventListener('click', () => {
          secretSlot.replaceChildren();
          nameInput.focus();
        });
        secretSlot.replaceChildren(h('div', { class: 'secret-box', role: 'region', 'aria-labelledby': 'secret-title' },
          h('h3', { id: 'secret-title' }, `Your new key “${item.name ?? name}”`),
          h('p', {}, h('strong', {}, 'Copy it now: it is shown only this once.'), ' Cairn stores only its hash.'),
          h('div', { class: 'secret-line' }, secretEl, copyButton),
          h('div', { class: 'actions' }, dismiss)));
        copyButton.focus();
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

// ---------------------------------------------------------------- start

function start() {
  $('#signout').addEventListener('click', () => {
    clearKey();
    workflowNameCache = { at: 0, names: new Map() };
    signinMessage = null;
    returnTo = null;
    pendingNotice = 'You are signed out.';
    navigate('#/signin');
  });
  window.addEventListener('hashchange', () => render());
  render({ keepFocus: true });
}

start();
