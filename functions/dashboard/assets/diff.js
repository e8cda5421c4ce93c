// What changed between two JSON states: added, removed and changed paths (JSON Pointer,
// RFC 6901), found by walking both at once. Large states are walked in slices of a few
// thousand values, yielding to the browser between them, so the page never freezes; and
// at most DIFF_MAX_CHANGES changes are kept (the rest are counted).

export const DIFF_MAX_CHANGES = 1000;
const SLICE = 4000;

function kindOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function pointer(path, key) {
  return `${path}/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

// A key or index one side does not have.
const MISSING = Symbol('missing');

const pause = () => new Promise((resolve) => { setTimeout(resolve, 0); });

/**
 * The differences from `before` to `after`: {changes: [{path, kind: added | removed |
 * changed, before, after}], counts: {added, removed, changed}, more (changes not kept)}.
 * Objects are compared key by key, arrays index by index; a value whose type changes is
 * one change. `stale()` ends the walk early (the page was left).
 */
export async function diffJson(before, after, { stale = () => false } = {}) {
  const changes = [];
  const counts = { added: 0, removed: 0, changed: 0 };
  const note = (path, kind, a, b) => {
    counts[kind] += 1;
    if (changes.length < DIFF_MAX_CHANGES) changes.push({ path: path || '/', kind, before: a, after: b });
  };
  const stack = [['', before, after]];
  let visited = 0;
  while (stack.length) {
    const [path, a, b] = stack.pop();
    visited += 1;
    if (visited % SLICE === 0) {
      await pause();
      if (stale()) break;
    }
    if (a === MISSING) {
      note(path, 'added', undefined, b);
      continue;
    }
    if (b === MISSING) {
      note(path, 'removed', a, undefined);
      continue;
    }
    const [ka, kb] = [kindOf(a), kindOf(b)];
    if (ka !== kb) {
      note(path, 'changed', a, b);
    } else if (ka === 'object') {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().reverse();
      for (const key of keys) {
        stack.push([pointer(path, key), Object.hasOwn(a, key) ? a[key] : MISSING, Object.hasOwn(b, key) ? b[key] : MISSING]);
      }
    } else if (ka === 'array') {
      for (let i = Math.max(a.length, b.length) - 1; i >= 0; i -= 1) {
        stack.push([pointer(path, i), i < a.length ? a[i] : MISSING, i < b.length ? b[i] : MISSING]);
      }
    } else if (a !== b) {
      note(path, 'changed', a, b);
    }
  }
  const total = counts.added + counts.removed + counts.changed;
  return { changes, counts, more: total - changes.length };
}
