// Cairn tenant dashboard: ES modules, no framework, no build step, no third-party code.
// This is the entry module (index.html loads it): it wires the pages to the router.
//
// Served at /dashboard (its modules under /dashboard/) on the API's own origin under
//   default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;
//   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'
// so no module uses inline handlers, style attributes, element.style, eval or
// innerHTML: the DOM is built with createElement/textContent (see h() in dom.js), API text is
// never parsed as HTML, and visibility goes through the `hidden` attribute and classes.
//
// The API key lives in sessionStorage only (this tab, until it closes or "Sign out").
// Every API call sends it as X-API-Key to /api/v1 (same origin); any 401 signs out.
//
// Modules (all served flat from /dashboard/, importing each other by relative path):
//   app.js        this entry: the pages by route, and the start
//   router.js     the hash router, the page context, section() for parts of a page
//   api.js        the API client (ApiError, api()), config.json, workflow names
//   session.js    the API key (sessionStorage) and the sign-in page's state
//   messages.js   the error and notice banners, the confirmation dialog
//   ui.js         rendering pieces (badges, fields, tables, pager, form fields)
//   dom.js        h() and the other DOM helpers
//   format.js     numbers, sizes, money, dates, JSON
//   constants.js  statuses, workflow types, plans, page sizes
//   card.js       Stripe.js and the card form of a top-up
//   chart.js      accessible SVG bar charts (with their numbers as a table)
//   live.js       live pages: polling with backoff, paused while the tab is hidden
//   diff.js       what changed between two JSON states (time-sliced)
//   page-*.js     one module per page: signin, overview, executions, execution,
//                 failures, bulk jobs, workflows, billing, keys, webhooks, settings
//
// Routes (location.hash): #/signin, #/overview (after sign-in; ?range=24h|7d|30d),
// #/executions, #/executions/<id> (?checkpoint=<id> shows its state, ?from=<id>&to=<id>
// the diff of two, ?cp_page=N the timeline's page), #/failures,
// #/failures/<id>, #/bulk, #/bulk/<id>, #/workflows, #/workflows/<id>, #/billing, #/keys, #/webhooks,
// #/webhooks/<id>, #/settings. List filters and
// pages live in the hash's query (#/executions?status=paused&page=2), so Back works.
//
// Stable hooks for tests (data-testid):
//   signin-key               the API key input on the sign-in page
//   signin-submit            its submit button
//   signout                  the Sign out button (in the top bar on every signed-in page)
//   nav-overview, nav-executions, nav-failures, nav-workflows, nav-billing, nav-keys, nav-webhooks,
//   nav-settings             the main navigation links
//   error                    the visible error banner (role=alert); the API's detail and field messages
//   notice                   the success banner (role=status)
//   empty                    any empty state (says what to do next)
//   loading                  any loading placeholder
//   pager-prev, pager-next, pager-info   paging controls of a list
//   executions-table         the executions table
//   execution-row            one row of it (data-id = execution id)
//   execution-status         an execution's status badge (in each row, and on the execution page)
//   execution-attempt        the execution page's attempt number
//   execution-filter-status, execution-filter-workflow, execution-filter-after,
//   execution-filter-before, execution-filter-page-size, execution-filter-submit   the list filters
//   checkpoints-table        the execution page's checkpoint timeline
//   checkpoint-row           one checkpoint (data-id, data-sequence; data-current="true" on the current one)
//   view-state               a checkpoint's "View state" button
//   replay-here              a checkpoint's "Replay from here" button
//   replay-preview           in its confirmation: the steps and tool calls the replay runs again
//   rollback-here            a checkpoint's "Roll back to here" button
//   state-view               the <pre> showing the loaded checkpoint state (data-checkpoint-id)
//   confirm-ok, confirm-cancel   the buttons of the confirmation <dialog>
//   stats-total, stats-open, stats-resolved, stats-ignored, stats-rate   failure statistics
//   failure-filter-status    the failures list's status filter
//   failure-row              one failure (data-id)
//   failure-status           a failure's status badge (in each row, and on the failure page)
//   failure-traceback        the failure page's traceback <pre>
//   failure-resolve, failure-ignore   the failure page's Resolve and Ignore buttons
//   group-replay, group-resolve, group-ignore   a failure group's Replay failed runs, Resolve and Ignore all open
//   bulk-table, bulk-row (data-id)   the bulk jobs list
//   bulk-status, bulk-progress, bulk-counts, bulk-reasons, bulk-cancel   a bulk job's page
//   workflow-filter-status   the workflows list's status filter
//   workflow-row             one workflow (data-id)
//   workflow-create-name, workflow-create-type, workflow-create-description,
//   workflow-create-definition, workflow-create-submit   the create form
//   workflow-status          a workflow's status badge
//   workflow-edit-name, workflow-edit-description, workflow-edit-definition, workflow-save
//   workflow-publish, workflow-archive, workflow-draft, workflow-delete   the workflow page's actions
//   balance                  the credit balance (credits)
//   balance-usd              the balance in US dollars
//   transactions-table, transaction-row (data-id)
//   topup-amount, topup-submit, topup-result   the top-up form and what it answered
//   subscription             the subscription panel
//   subscription-status      the subscription's status badge
//   plan-developer, plan-pro, plan-enterprise   checkout buttons (no subscription, or a cancelled one)
//   subscription-portal, subscription-cancel, subscription-cancel-now
//   key-row                  one API key (data-id; data-live="true" while live)
//   key-create-name, key-create-submit   the create form
//   key-secret               the new key's secret, shown once (data-key-id = its id)
//   key-copy                 its Copy button
//   key-secret-dismiss       "I have saved it" (hides the secret)
//   key-revoke               a live key's Revoke button
//   webhooks-table           the webhook endpoints table
//   webhook-row              one endpoint (data-id; data-enabled="true" while enabled)
//   webhook-link             its URL, a link to its deliveries (#/webhooks/<id>)
//   webhook-status           its enabled/disabled badge; webhook-disabled-reason why Cairn disabled it
//   range-24h, range-7d, range-30d   the overview's time ranges (aria-current on the chosen one)
//   overview-executions, overview-failures, overview-open-failures, overview-credits   its figures
//   overview-open-link       the link to the open failures
//   chart-executions, chart-failures, chart-credits   the overview's charts (<figure>); each bar
//                            data-testid="bar" with data-start, data-series, data-value; each
//                            chart's numbers in <testid>-table (a row per bucket, data-start)
//   live-status              a live page's status line (data-state live | paused | error)
//   diff-from, diff-to, diff-submit   the execution page's checkpoint comparison
//   diff-summary, diff-table, diff-row (data-path, data-kind added | removed | changed)
//   webhook-create-url, webhook-create-type, webhook-create-submit   the add form (a checkbox per event type)
//   webhook-secret, webhook-copy, webhook-secret-dismiss   a new endpoint's secret, shown once (data-webhook-id)
//   webhook-test, webhook-toggle, webhook-delete   an endpoint's Send test, Disable/Enable, Delete buttons
//   deliveries-table, delivery-row (data-id, data-status), delivery-status, delivery-attempts, delivery-last,
//   delivery-retry, deliveries-refresh   an endpoint's deliveries
//   retention-summary, retention-days, retention-checkpoints, retention-checkpoint-days,
//   retention-save           the settings page's retention form
//   execution-expires        the execution page's expiry (once ended)
//   workflow-retention       a workflow page's retention (its own, or the tenant's)

