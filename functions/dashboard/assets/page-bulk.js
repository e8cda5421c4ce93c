// Bulk jobs (#/bulk, #/bulk/<id>): replay or cancel every execution a filter matches.
// A job page follows its job live until it ends; startBulkReplay() is the failure group
// page's "Replay failed runs": a dry run first, its count and cost in the confirmation.

import { api } from './api.js';
import { enc, h, hashFor, link, setBusy } from './dom.js';
import { fmtNumber } from './format.js';
import { live } from './live.js';
import { confirmDialog, report } from './messages.js';
import { navigate, section } from './router.js';
import { backLink, badge, code, emptyState, field, pageHeader, pager, tableWrap, timeEl } from './ui.js';

const PAGE_SIZE = 20;

/** A job's progress: a <progress> of what it reached, and its counts. */
function progressOf(job) {
  const reached = (job.done ?? 0) + (job.skipped ?? 0) + (job.failed ?? 0);
  const most = Math.max(job.matched ?? 0, reached, 1);
  return h('div', { class: 'bulk-progress' },
    h('progress', { max: String(most), value: String(reached), testid: 'bulk-progress', 'aria-label': 'Executions reached' }),
    h('p', { testid: 'bulk-counts' },
      `${fmtNumber(reached)} of ${fmtNumber(job.matched ?? 0)} reached: ${fmtNumber(job.done ?? 0)} done, `
      + `${fmtNumber(job.skipped ?? 0)} skipped, ${fmtNumber(job.failed ?? 0)} failed`));
}

function reasonsOf(job) {
  const rows = [];
  for (const [kind, reasons] of [['skipped', job.skipped_by_reason], ['failed', job.failed_by_reason]]) {
    for (const [why, n] of Object.entries(reasons || {})) rows.push(h('li', {}, `${kind}: ${why} (${fmtNumber(n)})`));
  }
  return rows.length ? h('ul', { testid: 'bulk-reasons' }, rows) : null;
}

function filterText(filter) {
  return Object.entries(filter || {}).map(([k, v]) => `${k}=${[].concat(v).join(',')}`).join(' · ');
}

export async function pageBulkJobs(ctx) {
  const page = Number(ctx.route.params.get('page')) || 1;
  const results = h('div', { class: 'results' });
  ctx.mount(backLink('/failures', 'Failures'), pageHeader('Bulk jobs'),
    h('p', { class: 'hint' }, 'Replays and cancellations of many executions at once, newest first. Start one from a failure group.'),
    results);
  await section(results, ctx, async () => {
    const data = await api('GET', '/executions/bulk', { query: { page, page_size: PAGE_SIZE } });
    const items = data.items || [];
    if (!items.length) return emptyState('No bulk jobs yet.', 'Open a failure group and choose “Replay failed runs”.');
    const rows = items.map((job) => h('tr', { testid: 'bulk-row', 'data-id': job.id },
      h('td', {}, link(`/bulk/${enc(job.id)}`, code(job.id))),
      h('td', {}, job.action),
      h('td', {}, badge(job.status)),
      h('td', { class: 'num' }, fmtNumber(job.matched)),
      h('td', { class: 'num' }, fmtNumber(job.done)),
      h('td', {}, timeEl(job.created_at))));
    const table = h('table', { class: 'table', testid: 'bulk-table' },
      h('thead', {}, h('tr', {}, ['Job', 'Action', 'Status', 'Matched', 'Done', 'Started'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Bulk jobs'), pager({
      page, pageSize: PAGE_SIZE, total: data.total ?? items.length, noun: 'jobs',
      onPage: (n) => navigate(hashFor('/bulk', { page: n === 1 ? '' : n })),
    })];
  });
}

export async function pageBulkJob(ctx) {
  const id = ctx.route.id;
  let job = await api('GET', `/executions/bulk/${enc(id)}`);
  if (ctx.stale()) return;
  const headerBadge = h('span', {}, badge(job.status, null, 'bulk-status'));
  const body = h('div', {});
  const cancelButton = h('button', { type: 'button', class: 'button', testid: 'bulk-cancel' }, 'Stop the job');
  const show = () => {
    headerBadge.replaceChildren(badge(job.status, null, 'bulk-status'));
    cancelButton.hidden = job.status !== 'running';
    body.replaceChildren(progressOf(job), ...[reasonsOf(job)].filter(Boolean),
      h('dl', { class: 'fields' },
        field('Job', code(job.id)),
        field('Action', job.action),
        field('Filter', filterText(job.filter)),
        field('Credits needed', fmtNumber(job.credits_needed)),
        job.error ? field('Error', job.error) : null,
        field('Started', timeEl(job.created_at)),
        field('Ended', timeEl(job.ended_at))));
  };
  cancelButton.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: 'Stop this job?', message: 'No round starts after; what was done stays done.', ok: 'Stop', danger: true });
    if (!ok) return;
    const done = setBusy(cancelButton, 'Stopping…');
    try {
      job = await api('POST', `/executions/bulk/${enc(id)}/cancel`);
      show();
    } catch (error) {
      report(error);
    } finally {
      if (cancelButton.isConnected) done();
    }
  });
  show();
  const signature = (j) => JSON.stringify([j.status, j.done, j.skipped, j.failed]);
  const liveStatus = job.status === 'running' ? live(ctx, async () => {
    const now = await api('GET', `/executions/bulk/${enc(id)}`);
    if (ctx.stale() || signature(now) === signature(job)) return false;
    job = now;
    show();
    return job.status === 'running' ? true : 'stop';
  }, { what: 'this job' }) : null;
  ctx.mount(backLink('/bulk', 'Bulk jobs'), pageHeader('Bulk job', headerBadge, liveStatus),
    h('section', { class: 'panel' }, body, h('div', { class: 'actions' }, cancelButton)));
}

/** A failure group's "Replay failed runs": counts them (a dry run), says what it costs,
 * and on confirmation starts the job and shows it. */
export async function startBulkReplay(group, fingerprint, button) {
  const filter = { failure_group: group, status: 'failed' };
  const done = setBusy(button, 'Counting…');
  try {
    const dry = await api('POST', '/executions/bulk', { body: { action: 'replay', filter, dry_run: true } });
    done();
    if (!dry.matched) {
      await confirmDialog({ title: 'Nothing to replay', message: 'No failed execution has an open failure in this group.', ok: 'OK' });
      return;
    }
    const ok = await confirmDialog({
      title: `Replay ${fmtNumber(dry.matched)} failed run${dry.matched === 1 ? '' : 's'}?`,
      message: [
        `Each execution is replayed once from its current checkpoint; this costs ${fmtNumber(dry.credits_needed)} credit${dry.credits_needed === 1 ? '' : 's'}.`,
        `Cause: ${fingerprint ?? ''}`,
      ],
      ok: 'Replay them',
    });
    if (!ok) return;
    const started = setBusy(button, 'Starting…');
    try {
      const job = await api('POST', '/executions/bulk', { body: { action: 'replay', filter } });
      navigate(`#/bulk/${enc(job.id)}`, 'Bulk replay started');
    } finally {
      if (button.isConnected) started();
    }
  } catch (error) {
    if (button.isConnected) done();
    report(error);
  }
}
