// The executions list (#/executions): filters in the hash's query, a page of executions,
// and for a new account, how to start the first one.

import { API, api, workflowNames } from './api.js';
import { EXECUTION_STATUSES, PAGE_SIZES } from './constants.js';
import { enc, h, hashFor, link, positiveInt } from './dom.js';
import { live, swapKeepingFocus } from './live.js';
import { fmtNumber } from './format.js';
import { navigate, section } from './router.js';
import { badge, code, emptyState, labelled, pageHeader, pager, selectEl, tableWrap, tagChips, timeEl } from './ui.js';

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

export async function pageExecutions(ctx) {
  const p = ctx.route.params;
  const filters = {
    status: EXECUTION_STATUSES.includes(p.get('status')) ? p.get('status') : '',
    workflow_id: (p.get('workflow_id') || '').trim(),
    after: p.get('after') || '',
    before: p.get('before') || '',
    tags: p.getAll('tag').filter(Boolean),
  };
  const page = positiveInt(p.get('page'), 1);
  const pageSize = PAGE_SIZES.includes(Number(p.get('page_size'))) ? Number(p.get('page_size')) : 20;
  const filtered = Boolean(filters.status || filters.workflow_id || filters.after || filters.before || filters.tags.length);

  const statusSelect = selectEl({ id: 'ex-status', name: 'status', testid: 'execution-filter-status' },
    [['', 'Any status'], ...EXECUTION_STATUSES.map((s) => [s, s[0].toUpperCase() + s.slice(1)])], filters.status);
  const workflowInput = h('input', { id: 'ex-workflow', name: 'workflow_id', type: 'text', testid: 'execution-filter-workflow', value: filters.workflow_id, placeholder: 'wf_…', autocomplete: 'off', spellcheck: 'false' });
  const afterInput = h('input', { id: 'ex-after', name: 'after', type: 'datetime-local', step: '1', testid: 'execution-filter-after', value: filters.after });
  const beforeInput = h('input', { id: 'ex-before', name: 'before', type: 'datetime-local', step: '1', testid: 'execution-filter-before', value: filters.before });
  // One more tag to filter by; those already chosen are chips below the form.
  const tagInput = h('input', { id: 'ex-tag', name: 'tag', type: 'text', testid: 'execution-filter-tag', placeholder: 'team:search', autocomplete: 'off', spellcheck: 'false' });
  const sizeSelect = selectEl({ id: 'ex-size', name: 'page_size', testid: 'execution-filter-page-size' },
    PAGE_SIZES.map((n) => [String(n), String(n)]), String(pageSize));

  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter executions' },
    labelled('ex-status', 'Status', statusSelect),
    labelled('ex-workflow', 'Workflow id', workflowInput),
    labelled('ex-after', 'Created after', afterInput),
    labelled('ex-before', 'Created before', beforeInput),
    labelled('ex-tag', 'Tag', tagInput),
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
      tag: [...filters.tags, tagInput.value.trim()].filter((t, i, all) => t && all.indexOf(t) === i),
      page_size: sizeSelect.value === '20' ? '' : sizeSelect.value,
    }));
  });
  const without = (tag) => hashFor('/executions', {
    status: filters.status, workflow_id: filters.workflow_id, after: filters.after, before: filters.before,
    tag: filters.tags.filter((t) => t !== tag), page_size: pageSize === 20 ? '' : pageSize,
  });
  const activeTags = filters.tags.length
    ? h('p', { class: 'tags', testid: 'active-tags' }, 'Tagged ', filters.tags.map((tag) =>
      h('a', { class: 'tag', href: without(tag), testid: 'active-tag', 'data-tag': tag, 'aria-label': `Remove the filter ${tag}` }, `${tag} ×`)))
    : null;

  const results = h('div', { class: 'results' });
  // A time in the address that is not one is this section's error (the form stays).
  const query = () => ({
    status: filters.status,
    workflow_id: filters.workflow_id,
    created_after: toIso(filters.after, 'Created after'),
    created_before: toIso(filters.before, 'Created before'),
    tag: filters.tags,
    page,
    page_size: pageSize,
  });
  const fetchPage = () => Promise.all([api('GET', '/executions', { query: query() }), workflowNames()]);
  const signature = ([data]) => JSON.stringify([data.total, data.items]);
  let shown = null;
  // New executions and status changes appear by themselves (live.js).
  const status = live(ctx, async () => {
    const found = await fetchPage();
    if (ctx.stale() || signature(found) === shown) return false;
    shown = signature(found);
    swapKeepingFocus(results, showPage(found));
    return true;
  }, { what: 'this list' });
  ctx.mount(pageHeader('Executions'), form, activeTags, status, results);

  const showPage = ([data, names]) => {
    const items = Array.isArray(data.items) ? data.items : [];
    const goPage = (n) => navigate(hashFor('/executions', {
      ...{ status: filters.status, workflow_id: filters.workflow_id, after: filters.after, before: filters.before, tag: filters.tags },
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
        h('td', {}, timeEl(ex.created_at)),
        h('td', {}, tagChips(ex.tags, filters.tags)));
    });
    const table = h('table', { class: 'table', testid: 'executions-table' },
      h('caption', { class: 'visually-hidden' }, 'Executions, newest first'),
      h('thead', {}, h('tr', {}, ['Execution', 'Workflow', 'Status', 'Attempt', 'Checkpoints', 'Created', 'Tags'].map((t, i) =>
        h('th', { scope: 'col', class: i === 3 || i === 4 ? 'num' : null }, t)))),
      h('tbody', {}, rows));
    return [tableWrap(table, 'Executions table'), pager({ page, pageSize, total: data.total ?? items.length, noun: 'executions', onPage: goPage })];
  };

  await section(results, ctx, async () => {
    const found = await fetchPage();
    shown = signature(found);
    return showPage(found);
  });
}
