// One execution (#/executions/<id>): its fields, input and output, its checkpoints with
// their states, and replay or roll back from a checkpoint.

import { API, api } from './api.js';
import { STATE_PREVIEW_CHARS } from './constants.js';
import { enc, h, hashFor, link, setBusy } from './dom.js';
import { fmtBytes, fmtNumber, prettyJson } from './format.js';
import { confirmDialog, report } from './messages.js';
import { rerender, section } from './router.js';
import { backLink, badge, code, emptyState, field, jsonBlock, pageHeader, pager, tableWrap, timeEl } from './ui.js';

export async function pageExecution(ctx) {
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
