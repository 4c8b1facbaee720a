// Building the page: elements made one by one (never from HTML text), so that nothing a
// resource holds can become markup, and the few helpers every view shares.

/** An element: `h('a', {href: '/x', class: 'button'}, 'text', child, ...)`. Attributes whose
 * value is null, undefined or false are left out; `on*` are event listeners; `value`,
 * `checked` and `selected` are set as properties. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'value' || key === 'checked' || key === 'selected') {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children: nodes as they are, anything else as text; arrays are flattened. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Empties `el` and fills it with `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Says `message` to screen readers (the page's polite live region). */
export function announce(message) {
  const status = document.getElementById('status');
  if (!status) return;
  status.textContent = '';
  // A change the screen reader hears even when the same words come twice.
  setTimeout(() => { status.textContent = message; }, 50);
}

const ENTITIES = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'", '&#x27;': "'" };

/** A search excerpt as the API sends it (HTML-escaped text with `<mark>` around each match),
 * as nodes: the text of the excerpt and `mark` elements, nothing else, whatever the string. */
export function excerpt(html) {
  const out = [];
  let marked = false;
  for (const part of String(html).split(/(<mark>|<\/mark>)/)) {
    if (part === '<mark>') { marked = true; continue; }
    if (part === '</mark>') { marked = false; continue; }
    if (!part) continue;
    const text = part.replace(/&(amp|lt|gt|quot|#39|#x27);/g, (e) => ENTITIES[e]);
    out.push(marked ? h('mark', null, text) : document.createTextNode(text));
  }
  return out;
}

/** A date as the reader's language writes it. */
export function when(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso ?? '');
  return d.toLocaleString(document.documentElement.lang || undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** A `time` element for `iso`. */
export function time(iso) {
  return h('time', { datetime: iso }, when(iso));
}

let unique = 0;
/** An id no other element of the page has. */
export function uid(prefix) {
  unique += 1;
  return `${prefix}-${unique}`;
}