import { onUnauthorized } from './api.js';
import { $ } from './dom.js';
import { pageBilling } from './page-billing.js';
import { pageBulkJob, pageBulkJobs } from './page-bulk.js';
import { pageExecution } from './page-execution.js';
import { pageExecutions } from './page-executions.js';
import { pageFailure, pageFailures } from './page-failures.js';
import { pageKeys } from './page-keys.js';
import { pageOverview } from './page-overview.js';
import { pageWebhook, pageWebhooks } from './page-webhooks.js';
import { pageSettings } from './page-settings.js';
import { pageSignin } from './page-signin.js';
import { pageWorkflow, pageWorkflows } from './page-workflows.js';
import { endSession, signOut, startRouter } from './router.js';

const PAGES = {
  signin: { title: 'Sign in', render: pageSignin, public: true },
  overview: { title: 'Overview', render: pageOverview, nav: 'overview' },
  executions: { title: 'Executions', render: pageExecutions, detail: pageExecution, nav: 'executions' },
  failures: { title: 'Failures', render: pageFailures, detail: pageFailure, nav: 'failures' },
  bulk: { title: 'Bulk jobs', render: pageBulkJobs, detail: pageBulkJob, nav: 'failures' },
  workflows: { title: 'Workflows', render: pageWorkflows, detail: pageWorkflow, nav: 'workflows' },
  billing: { title: 'Billing', render: pageBilling, nav: 'billing' },
  keys: { title: 'API keys', render: pageKeys, nav: 'keys' },
  webhooks: { title: 'Webhooks', render: pageWebhooks, detail: pageWebhook, nav: 'webhooks' },
  settings: { title: 'Settings', render: pageSettings, nav: 'settings' },
};

function start() {
  onUnauthorized(endSession);
  $('#signout').addEventListener('click', signOut);
  startRouter(PAGES);
}

start();
