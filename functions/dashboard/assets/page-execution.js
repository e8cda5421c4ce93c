// One execution (#/executions/<id>): its fields, input and output, its checkpoints with
// their states, what changed between two of them, and replay or roll back from one. The
// state shown (?checkpoint=<id>), the comparison (?from=<id>&to=<id>) and the timeline's
// page (?cp_page=N) are in the address, so Back, Forward and a shared link restore them.
// While the execution is running or paused, the page updates by itself (live.js).

import { API, api } from './api.js';
import { STATE_PREVIEW_CHARS } from './constants.js';
import { DIFF_MAX_CHANGES, diffJson } from './diff.js';
import { enc, h, hashFor, link, positiveInt, setBusy } from './dom.js';
import { fmtBytes, fmtNumber, prettyJson } from './format.js';
import { live } from './live.js';
import { confirmDialog, report } from './messages.js';
import { navigate, rerender, section } from './router.js';
import {
  backLink, badge, code, emptyState, field, jsonBlock, labelled, loadingState, pageHeader, pager, tableWrap, tagChips, timeEl,
} from './ui.js';

/** A value as one line of compact JSON, cut at `max` characters. */
function preview(value, max = 240) {
  if (value === undefined) return h('span', { class: 'muted' }, '—');
  const text = JSON.stringify(value);
  return h('code', { class: 'diff-value' }, text.length > max ? `${text.slice(0, max)}…` : text);
}

