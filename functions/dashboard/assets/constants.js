// The API's vocabulary as the dashboard shows it: statuses, workflow types, plans, page
// sizes and the badges that have a colour of their own.

export const EXECUTION_STATUSES = ['running', 'paused', 'failed', 'completed', 'cancelled'];
export const FAILURE_STATUSES = ['open', 'resolved', 'ignored'];
export const WORKFLOW_STATUSES = ['draft', 'published', 'archived'];
export const WORKFLOW_TYPES = [
  ['crewai', 'CrewAI'],
  ['langgraph', 'LangGraph'],
  ['autogen', 'AutoGen'],
  ['semantic_kernel', 'Semantic Kernel'],
  ['custom', 'Custom'],
];
export const PLANS = [
  ['developer', 'Developer', 1000],
  ['pro', 'Pro', 10000],
  ['enterprise', 'Enterprise', 100000],
];
export const PAGE_SIZES = [10, 20, 50, 100];
// The areas a key's scopes name (`<area>:read`, `<area>:write`), with their labels.
export const SCOPE_AREAS = [
  ['workflows', 'Workflows'], ['executions', 'Executions'], ['checkpoints', 'Checkpoints'],
  ['failures', 'Failures'], ['billing', 'Billing'], ['keys', 'API keys'], ['webhooks', 'Webhooks'],
];
export const WEBHOOK_EVENT_TYPES = [
  'execution.started', 'execution.completed', 'execution.failed', 'execution.paused',
  'execution.cancelled', 'execution.replayed', 'execution.rolled_back',
  'failure.created', 'failure.resolved', 'failure.ignored',
  'credits.added', 'credits.low', 'checkpoint.created',
];
export const KNOWN_BADGES = new Set([
  ...EXECUTION_STATUSES, ...FAILURE_STATUSES, ...WORKFLOW_STATUSES,
  'active', 'trialing', 'past_due', 'cancel_at_period_end', 'live', 'revoked', 'current',
  'pending', 'completed', 'topup', 'usage', 'subscription', 'refund', 'dispute',
]);
// A state shown in full up to this many characters of pretty JSON; beyond, on request.
export const STATE_PREVIEW_CHARS = 200000;
