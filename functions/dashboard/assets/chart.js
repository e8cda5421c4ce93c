// Bar charts as accessible SVG: stacked bars per time bucket, drawn with createElementNS
// (no library, no style attributes: colours are classes in app.css). Each chart is a
// <figure> whose <svg role="img"> has a <title> and a <desc> that says what it shows in
// words, each bar a <title> (its tooltip), and a data table below it (in a <details>,
// open on request) that holds every number the bars draw, for screen readers and for
// reading exact values.

import { h } from './dom.js';
import { fmtNumber } from './format.js';

const NS = 'http://www.w3.org/2000/svg';

/** An SVG element: attributes as given (strings or numbers), children nodes or text. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined && value !== false) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// The drawing's own units (the SVG scales to its box, keeping its proportions).
const WIDTH = 720;
const HEIGHT = 240;
const PAD = { top: 12, right: 8, bottom: 28, left: 44 };

/** A round number at least `n` (1, 2 or 5 times a power of ten), for the y axis. */
export function niceCeiling(n) {
  if (!(n > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= n) return step * power;
  }
  return 10 * power;
}

/**
 * A stacked bar chart of time buckets.
 *   id        a prefix for element ids (unique on the page)
 *   title     the chart's heading (also the SVG's <title>)
 *   buckets   [{start (ISO), label (short, on the axis), long (in titles and the table),
 *               href (optional: where its bar and its table row link to), values: {seriesKey: n}}]
 *   series    [{key, label}] bottom to top; each bar gets the class `bar-<key>`
 *   testid    data-testid of the <figure>; each bar is data-testid="bar" with
 *             data-start, data-series and data-value
 */
export function barChart({ id, title, buckets, series, testid, unit = '' }) {
  const totals = buckets.map((b) => series.reduce((sum, s) => sum + (b.values[s.key] || 0), 0));
  const top = niceCeiling(Math.max(0, ...totals));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, buckets.length);
  const barW = Math.max(1, step * 0.72);
  const y = (v) => PAD.top + plotH - (v / top) * plotH;

  const grid = [0, top / 2, top].map((v) => svg('g', { class: 'chart-grid' },
    svg('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(v), y2: y(v) }),
    svg('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmtNumber(v))));

  // Axis labels: at most about eight, evenly spaced, the last bucket always labelled.
  const every = Math.max(1, Math.ceil(buckets.length / 8));
  const labels = buckets.map((b, i) => ((buckets.length - 1 - i) % every === 0
    ? svg('text', { class: 'chart-axis', x: PAD.left + i * step + step / 2, y: HEIGHT - 8, 'text-anchor': 'middle' }, b.label)
    : null));

  const columns = buckets.map((b, i) => {
    const x = PAD.left + i * step + (step - barW) / 2;
    let base = 0;
    const rects = series.map((s) => {
      const value = b.values[s.key] || 0;
      if (value === 0) return null;
      const rect = svg('rect', {
        class: `bar bar-${s.key}`, x, y: y(base + value), width: barW, height: Math.max(0.5, y(base) - y(base + value)),
        'data-testid': 'bar', 'data-start': b.start, 'data-series': s.key, 'data-value': value,
      }, svg('title', {}, `${b.long}: ${fmtNumber(value)} ${s.label.toLowerCase()}${unit}`));
      base += value;
      return rect;
    });
    // A full-height target, so a thin or empty bucket still has its tooltip and link.
    const target = svg('rect', { class: 'bar-target', x: PAD.left + i * step, y: PAD.top, width: step, height: plotH },
      svg('title', {}, `${b.long}: ${fmtNumber(totals[i])}${unit} in all`));
    const group = svg('g', { class: 'chart-column' }, target, rects);
    // A pointer's shortcut: keyboards and screen readers follow the same link in the table.
    return b.href ? svg('a', { href: b.href, tabindex: '-1', 'aria-hidden': 'true' }, group) : group;
  });

  const peak = totals.length ? Math.max(...totals) : 0;
  const sum = totals.reduce((a, b) => a + b, 0);
  const first = buckets[0];
  const last = buckets[buckets.length - 1];
  const summary = buckets.length
    ? `${fmtNumber(sum)}${unit} in all from ${first.long} to ${last.long}, at most ${fmtNumber(peak)}${unit} in one bucket. The table below holds every value.`
    : 'No data.';
  const drawing = svg('svg', {
    class: 'chart-svg', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img',
    'aria-labelledby': `${id}-title ${id}-desc`, focusable: 'false',
  },
  svg('title', { id: `${id}-title` }, title),
  svg('desc', { id: `${id}-desc` }, summary),
  grid, labels, columns);

  const legend = series.length > 1
    ? h('ul', { class: 'chart-legend', 'aria-hidden': 'true' },
      series.map((s) => h('li', {}, h('span', { class: ['swatch', `bar-${s.key}`] }), s.label)))
    : null;

  const table = h('table', { class: 'table table-compact', testid: `${testid}-table` },
    h('caption', { class: 'visually-hidden' }, title),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Period'),
      series.map((s) => h('th', { scope: 'col', class: 'num' }, s.label)),
      series.length > 1 ? h('th', { scope: 'col', class: 'num' }, 'Total') : null)),
    h('tbody', {}, buckets.map((b, i) => h('tr', { 'data-start': b.start },
      h('th', { scope: 'row' }, b.href ? h('a', { href: b.href }, b.long) : b.long),
      series.map((s) => h('td', { class: 'num', 'data-series': s.key }, fmtNumber(b.values[s.key] || 0))),
      series.length > 1 ? h('td', { class: 'num' }, fmtNumber(totals[i])) : null))));

  return h('figure', { class: 'chart', testid, 'aria-labelledby': `${id}-caption` },
    h('figcaption', { class: 'chart-title', id: `${id}-caption` }, title),
    drawing,
    legend,
    h('details', { class: 'chart-data' }, h('summary', {}, 'Show the numbers as a table'),
      h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `${title}, as a table` }, table)));
}

