// The API client: every call goes to /api/v1 on this origin with the session's key as
// X-API-Key; errors become ApiError with the problem's detail; a 401 ends the session.
// Also the dashboard's own config.json and the workflow names that label the lists.

import { getKey } from './session.js';

export const API = '/api/v1';
const CONFIG_URL = '/dashboard/config.json';

export class ApiError extends Error {
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

/** What a 401 does (set by the entry module: end the session); see onUnauthorized. */
let unauthorized = () => {};

/** Sets what a 401 answer to a signed-in call does (with the message to show). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/**
 * Calls the API. Returns the parsed JSON (null for 204). Throws ApiError with the
 * problem's detail. A 401 ends the session and goes to the sign-in page (the error is
 * then marked handled), unless opts.key is given (the sign-in check itself).
 */
export async function api(method, path, opts = {}) {
  const key = opts.key ?? getKey();
  const url = new URL(API + path, window.location.origin);
  for (const [name, value] of Object.entries(opts.query || {})) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== '') url.searchParams.append(name, String(one));
    }
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
    unauthorized(`${error.message} It may have been revoked. Sign in again with a live key.`);
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
export async function loadConfig() {
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

let workflowNameCache = { at: 0, names: new Map() };

/** Names of the tenant's newest 100 workflows, for labelling lists (best effort, 60 s cache). */
export async function workflowNames() {
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

/** The workflow names are read again next time (a workflow was made, renamed or deleted). */
export function staleWorkflowNames() {
  workflowNameCache.at = 0;
}

/** Forgets the workflow names (the session ended). */
export function forgetWorkflowNames() {
  workflowNameCache = { at: 0, names: new Map() };
}

export function safeHttpUrl(value) {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}
