// Rendering pieces shared by the pages: badges, fields, JSON blocks, tables, empty and
// loading states, page headers, form fields and the pager.

import { KNOWN_BADGES } from './constants.js';
import { h, hashFor, link } from './dom.js';
import { dateFormat, dateTimeFormat, fmtNumber, prettyJson } from './format.js';

/** A <time> element for an RFC 3339 timestamp (local time shown, UTC in the title). */
export function timeEl(iso, { dateOnly = false } = {}) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', {}, String(iso));
  return h('time', { datetime: iso, title: iso }, (dateOnly ? dateFormat : dateTimeFormat).format(d));
}

/** A figure of a statistics row: its label, value (data-testid) and an optional note. */
export function statCard(label, value, testid, note) {
  return h('div', { class: 'stat' },
    h('p', { class: 'stat-label' }, label),
    h('p', { class: 'stat-value', testid }, value),
    note ? h('p', { class: 'stat-note' }, note) : null);
}

export function badge(status, label, testid) {
  const known = KNOWN_BADGES.has(status) ? status : 'other';
  return h('span', { class: ['badge', `badge-${known}`], testid }, label || String(status ?? '—').replaceAll('_', ' '));
}

export function code(text, cls) {
  return h('code', { class: cls }, text ?? '—');
}

export function field(label, ...value) {
  return [h('dt', {}, label), h('dd', {}, ...value)];
}

export function jsonBlock(value, testid) {
  if (value === null || value === undefined) return h('p', { class: 'muted', testid }, 'None');
  return h('pre', { class: 'json', tabindex: '0', testid }, prettyJson(value));
}

export function tableWrap(table, label) {
  // A focusable, labelled scroll region: tables scroll sideways on narrow screens.
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': label }, table);
}

export function emptyState(title, ...body) {
  return h('div', { class: 'empty', testid: 'empty' }, h('p', { class: 'empty-title' }, title), ...body);
}

export function loadingState(text = 'Loading…') {
  return h('p', { class: 'loading', testid: 'loading', role: 'status' }, text);
}

export function pager({ page, pageSize, total, noun, onPage }) {
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const first = total === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(total, page * pageSize);
  return h('nav', { class: 'pager', 'aria-label': `${noun} pages` },
    h('button', { type: 'button', class: 'button', testid: 'pager-prev', disabled: page <= 1, onclick: () => onPage(page - 1) }, '← Previous'),
    h('span', { class: 'pager-info', testid: 'pager-info' },
      total === 0 ? `No ${noun}` : `${fmtNumber(first)}–${fmtNumber(last)} of ${fmtNumber(total)} ${total === 1 ? noun.replace(/s$/, '') : noun} · page ${fmtNumber(page)} of ${fmtNumber(pages)}`),
    h('button', { type: 'button', class: 'button', testid: 'pager-next', disabled: page >= pages, onclick: () => onPage(page + 1) }, 'Next →'));
}

export function pageHeader(title, ...extra) {
  return h('div', { class: 'page-header' }, h('h1', { class: 'page-title', tabindex: '-1' }, title), ...extra);
}

export function backLink(path, text) {
  return h('p', { class: 'back' }, link(path, `← ${text}`));
}

export function selectEl(props, options, current) {
  const select = h('select', props, options.map(([value, label]) => h('option', { value }, label)));
  select.value = current ?? '';
  return select;
}

/** A list's status filter: Any status or one of statuses, and Apply, which calls
 * onApply with the status chosen ('' for any). */
export function statusFilter({ id, testid, noun, statuses, current, onApply }) {
  const statusSelect = selectEl({ id, name: 'status', testid },
    [['', 'Any status'], ...statuses.map((s) => [s, s[0].toUpperCase() + s.slice(1)])], current);
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': `Filter ${noun}` },
    labelled(id, 'Status', statusSelect),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit', class: 'button button-primary' }, 'Apply')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    onApply(statusSelect.value);
  });
  return form;
}

export function labelled(id, label, control, hint) {
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null);
}

/**
 * An execution's tags as chips, each a link to the executions with that tag added to
 * `active` (the tag filters shown now); none: nothing.
 */
export function tagChips(tags, active = []) {
  const pairs = Object.entries(tags || {});
  if (pairs.length === 0) return null;
  return h('span', { class: 'tags', testid: 'execution-tags' }, pairs.map(([k, v]) => {
    const tag = `${k}:${v}`;
    const wanted = active.includes(tag) ? active : [...active, tag];
    return h('a', { class: 'tag', href: hashFor('/executions', { tag: wanted }), testid: 'tag-chip', 'data-tag': tag }, tag);
  }));
}
