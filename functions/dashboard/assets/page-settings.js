// Settings (#/settings): how long ended executions and their checkpoints are kept
// (GET/PUT /settings/retention; docs/retention.md), and the account's deletion
// (POST /account/deletion, behind the typed confirmation the API asks for).

import { api } from './api.js';
import { h, setBusy } from './dom.js';
import { fmtNumber } from './format.js';
import { clearMessages, confirmDialog, report, showNotice } from './messages.js';
import { section, signOut } from './router.js';
import { labelled, pageHeader, selectEl, timeEl } from './ui.js';

/** What the API asks a tenant to send to confirm its deletion. */
const DELETION_CONFIRMATION = 'delete my account';

const CHECKPOINTS = [
  ['all', 'Keep every checkpoint as long as the execution'],
  ['keep_latest', 'Keep only the latest checkpoint once it ends'],
  ['days', 'Keep the others for some days after it ends'],
];

export async function pageSettings(ctx) {
  const summary = h('div', { testid: 'retention-summary' });
  const daysInput = h('input', { id: 'retention-days', name: 'executions_days', type: 'number', min: '1', step: '1', inputmode: 'numeric', testid: 'retention-days' });
  const checkpoints = selectEl({ id: 'retention-checkpoints', name: 'checkpoints', testid: 'retention-checkpoints' }, CHECKPOINTS, 'all');
  const checkpointDays = h('input', { id: 'retention-checkpoint-days', name: 'checkpoints_days', type: 'number', min: '1', max: '3650', step: '1', inputmode: 'numeric', testid: 'retention-checkpoint-days' });
  const checkpointDaysField = labelled('retention-checkpoint-days', 'Days the other checkpoints stay', checkpointDays);
  const saveButton = h('button', { type: 'submit', class: 'button button-primary', testid: 'retention-save' }, 'Save');
  const form = h('form', { class: 'form', novalidate: true },
    labelled('retention-days', 'Days an ended execution is kept', daysInput, 'Empty: as long as your plan allows.'),
    labelled('retention-checkpoints', 'Checkpoints of an ended execution', checkpoints),
    checkpointDaysField,
    h('div', { class: 'actions' }, saveButton));
  const showDays = () => { checkpointDaysField.hidden = checkpoints.value !== 'days'; };
  checkpoints.addEventListener('change', showDays);

  const fill = (r) => {
    daysInput.max = String(r.max_executions_days);
    daysInput.placeholder = String(r.max_executions_days);
    daysInput.value = r.executions_days == null ? '' : String(r.executions_days);
    checkpoints.value = r.checkpoints;
    checkpointDays.value = r.checkpoints_days == null ? '' : String(r.checkpoints_days);
    showDays();
  };
  const describe = (r) => h('p', {},
    `Ended executions are kept ${fmtNumber(r.effective_executions_days)} days, then deleted with their checkpoints. `,
    `Your plan (${r.plan ?? 'credits only'}) keeps them at most ${fmtNumber(r.max_executions_days)} days. `,
    r.updated_at ? ['Last changed ', timeEl(r.updated_at), '.'] : 'These are the defaults.');

  const load = () => section(summary, ctx, async () => {
    const r = await api('GET', '/settings/retention');
    fill(r);
    return describe(r);
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    const body = { checkpoints: checkpoints.value };
    body.executions_days = daysInput.value === '' ? null : Number(daysInput.value);
    if (checkpoints.value === 'days') body.checkpoints_days = checkpointDays.value === '' ? null : Number(checkpointDays.value);
    const done = setBusy(saveButton, 'Saving…');
    try {
      const r = await api('PUT', '/settings/retention', { body });
      fill(r);
      summary.replaceChildren(describe(r));
      showNotice('Retention saved: it applies to executions that end from now on.');
    } catch (error) {
      report(error);
    } finally {
      if (saveButton.isConnected) done();
    }
  });

  ctx.mount(
    pageHeader('Settings'),
    h('section', { class: 'panel', 'aria-labelledby': 'retention-title' },
      h('h2', { id: 'retention-title' }, 'Retention'), summary, form),
    deletionPanel(),
  );
  await load();
}

/** "Delete account": the typed confirmation, a last question, then every key is revoked
 * (this session's too) and the records are deleted within minutes. */
function deletionPanel() {
  const typed = h('input', { id: 'deletion-confirm', name: 'confirm', type: 'text', autocomplete: 'off', spellcheck: 'false', testid: 'deletion-confirm' });
  const button = h('button', { type: 'submit', class: 'button button-danger', disabled: true, testid: 'deletion-submit' }, 'Delete account');
  typed.addEventListener('input', () => { button.disabled = typed.value !== DELETION_CONFIRMATION; });
  const form = h('form', { class: 'form', novalidate: true },
    labelled('deletion-confirm', `Type "${DELETION_CONFIRMATION}" to confirm`, typed),
    h('div', { class: 'actions' }, button));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearMessages();
    if (typed.value !== DELETION_CONFIRMATION) return;
    const sure = await confirmDialog({
      title: 'Delete this account?',
      message: ['Every API key is revoked at once, this session\'s too.',
        'Every workflow, execution, checkpoint, failure, webhook endpoint and ledger entry is then deleted for good.'],
      ok: 'Delete account',
      danger: true,
    });
    if (!sure) return;
    const done = setBusy(button, 'Deleting…');
    try {
      const r = await api('POST', '/account/deletion', { body: { confirm: typed.value } });
      signOut(`The account's deletion was asked for at ${r.requested_at}: ${fmtNumber(r.keys_revoked)} keys are revoked and every record is deleted within minutes.`);
    } catch (error) {
      report(error);
      if (button.isConnected) done();
    }
  });
  return h('section', { class: 'panel', 'aria-labelledby': 'deletion-title', testid: 'deletion' },
    h('h2', { id: 'deletion-title' }, 'Delete account'),
    h('p', {}, 'Deletes every record of this account for good, and revokes every API key. ',
      'Export first to keep a copy (cairn export). A live subscription must be cancelled first.'),
    form);
}
