// Failures (#/failures, #/failures/<id>): statistics, the list, and one failure with its
// traceback, to resolve or ignore.

import { API, api } from './api.js';
import { sparkline } from './chart.js';
import { FAILURE_STATUSES } from './constants.js';
import { enc, h, hashFor, link, listQuery, setBusy } from './dom.js';
import { fmtNumber, percentFormat } from './format.js';
import { confirmDialog, report } from './messages.js';
import { startBulkReplay } from './page-bulk.js';
import { navigate, rerender, section } from './router.js';
import { backLink, badge, code, emptyState, field, jsonBlock, pageHeader, pager, statCard, statusFilter, tableWrap, timeEl } from './ui.js';

export async function pageFailures(ctx) {
  const { status, page } = listQuery(ctx.route.params, FAILURE_STATUSES);
  // One group's failures (failures of one cause share a group_id).
  const group = (ctx.route.params.get('group_id') || '').trim();
  const limit = 20;

  const form = statusFilter({
    id: 'fail-status', testid: 'failure-filter-status', noun: 'failures', statuses: FAILURE_STATUSES, current: status,
    onApply: (chosen) => navigate(hashFor('/failures', { status: chosen, group_id: group })),
  });

  const stats = h('div', { class: 'stats' });
  const byCause = h('div', { class: 'results' });
  const results = h('div', { class: 'results' });
  ctx.mount(pageHeader('Failures'), stats, form,
    group ? null : h('section', { class: 'panel', 'aria-labelledby': 'groups-title' },
      h('h2', { id: 'groups-title' }, 'By cause'),
      h('p', { class: 'hint' }, 'Failures of one workflow with the same error type, agent and message (numbers, ids and quoted values aside) are one group.'),
      byCause),
    results);

  const groupsLoad = group ? null : section(byCause, ctx, async () => {
    const data = await api('GET', '/failures/groups', { query: { status, limit: 10 } });
    const items = Array.isArray(data.items) ? data.items : [];
    if (items.length === 0) return h('p', { class: 'muted' }, status ? `No ${status} failures.` : 'No failures recorded.');
    const rows = items.map((g) => h('tr', { testid: 'group-row', 'data-id': g.id },
      h('td', {}, h('strong', {}, g.error_type ?? ''), h('div', { class: 'sub message-cell' }, g.sample_message ?? ''),
        h('div', { class: 'sub' }, code(g.fingerprint ?? ''))),
      h('td', {}, badge(g.status, g.resolved_by === 'replay' ? 'resolved by replay' : null, 'group-status')),
      h('td', { class: 'num', testid: 'group-open' }, fmtNumber(g.counts?.open ?? 0)),
      h('td', { class: 'num' }, fmtNumber(g.counts?.total ?? 0)),
      h('td', {}, sparkline(g.failures_per_hour, { testid: 'group-sparkline' })),
      h('td', {}, timeEl(g.last_seen)),
      h('td', {}, link('/failures', 'Its failures', { href: hashFor('/failures', { group_id: g.id }), testid: 'group-failures' }))));
    const table = h('table', { class: 'table', testid: 'groups-table' },
      h('caption', { class: 'visually-hidden' }, 'Failure groups, the most recently seen first'),
      h('thead', {}, h('tr', {}, ['Cause', 'Status', 'Open', 'Failures', 'Last 24 hours', 'Last seen', ''].map((t, i) =>
        h('th', { scope: 'col', class: i === 2 || i === 3 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    const more = data.total > items.length ? h('p', { class: 'hint' }, `The ${items.length} most recently seen of ${fmtNumber(data.total)} groups.`) : null;
    return [tableWrap(table, 'Failure groups table'), more].filter(Boolean);
  });

  const statsLoad = section(stats, ctx, async () => {
    const s = await api('GET', '/failures/stats');
    const card = statCard;
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
    const data = await api('GET', '/failures', { query: { status, group_id: group, limit, offset: (page - 1) * limit } });
    const items = Array.isArray(data.items) ? data.items : [];
    const groupNote = group && items.length ? groupPanel(group, items[0], status) : null;
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
      h('td', {}, h('strong', {}, f.error_type ?? ''), h('div', { class: 'sub message-cell' }, f.message ?? ''),
        group ? null : h('div', { class: 'sub' }, link('/failures', 'same cause', {
          href: hashFor('/failures', { status, group_id: f.group_id }), testid: 'failure-same-cause' }))),
      h('td', {}, badge(f.status, null, 'failure-status')),
      h('td', {}, link(`/executions/${enc(f.execution_id)}`, code(f.execution_id))),
      h('td', {}, timeEl(f.created_at))));
    const table = h('table', { class: 'table', testid: 'failures-table' },
      h('caption', { class: 'visually-hidden' }, 'Failures, newest first'),
      h('thead', {}, h('tr', {}, ['Failure', 'Error', 'Status', 'Execution', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows));
    return [groupNote, tableWrap(table, 'Failures table'), pager({
      page, pageSize: limit, total: data.total ?? items.length, noun: 'failures',
      onPage: (n) => navigate(hashFor('/failures', { status, group_id: group, page: n === 1 ? '' : n })),
    })].filter(Boolean);
  });
  await Promise.all([statsLoad, listLoad, groupsLoad]);
}

/** A group's header on its failures' list: what they share, and settle them all. */
function groupPanel(group, sample, status) {
  const settle = async (kind, button) => {
    const verb = kind === 'resolve' ? 'Resolve' : 'Ignore';
    const ok = await confirmDialog({
      title: `${verb} every open failure of this group?`,
      message: [`Each open failure of the group is ${kind}d as if one by one (each sends its webhook).`, `Cause: ${sample.fingerprint ?? ''}`],
      ok: `${verb} all open`,
    });
    if (!ok) return;
    const done = setBusy(button, kind === 'resolve' ? 'Resolving…' : 'Ignoring…');
    try {
      let settled = 0;
      for (;;) {
        const result = await api('POST', `/failures/groups/${enc(group)}/${kind}`);
        settled += result?.settled ?? 0;
        if (!result?.remaining) break;
      }
      rerender(`${settled} failure${settled === 1 ? '' : 's'} ${kind}d`);
    } catch (error) {
      if (button.isConnected) done();
      report(error);
    }
  };
  const resolveAll = h('button', { type: 'button', class: 'button button-primary', testid: 'group-resolve' }, 'Resolve all open');
  const ignoreAll = h('button', { type: 'button', class: 'button', testid: 'group-ignore' }, 'Ignore all open');
  const replayAll = h('button', { type: 'button', class: 'button button-primary', testid: 'group-replay' }, 'Replay failed runs');
  resolveAll.addEventListener('click', () => settle('resolve', resolveAll));
  ignoreAll.addEventListener('click', () => settle('ignore', ignoreAll));
  replayAll.addEventListener('click', () => startBulkReplay(group, sample.fingerprint, replayAll));
  return h('section', { class: 'panel', testid: 'failure-group' },
    h('p', {}, 'Failures of one cause: ', code(sample.fingerprint ?? ''), ' · ',
      link('/failures', 'show every failure', { href: hashFor('/failures', { status }) }), ' · ',
      link('/bulk', 'bulk jobs')),
    h('div', { class: 'actions' }, replayAll, resolveAll, ignoreAll));
}

export async function pageFailure(ctx) {
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