/** Loads two checkpoints' states and shows what changed from the first to the second. */
async function compare(ctx, fromId, toId, view) {
  view.setAttribute('aria-busy', 'true');
  view.replaceChildren(loadingState('Loading both states…'));
  try {
    const read = (cpId) => api('GET', `/checkpoints/${enc(cpId)}`, { query: { include_state: 'true' } });
    const [a, b] = await Promise.all([read(fromId), read(toId)]);
    if (ctx.stale()) return;
    view.replaceChildren(loadingState('Comparing…'));
    const { changes, counts, more } = await diffJson(a.state ?? null, b.state ?? null, { stale: ctx.stale });
    if (ctx.stale()) return;
    const name = (cp) => `#${cp.sequence}${cp.name ? ` “${cp.name}”` : ''}`;
    const summary = h('p', { testid: 'diff-summary', 'data-added': counts.added, 'data-removed': counts.removed, 'data-changed': counts.changed },
      `From ${name(a)} to ${name(b)}: `, h('strong', {}, `${fmtNumber(counts.added)} added, ${fmtNumber(counts.removed)} removed, ${fmtNumber(counts.changed)} changed`),
      changes.length === 0 ? ' (the states are equal).' : '.');
    if (changes.length === 0) {
      view.replaceChildren(summary);
      return;
    }
    const table = h('table', { class: 'table table-compact', testid: 'diff-table' },
      h('caption', { class: 'visually-hidden' }, `Changes from ${name(a)} to ${name(b)}`),
      h('thead', {}, h('tr', {}, ['Path', 'Change', `Before (${name(a)})`, `After (${name(b)})`].map((text) => h('th', { scope: 'col' }, text)))),
      h('tbody', {}, changes.map((c) => h('tr', { testid: 'diff-row', 'data-path': c.path, 'data-kind': c.kind, class: `diff-${c.kind}` },
        h('td', {}, code(c.path)),
        h('td', {}, c.kind),
        h('td', {}, preview(c.before)),
        h('td', {}, preview(c.after))))));
    view.replaceChildren(summary, h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Changes' }, table));
    if (more > 0) view.append(h('p', { class: 'hint' }, `The first ${fmtNumber(DIFF_MAX_CHANGES)} changes are shown; ${fmtNumber(more)} more are not.`));
  } catch (error) {
    if (ctx.stale() || error?.handled) return;
    report(error);
    view.replaceChildren(h('p', { class: 'state-error' }, 'These checkpoints could not be compared: ', error?.message || String(error)));
  } finally {
    view.removeAttribute('aria-busy');
  }
}

function fieldsOf(ex) {
  return h('dl', { class: 'fields' },
    field('Execution', code(ex.id)),
    field('Workflow', link(`/workflows/${enc(ex.workflow_id)}`, code(ex.workflow_id)), ' · ',
      link('/executions', 'its executions', { href: hashFor('/executions', { workflow_id: ex.workflow_id }) })),
    field('Status', badge(ex.status, null, 'execution-status')),
    field('Attempt', h('span', { testid: 'execution-attempt' }, fmtNumber(ex.attempt))),
    field('Checkpoints', fmtNumber(ex.checkpoint_count)),
    field('Current checkpoint', ex.current_checkpoint_id ? code(ex.current_checkpoint_id) : h('span', { class: 'muted' }, 'none (the start)')),
    ex.key ? field('Key', code(ex.key)) : null,
    ex.tags && Object.keys(ex.tags).length ? field('Tags', tagChips(ex.tags)) : null,
    field('Created', timeEl(ex.created_at)),
    field('Updated', timeEl(ex.updated_at)),
    field('Ended', timeEl(ex.ended_at)),
    ex.expires_at ? field('Expires', h('span', { testid: 'execution-expires' }, timeEl(ex.expires_at), ' (',
      link('/settings', 'retention'), ')')) : null,
    ex.cancel_reason ? field('Cancel reason', ex.cancel_reason) : null,
  );
}

/** The address of this page with some of its parameters changed ('' drops one). */
function here(ctx, changes) {
  const params = Object.fromEntries(ctx.route.params);
  return hashFor(`/executions/${enc(ctx.route.id)}`, { ...params, ...changes });
}

const LIVE_STATUSES = new Set(['running', 'paused']);

function errorPanelOf(ex) {
  return ex.error
    ? h('section', { class: 'panel panel-error', 'aria-labelledby': 'ex-error-title' },
      h('h2', { id: 'ex-error-title' }, 'Error'),
      h('p', {}, h('strong', {}, ex.error.error_type ?? 'Error'), ': ', ex.error.message ?? ''),
      h('p', {}, link('/failures', 'See the failures', { href: hashFor('/failures', { status: 'open' }) }), ' for its traceback and recovery commands.'))
    : null;
}

export async function pageExecution(ctx) {
  const id = ctx.route.id;
  const p = ctx.route.params;
  let ex = await api('GET', `/executions/${enc(id)}`);
  if (ctx.stale()) return;
  const fields = h('div', {}, fieldsOf(ex));
  const headerBadge = h('span', {}, badge(ex.status, null, null));

  const errorBox = h('div', {}, errorPanelOf(ex));
  const outputBox = h('div', {}, jsonBlock(ex.output, 'execution-output'));

  const metadata = ex.metadata && Object.keys(ex.metadata).length
    ? h('section', { class: 'panel' }, h('h2', {}, 'Metadata'), jsonBlock(ex.metadata))
    : null;

  const timeline = h('div', { class: 'timeline' });
  const stateView = h('pre', { class: 'json state', testid: 'state-view', tabindex: '0', hidden: true });
  const stateInfo = h('p', { class: 'muted', id: 'state-info' }, 'Choose “View state” on a checkpoint to load its state here.');
  const stateMore = h('div', { class: 'actions', hidden: true });

  // Compare: two of the timeline's checkpoints (filled in when it loads).
  const fromSelect = h('select', { id: 'diff-from', name: 'from', testid: 'diff-from' });
  const toSelect = h('select', { id: 'diff-to', name: 'to', testid: 'diff-to' });
  const compareForm = h('form', { class: 'filters', 'aria-label': 'Compare two checkpoints' },
    labelled('diff-from', 'From', fromSelect),
    labelled('diff-to', 'To', toSelect),
    h('div', { class: 'filter-actions' },
      h('button', { type: 'submit', class: 'button button-primary', testid: 'diff-submit' }, 'Compare')));
  compareForm.addEventListener('submit', (event) => {
    event.preventDefault();
    if (fromSelect.value && toSelect.value) navigate(here(ctx, { from: fromSelect.value, to: toSelect.value }));
  });
  const diffView = h('div', { class: 'diff' },
    h('p', { class: 'muted' }, 'Choose two checkpoints to see what changed in the state between them.'));
  const fillCompare = (items) => {
    const options = items.map((cp) => [cp.id, `#${cp.sequence}${cp.name ? ` ${cp.name}` : ''}`]);
    for (const [select, fallback] of [[fromSelect, items.at(-2)], [toSelect, items.at(-1)]]) {
      // A live refresh keeps what the person chose; the first fill takes the address's.
      const chosen = select.options.length ? select.value : '';
      select.replaceChildren(...options.map(([value, label]) => h('option', { value }, label)));
      const wanted = chosen || p.get(select.name) || fallback?.id || '';
      if (options.some(([value]) => value === wanted)) select.value = wanted;
    }
    compareForm.hidden = items.length < 2;
  };

  // Running or paused: the fields and the timeline follow the execution by themselves.
  const signature = (e) => JSON.stringify([e.status, e.attempt, e.updated_at, e.checkpoint_count, e.current_checkpoint_id]);
  const liveStatus = LIVE_STATUSES.has(ex.status) ? live(ctx, async () => {
    const now = await api('GET', `/executions/${enc(id)}`);
    if (ctx.stale() || signature(now) === signature(ex)) return false;
    ex = now;
    fields.replaceChildren(fieldsOf(ex));
    errorBox.replaceChildren(...[errorPanelOf(ex)].filter(Boolean));
    outputBox.replaceChildren(jsonBlock(ex.output, 'execution-output'));
    headerBadge.replaceChildren(badge(ex.status, null, null));
    await section(timeline, ctx, loadCheckpoints, { quiet: true });
    return LIVE_STATUSES.has(ex.status) ? true : 'stop';
  }, { what: 'this execution' }) : null;

  ctx.mount(
    backLink('/executions', 'Executions'),
    pageHeader('Execution', headerBadge, liveStatus),
    h('section', { class: 'panel' }, fields),
    errorBox,
    h('div', { class: 'two-col' },
      h('section', { class: 'panel' }, h('h2', {}, 'Input'), jsonBlock(ex.input, 'execution-input')),
      h('section', { class: 'panel' }, h('h2', {}, 'Output'), outputBox)),
    metadata,
    h('section', { class: 'panel', 'aria-labelledby': 'cp-title' },
      h('h2', { id: 'cp-title' }, 'Checkpoints'),
      h('p', { class: 'hint' }, 'Replay runs the execution again from a checkpoint (failed or paused executions; 1 credit). Roll back pauses it at a checkpoint and deletes every later checkpoint with its state (running, paused or failed executions).'),
      timeline),
    h('section', { class: 'panel', 'aria-labelledby': 'diff-title' },
      h('h2', { id: 'diff-title' }, 'Compare two checkpoints'), compareForm, diffView),
    h('section', { class: 'panel', 'aria-labelledby': 'state-title' },
      h('h2', { id: 'state-title' }, 'State'), stateInfo, stateView, stateMore),
  );

  const limit = 50;
  const offset = (positiveInt(p.get('cp_page'), 1) - 1) * limit;

  async function showState(cpId) {
    stateInfo.textContent = 'Loading the state…';
    try {
      const full = await api('GET', `/checkpoints/${enc(cpId)}`, { query: { include_state: 'true' } });
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
      if (ctx.stale()) return;
      stateInfo.textContent = 'The state could not be loaded.';
      report(error);
    }
  }

  /** What a replay from `cp` runs again (the API's replay preview), as a paragraph. */
  async function previewOf(cp) {
    try {
      const p = await api('GET', `/executions/${enc(ex.id)}/replay-preview`, { query: { checkpoint_id: cp.id } });
      const listed = (counted) => counted.map((c) => `${c.name} ×${fmtNumber(c.count)}`).join(', ') || 'none recorded';
      const count = `${fmtNumber(p.checkpoints_after)}${p.more ? '+' : ''}`;
      return h('p', { testid: 'replay-preview' },
        `Runs again ${count} recorded checkpoint${p.checkpoints_after === 1 ? '' : 's'}: steps ${listed(p.steps)}; tool calls ${listed(p.tool_calls)}.`);
    } catch {
      return null;
    }
  }

  async function act(kind, cp, button) {
    const replay = kind === 'replay';
    const label = `checkpoint #${cp.sequence}${cp.name ? ` “${cp.name}”` : ''}`;
    const preview = replay ? await previewOf(cp) : null;
    const ok = await confirmDialog(replay
      ? {
        title: 'Replay from this checkpoint?',
        message: [`The execution (now ${ex.status}) runs again from ${label} as attempt ${ex.attempt + 1}.`, preview,
          'This costs 1 credit. Only failed or paused executions can be replayed.'].filter(Boolean),
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
      viewButton.addEventListener('click', () => navigate(here(ctx, { checkpoint: cp.id })));
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
    fillCompare(items);
    const total = data.total ?? items.length;
    const nodes = [tableWrap(table, 'Checkpoints table')];
    if (total > limit) {
      nodes.push(pager({
        page: Math.floor(offset / limit) + 1, pageSize: limit, total, noun: 'checkpoints',
        onPage: (n) => navigate(here(ctx, { cp_page: n === 1 ? '' : n })),
      }));
    }
    return nodes;
  };
  await section(timeline, ctx, loadCheckpoints);
  if (ctx.stale()) return;
  if (p.get('checkpoint')) showState(p.get('checkpoint'));
  if (p.get('from') && p.get('to')) compare(ctx, p.get('from'), p.get('to'), diffView);
}
