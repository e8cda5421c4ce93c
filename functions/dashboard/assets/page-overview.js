// The overview (#/overview, the first page after sign-in): is something going wrong,
// since when. Executions started per hour or day by their status now, failures recorded,
// credits used, and the open failures, over the last 24 hours, 7 days or 30 days
// (#/overview?range=24h|7d|30d). Each bar links to the executions list of its hour or day.

import { api } from './api.js';
import { barChart } from './chart.js';
import { EXECUTION_STATUSES } from './constants.js';
import { h, hashFor, link } from './dom.js';
import { fmtNumber } from './format.js';
import { section } from './router.js';
import { pageHeader, statCard } from './ui.js';

const HOUR = 3600 * 1000;
const DAY = 24 * HOUR;

// Each range: its bucket, and how many buckets, the current (still filling) one last.
export const RANGES = [
  { key: '24h', label: 'Last 24 hours', bucket: 'hour', count: 24 },
  { key: '7d', label: 'Last 7 days', bucket: 'day', count: 7 },
  { key: '30d', label: 'Last 30 days', bucket: 'day', count: 30 },
];

const hourLabel = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', timeZone: 'UTC' });
const dayLabel = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
const longHour = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });
const longDay = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric', year: 'numeric', timeZone: 'UTC' });

/** The window of a range ending with the current bucket, in whole UTC buckets: both
 * series are asked for the same one (not each up to the server's own "now"). */
function windowOf(range, now = Date.now()) {
  const unit = range.bucket === 'hour' ? HOUR : DAY;
  const current = Math.floor(now / unit);
  return {
    bucket: range.bucket,
    created_after: new Date((current - (range.count - 1)) * unit).toISOString(),
    created_before: new Date((current + 1) * unit).toISOString(),
  };
}

/** A time as the executions list's filter takes it (datetime-local, this browser's zone). */
function localInput(date) {
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

function bucketOf(b, hourly, values) {
  const start = new Date(b.start);
  const end = new Date(b.end);
  return {
    start: b.start,
    label: (hourly ? hourLabel : dayLabel).format(start),
    long: `${(hourly ? longHour : longDay).format(start)}${hourly ? ' UTC' : ''}`,
    // The list's window is exclusive at both ends: from 1 ms before the bucket to its end.
    href: hashFor('/executions', { after: localInput(new Date(start.getTime() - 1)), before: localInput(end) }),
    values,
  };
}

export async function pageOverview(ctx) {
  const range = RANGES.find((r) => r.key === ctx.route.params.get('range')) || RANGES[2];
  const hourly = range.bucket === 'hour';
  const ranges = h('nav', { class: 'segmented', 'aria-label': 'Time range' },
    RANGES.map((r) => link('/overview', r.label, {
      href: hashFor('/overview', { range: r.key === '30d' ? '' : r.key }),
      class: 'segment', testid: `range-${r.key}`, 'aria-current': r === range ? 'page' : null,
    })));
  const figures = h('div', { class: 'stats', testid: 'overview-figures' });
  const charts = h('div', { class: 'charts' });
  ctx.mount(pageHeader('Overview', ranges), figures, charts);

  await section(charts, ctx, async () => {
    const query = windowOf(range);
    const [stats, usage, failures] = await Promise.all([
      api('GET', '/executions/stats', { query }),
      api('GET', '/billing/usage', { query }),
      api('GET', '/failures/stats'),
    ]);
    figures.replaceChildren(
      statCard('Executions', fmtNumber(stats.total), 'overview-executions', range.label.toLowerCase()),
      statCard('Failures', fmtNumber(stats.failures), 'overview-failures', range.label.toLowerCase()),
      h('div', { class: 'stat' },
        h('p', { class: 'stat-label' }, 'Open failures'),
        h('p', { class: 'stat-value', testid: 'overview-open-failures' }, fmtNumber(failures.open_failures)),
        h('p', { class: 'stat-note' }, link('/failures', 'See them', { href: hashFor('/failures', { status: 'open' }), testid: 'overview-open-link' }))),
      statCard('Credits used', fmtNumber(usage.credits), 'overview-credits', range.label.toLowerCase()),
    );
    const statuses = EXECUTION_STATUSES.map((s) => ({ key: s, label: s[0].toUpperCase() + s.slice(1) }));
    const per = hourly ? 'hour' : 'day';
    return [
      barChart({
        id: 'chart-executions', testid: 'chart-executions', series: statuses,
        title: `Executions started per ${per}, by their status now`,
        buckets: stats.buckets.map((b) => bucketOf(b, hourly, b.by_status)),
      }),
      barChart({
        id: 'chart-failures', testid: 'chart-failures', series: [{ key: 'failures', label: 'Failures' }],
        title: `Failures recorded per ${per}`,
        buckets: stats.buckets.map((b) => bucketOf(b, hourly, { failures: b.failures })),
      }),
      barChart({
        id: 'chart-credits', testid: 'chart-credits', series: [{ key: 'credits', label: 'Credits' }],
        title: `Credits used per ${per}`,
        buckets: usage.buckets.map((b) => ({ ...bucketOf(b, hourly, { credits: b.credits }), href: null })),
      }),
      h('p', { class: 'hint' }, `Times are UTC. A bar counts the executions started in its ${per}; choose one to list them.`),
    ];
  });
}
