// Workflows (#/workflows, #/workflows/<id>): the list and the create form, and one
// workflow to edit, publish, archive, move back to draft or delete.

import { api, staleWorkflowNames } from './api.js';
import { WORKFLOW_STATUSES, WORKFLOW_TYPES } from './constants.js';
import { enc, h, hashFor, link, listQuery, setBusy } from './dom.js';
import { fmtNumber, prettyJson } from './format.js';
import { clearMessages, confirmDialog, report, required, showError, showNotice } from './messages.js';
import { navigate, rerender, section } from './router.js';
import { backLink, badge, code, emptyState, field, jsonBlock, labelled, pageHeader, pager, selectEl, statusFilter, tableWrap, timeEl } from './ui.js';

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

export async function pageWorkflows(ctx) {
  const { status, page } = listQuery(ctx.route.params, WORKFLOW_STATUSES);
  const pageSize = 20;

  const filterForm = statusFilter({
    id: 'wf-status', testid: 'workflow-filter-status', noun: 'workflows', statuses: WORKFLOW_STATUSES, current: status,
    onApply: (chosen) => navigate(hashFor('/workflows', { status: chosen })),
  });

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
    const body = { name: required(nameInput, 'Give the workflow a name.'), workflow_type: typeSelect.value };
    if (!body.name) return;
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
      staleWorkflowNames();
      navigate(`#/workflows/${enc(wf.id)}`, `Workflow “${wf.name}” created as a draft.`);
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

export async function pageWorkflow(ctx) {
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
    const name = required(nameInput, 'The name cannot be empty.');
    if (!name) return;
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
      staleWorkflowNames();
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
      staleWorkflowNames();
      navigate('#/workflows', `Workflow “${wf.name}” deleted.`);
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
        field('Retention', h('span', { testid: 'workflow-retention' }, retentionText(wf.retention), ' (',
          link('/settings', 'the tenant\'s settings'), ')')),
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

// A workflow's own retention in words, or that the tenant's applies.
function retentionText(r) {
  if (!r) return 'the tenant\'s';
  const days = r.executions_days == null ? 'as long as the plan allows' : `${fmtNumber(r.executions_days)} days`;
  const checkpoints = { all: 'every checkpoint', keep_latest: 'the latest checkpoint', days: `the others ${fmtNumber(r.checkpoints_days ?? 0)} days` };
  return `its own: kept ${days}, ${checkpoints[r.checkpoints] ?? r.checkpoints}`;
}
