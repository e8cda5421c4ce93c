// Formatting of numbers, sizes, money and JSON for display (Intl, the browser's locale).

const numberFormat = new Intl.NumberFormat(undefined);
export const signedFormat = new Intl.NumberFormat(undefined, { signDisplay: 'exceptZero' });
export const percentFormat = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });
const usdFormat = new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD' });
export const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
export const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const byteFormats = ['byte', 'kilobyte', 'megabyte', 'gigabyte'].map(
  (unit) => new Intl.NumberFormat(undefined, { style: 'unit', unit, unitDisplay: unit === 'byte' ? 'long' : 'short', maximumFractionDigits: 1 }),
);

export function fmtNumber(n) {
  return typeof n === 'number' && Number.isFinite(n) ? numberFormat.format(n) : '—';
}

export function fmtBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  let value = n;
  let i = 0;
  while (value >= 1024 && i < byteFormats.length - 1) {
    value /= 1024;
    i += 1;
  }
  return byteFormats[i].format(value);
}

export function fmtUsd(dollars) {
  return typeof dollars === 'number' && Number.isFinite(dollars) ? usdFormat.format(dollars) : '—';
}

export function prettyJson(value) {
  return JSON.stringify(value, null, 2);
}