// A sparkline's bars: each this wide, this far apart, at most this tall (its own units).
const SPARK = { bar: 4, gap: 1, height: 20 };

/**
 * Counts per hour (oldest first, the current hour last) as a sparkline: one bar an hour,
 * the busiest hour full height, an hour with none a flat line. An <svg role="img">
 * labelled in words (the total and the busiest hour), each bar's <title> its hour and
 * count.
 */
export function sparkline(perHour, { testid, noun = 'failure' } = {}) {
  const values = (Array.isArray(perHour) ? perHour : []).map((n) => Math.max(0, Number(n) || 0));
  const hours = values.length;
  const total = values.reduce((sum, n) => sum + n, 0);
  const top = Math.max(0, ...values);
  const label = total === 0
    ? `No ${noun}s in the last ${hours} hours`
    : `${fmtNumber(total)} ${noun}${total === 1 ? '' : 's'} in the last ${hours} hours, at most ${fmtNumber(top)} in one hour`;
  const when = (i) => {
    const back = hours - 1 - i;
    return back === 0 ? 'this hour' : back === 1 ? 'the hour before' : `${back} hours ago`;
  };
  const bars = values.map((n, i) => {
    const tall = n === 0 ? 1 : Math.max(2, Math.round((n / top) * SPARK.height));
    return svg('rect', {
      x: i * (SPARK.bar + SPARK.gap), y: SPARK.height - tall, width: SPARK.bar, height: tall,
      class: n === 0 ? 'spark-none' : 'spark-bar',
    }, svg('title', {}, `${when(i)}: ${fmtNumber(n)}`));
  });
  const width = Math.max(1, hours * (SPARK.bar + SPARK.gap) - SPARK.gap);
  return svg('svg', {
    class: 'sparkline', viewBox: `0 0 ${width} ${SPARK.height}`, role: 'img', 'aria-label': label,
    'data-testid': testid, 'data-total': total,
  }, svg('title', {}, label), bars);
}
