// The router: the page is chosen by location.hash (#/<page>[/<id>][?query]); render() shows
// it, sending signed-out visitors to sign-in, and gives the page a context (its route,
// whether a newer render replaced it, and mount() for its content).

import { forgetWorkflowNames } from './api.js';
import { $, appendChildren, h } from './dom.js';
import { swapKeepingFocus } from './live.js';
import { clearMessages, report, showNotice } from './messages.js';
import { clearKey, getKey, signin } from './session.js';
import { loadingState } from './ui.js';

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

/** The pages by route name (see startRouter). */
let pages = {};

/** Goes to a hash route (renders it again if it is the current one), with an optional
 * success notice shown there. */
export function navigate(hash, notice) {
  if (notice) pendingNotice = notice;
  if (window.location.hash === hash) render();
  else window.location.hash = hash;
}

/** Renders the current route again (after an action), with an optional success notice. */
export function rerender(notice) {
  pendingNotice = notice || null;
  render();
}

/** Ends the session (a 401, or the session's own key revoked): back to sign-in, which
 * shows why and returns to this page afterwards. */
export function endSession(message) {
  if (!window.location.hash.startsWith('#/signin')) signin.returnTo = window.location.hash;
  clearKey();
  forgetWorkflowNames();
  signin.message = message || null;
  if (window.location.hash.startsWith('#/signin')) render();
  else window.location.hash = '#/signin';
}

/** "Sign out": forgets the key and goes to sign-in, saying so (or `notice`, when given
 * one: the account's deletion). */
export function signOut(notice) {
  clearKey();
  forgetWorkflowNames();
  signin.message = null;
  signin.returnTo = null;
  navigate('#/signin', typeof notice === 'string' ? notice : 'You are signed out.');
}

async function render({ keepFocus = false } = {}) {
  const seq = ++renderSeq;
  const route = parseRoute();
  const signedIn = Boolean(getKey());
  const page = pages[route.name];

  if (!page) {
    window.location.replace(signedIn ? '#/overview' : '#/signin');
    return;
  }
  if (!signedIn && !page.public) {
    signin.returnTo = route.hash;
    window.location.replace('#/signin');
    return;
  }
  if (signedIn && route.name === 'signin') {
    window.location.replace('#/overview');
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

/** Loads a part of a page into a container, with loading and error states and a retry.
 * quiet: the old content stays until the new one is ready (the focus kept), and an
 * error is the caller's (a live page's refresh). */
export async function section(container, ctx, load, { quiet = false } = {}) {
  if (quiet) {
    const nodes = await load();
    if (!ctx.stale()) swapKeepingFocus(container, nodes);
    return;
  }
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

/**
 * Starts the router. table maps each route name to {title, render(ctx), detail(ctx) for
 * #/<name>/<id>, nav (the navigation link it marks current), public (no key needed)}.
 */
export function startRouter(table) {
  pages = table;
  window.addEventListener('hashchange', () => render());
  render({ keepFocus: true });
}
