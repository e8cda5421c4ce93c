// DOM helpers: h() builds every element (createElement/textContent only: no innerHTML, no
// inline handlers, no style attributes, as the page's Content-Security-Policy requires),
// and the small pieces every page uses (links to hash routes, busy buttons).

/**
 * Creates an element. props: class (string or array), text, testid (data-testid),
 * on<event> (a listener), value/checked/disabled/selected (properties), any other key as
 * an attribute (true: present, false/null/undefined: left out). Children: nodes, strings
 * (as text, never parsed), numbers, arrays of them; null/false/undefined are skipped.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  const properties = props || {};
  for (const [key, value] of Object.entries(properties)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') {
      el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : String(value);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'testid') {
      el.setAttribute('data-testid', String(value));
    } else if (key.startsWith('on')) {
      // Listeners only: an on* attribute would be an inline handler, which the CSP blocks.
      if (typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'value') {
      // set after the children (a <select> needs its options first)
    } else if (key === 'checked' || key === 'disabled' || key === 'selected') {
      el[key] = true;
    } else if (value === true) {
      el.setAttribute(key, '');
    } else {
      el.setAttribute(key, String(value));
    }
  }
  appendChildren(el, children);
  if (properties.value !== undefined && properties.value !== null) el.value = String(properties.value);
  return el;
}

export function appendChildren(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

export const $ = (selector) => document.querySelector(selector);

export function enc(id) {
  return encodeURIComponent(id);
}

export function hashFor(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    for (const one of Array.isArray(value) ? value : [value]) {
      if (one !== undefined && one !== null && one !== '') query.append(key, String(one));
    }
  }
  const qs = query.toString();
  return `#${path}${qs ? `?${qs}` : ''}`;
}

export function link(path, text, props = {}) {
  return h('a', { href: `#${path}`, ...props }, text);
}

export function positiveInt(value, fallback) {
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n >= 1 ? n : fallback;
}

/** A list page's status filter (one of statuses, or '' for any) and page number, from
 * the hash's query. */
export function listQuery(params, statuses) {
  const status = params.get('status');
  return { status: statuses.includes(status) ? status : '', page: positiveInt(params.get('page'), 1) };
}

export function setBusy(button, busyText) {
  const original = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  if (busyText) button.textContent = busyText;
  return () => {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = original;
  };
}
