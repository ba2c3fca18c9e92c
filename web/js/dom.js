// Small DOM helpers: element creation without innerHTML (every text is a
// text node, so nothing the server returns is ever parsed as markup),
// formatting, and error display.

/**
 * Creates an element. attrs: attributes (false/null/undefined are left
 * out), with `on<Event>` keys taking listeners and `dataset` an object.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'class') {
      el.className = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** The element with this id; throws when the page lacks it (a bug). */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`dashboard: no element #${id}`);
  return el;
}

const timeFormat = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: '2-digit', day: '2-digit',
  hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false,
});

/** A <time> element for an RFC 3339 value, in local time, with the exact value as its title. */
export function time(value) {
  if (!value) return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return value;
  return h('time', { datetime: value, title: value }, timeFormat.format(d));
}

/** A status badge (styled by value). */
export function badge(value) {
  return h('span', { class: `badge ${value}` }, value);
}

/** Bytes as a short human string (input: decimal string or number). */
export function bytes(value) {
  const n = Number(value ?? 0);
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(1)} ${units[i]}`;
}

/** The first 8 characters of an id, as text (for messages and options). */
export function shortText(id) {
  return String(id).slice(0, 8);
}

/** The first 8 characters of an id, with the whole id as its title. */
export function shortId(id) {
  return h('span', { class: 'mono', title: id }, shortText(id));
}

/**
 * Shows an error in an alert element: the GraphQL error code (extensions.code)
 * in bold, then the message; null hides it.
 */
export function showError(el, err) {
  el.replaceChildren();
  if (!err) {
    el.hidden = true;
    return;
  }
  if (err.code) el.append(h('code', {}, err.code), ': ');
  el.append(err.message || String(err));
  el.hidden = false;
}

/**
 * Runs render (which replaces children of container) and then moves focus
 * back to the element that had it before, found by its data-focus-key, so
 * that a periodic refresh never steals a keyboard user's place.
 */
export function keepFocus(container, render) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focusKey : undefined;
  render();
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

/** A random id for idempotency keys (crypto.randomUUID needs a secure context). */
export function randomId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
