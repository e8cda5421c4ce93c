// Live pages: a page that shows things still changing (the executions list, a running
// execution) checks for changes by itself and says so. It asks every 3 s while things
// change, backs off to at most 30 s while nothing does (and after errors), pauses while
// the tab is hidden (asking again as soon as it is shown), waits while a confirmation
// dialog is open, and stops when the page is left.

import { $, appendChildren, h } from './dom.js';

export const LIVE_BASE_MS = 3000;
export const LIVE_MAX_MS = 30000;

const clock = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });

/**
 * Starts checking. check() resolves to true when it found (and showed) a change, false
 * when nothing changed, 'stop' when nothing more will change; it may throw (the next try
 * backs off). Returns the status line
 * to put on the page (data-testid="live-status", data-state live | paused | error).
 */
export function live(ctx, check, { what = 'this page' } = {}) {
  const status = h('p', { class: 'live-status', testid: 'live-status', role: 'status', 'aria-live': 'polite' });
  let delay = LIVE_BASE_MS;
  let timer = null;
  let running = false;

  const say = (state, text) => {
    status.setAttribute('data-state', state);
    status.textContent = text;
  };
  const seconds = (ms) => `${Math.round(ms / 1000)} s`;
  const stop = () => {
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisibility);
  };
  const schedule = () => {
    clearTimeout(timer);
    if (ctx.stale()) return stop();
    if (document.hidden) return say('paused', `Live updates paused while this tab is hidden.`);
    timer = setTimeout(tick, delay);
    return undefined;
  };
  async function tick() {
    if (ctx.stale()) return stop();
    if (document.hidden || running) return schedule();
    if ($('#confirm')?.open) {
      timer = setTimeout(tick, 1000);
      return undefined;
    }
    running = true;
    try {
      const changed = await check();
      if (ctx.stale()) return stop();
      if (changed === 'stop') {
        say('done', `Updated ${clock.format(new Date())}; nothing more will change here.`);
        return stop();
      }
      delay = changed ? LIVE_BASE_MS : Math.min(LIVE_MAX_MS, Math.round(delay * 1.5));
      say('live', `Live: ${what} updates by itself (checked ${clock.format(new Date())}, next in ${seconds(delay)}).`);
    } catch (error) {
      if (ctx.stale()) return stop();
      delay = Math.min(LIVE_MAX_MS, delay * 2);
      say('error', `Could not check for changes (${error?.message || error}); trying again in ${seconds(delay)}.`);
    } finally {
      running = false;
    }
    return schedule();
  }
  function onVisibility() {
    if (ctx.stale()) return stop();
    if (document.hidden) {
      clearTimeout(timer);
      return say('paused', 'Live updates paused while this tab is hidden.');
    }
    delay = LIVE_BASE_MS;
    return tick();
  }

  document.addEventListener('visibilitychange', onVisibility);
  say('live', `Live: ${what} updates by itself (every ${seconds(delay)} while things change).`);
  schedule();
  return status;
}

/**
 * Replaces a container's content with `nodes` (a live page's refresh), keeping the
 * keyboard focus where it was: on the element with the same data-testid in the item
 * with the same data-id (or, failing that, the same data-testid) in the new content.
 */
export function swapKeepingFocus(container, nodes) {
  const focused = document.activeElement;
  const inside = focused && focused !== container && container.contains(focused) ? focused : null;
  const testid = inside?.getAttribute('data-testid');
  const itemId = inside?.closest('[data-id]')?.getAttribute('data-id');
  container.replaceChildren();
  appendChildren(container, [].concat(nodes));
  if (!inside || !testid) return;
  const inItem = itemId ? container.querySelector(`[data-id="${CSS.escape(itemId)}"] [data-testid="${CSS.escape(testid)}"]`) : null;
  (inItem || container.querySelector(`[data-testid="${CSS.escape(testid)}"]`))?.focus({ preventScroll: true });
}
