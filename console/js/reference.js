// The API reference, rendered from the server's own OpenAPI document: every operation with
// its parameters, request and response schemas, and a "try it" that sends it with the
// signed-in token (the operations that only read, for a read-only token).

import { MEDIA, openapi, session } from './api.js';
import { h, uid } from './dom.js';
import { t } from './strings.js';

const METHODS = ['get', 'post', 'patch', 'delete'];
/** How deep a schema is unfolded (the rest is named, not shown). */
const DEPTH = 4;

export async function reference(ctx) {
  const doc = await openapi();
  const title = t('api.title');
  const byTag = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = op.tags?.[0] ?? t('api.other');
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op, shared: item.parameters ?? [] });
    }
  }
  const body = [
    h('h1', null, title),
    h('p', null, doc.info?.description ?? ''),
    h('p', null, t('api.intro'), ' ', h('a', { href: '/v1/openapi.json', target: '_blank', rel: 'noopener' }, '/v1/openapi.json')),
  ];
  for (const [tag, ops] of byTag) {
    const heading = uid('tag');
    body.push(h('section', { 'aria-labelledby': heading }, h('h2', { id: heading }, tag), ops.map((o) => operation(ctx, doc, o))));
  }
  return { title, body };
}

/** One operation, folded: its method and path, and when opened, everything about it. */
function operation(ctx, doc, { path, method, op, shared }) {
  const details = h('details', { class: 'operation' },
    h('summary', null, h('span', { class: `method ${method}` }, method.toUpperCase()), ' ', h('code', null, `/v1${path}`), ' ', h('span', { class: 'summary-text' }, op.summary ?? '')));
  let filled = false;
  details.addEventListener('toggle', () => {
    if (filled || !details.open) return;
    filled = true;
    const params = [...shared, ...(op.parameters ?? [])].map((p) => resolve(doc, p));
    const parts = [];
    if (op.description) parts.push(h('p', null, op.description));
    if (params.length) {
      parts.push(h('h3', null, t('api.parameters')), h('table', null,
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, t('api.name')), h('th', { scope: 'col' }, t('api.in')), h('th', { scope: 'col' }, t('api.schema')), h('th', { scope: 'col' }, t('api.description')))),
        h('tbody', null, params.map((p) => h('tr', null,
          h('td', null, h('code', null, p.name), p.required ? ` (${t('api.required')})` : ''),
          h('td', null, p.in),
          h('td', null, typeName(doc, p.schema ?? {})),
          h('td', null, p.description ?? p.schema?.description ?? ''))))));
    }
    const request = op.requestBody ? firstSchema(resolve(doc, op.requestBody)) : null;
    if (request) parts.push(h('h3', null, t('api.request')), schemaView(doc, request, 0));
    parts.push(h('h3', null, t('api.responses')), h('dl', { class: 'responses' }, Object.entries(op.responses ?? {}).map(([status, r]) => {
      const response = resolve(doc, r);
      const schema = firstSchema(response);
      const ref = r.$ref ?? schema?.$ref;
      return [h('dt', null, h('code', null, status)), h('dd', null, response.description ?? '', schema && Number(status) < 300 ? schemaView(doc, schema, 0) : ref ? h('span', { class: 'ref' }, ` (${ref.split('/').pop()})`) : null)];
    })));
    // A stream never ends: it is not tried here (a reply would never be shown).
    const streams = Object.values(op.responses ?? {}).some((r) => resolve(doc, r).content?.['text/event-stream']);
    const mediaType = Object.keys(resolve(doc, op.requestBody ?? {}).content ?? {})[0] ?? MEDIA;
    if ((ctx.writes || method === 'get') && !streams) parts.push(tryIt(path, method, params, Boolean(request), mediaType));
    details.append(h('div', { class: 'operation-body' }, parts));
  });
  return details;
}

/** `$ref` followed, within the document. */
function resolve(doc, node, seen = 0) {
  if (!node?.$ref || seen > 8) return node ?? {};
  const target = node.$ref.replace(/^#\//, '').split('/').reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  return resolve(doc, target, seen + 1);
}

function firstSchema(body) {
  const content = body?.content ?? {};
  return (content[MEDIA] ?? content['application/json'] ?? Object.values(content)[0])?.schema ?? null;
}

/** A schema with its `allOf` parts merged into one (members and required ones together). */
function merged(doc, schema) {
  const s = resolve(doc, schema);
  if (!s.allOf) return s;
  const out = { ...s, properties: { ...(s.properties ?? {}) }, required: [...(s.required ?? [])] };
  delete out.allOf;
  for (const part of s.allOf.map((p) => merged(doc, p))) {
    Object.assign(out.properties, part.properties ?? {});
    out.required.push(...(part.required ?? []));
    out.type ??= part.type;
    out.description ??= part.description;
  }
  return out;
}

/** A schema's type in a few words. */
function typeName(doc, schema) {
  if (schema.$ref) return schema.$ref.split('/').pop();
  const s = merged(doc, schema);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.oneOf || s.anyOf) return (s.oneOf ?? s.anyOf).map((x) => typeName(doc, x)).join(' | ');
  const type = [s.type ?? (s.properties ? 'object' : 'any')].flat().join(' | ');
  if (type === 'array' && s.items) return `${typeName(doc, s.items)}[]`;
  const limits = [s.format, s.pattern ? `/${s.pattern}/` : null, s.minimum !== undefined ? `≥ ${s.minimum}` : null, s.maxLength !== undefined ? `≤ ${s.maxLength} chars` : null].filter(Boolean);
  return limits.length ? `${type} (${limits.join(', ')})` : type;
}

/** A schema as nested lists of its members, `DEPTH` levels deep. */
function schemaView(doc, schema, depth) {
  const s = merged(doc, schema);
  const name = schema.$ref ? h('span', { class: 'ref' }, schema.$ref.split('/').pop(), ': ') : null;
  const alternatives = s.oneOf ?? s.anyOf;
  if (alternatives && depth < DEPTH) {
    return h('div', { class: 'schema' }, name, t('api.oneOf'), h('ul', null, alternatives.map((x) => h('li', null, schemaView(doc, x, depth + 1)))));
  }
  const items = s.type === 'array' && s.items ? merged(doc, s.items) : null;
  const props = s.properties ?? items?.properties;
  if (!props || depth >= DEPTH) return h('span', { class: 'schema' }, name, typeName(doc, schema));
  const required = new Set(s.properties ? s.required ?? [] : items?.required ?? []);
  return h('div', { class: 'schema' }, name, s.type === 'array' ? t('api.arrayOf') : null, h('ul', null, Object.entries(props).map(([key, value]) => {
    const v = merged(doc, value);
    return h('li', null, h('code', null, key), required.has(key) ? ` (${t('api.required')})` : '', ': ',
      v.properties || v.oneOf || v.anyOf || (v.type === 'array' && merged(doc, v.items ?? {}).properties) ? schemaView(doc, value, depth + 1) : typeName(doc, value),
      v.description ? h('span', { class: 'help' }, ` — ${v.description}`) : null);
  })));
}

/** "Try it": the path's parameters, a query, a body; sent with the signed-in token. */
function tryIt(path, method, params, hasBody, mediaType) {
  const id = uid('try');
  const pathParams = params.filter((p) => p.in === 'path');
  const inputs = pathParams.map((p) => {
    const inputId = `${id}-${p.name}`;
    return { name: p.name, el: h('input', { id: inputId, required: true, autocomplete: 'off' }), label: h('label', { for: inputId }, p.name) };
  });
  const queryId = `${id}-query`;
  const query = h('input', { id: queryId, autocomplete: 'off', placeholder: 'page[size]=5&sort=title' });
  const bodyId = `${id}-body`;
  const body = hasBody ? h('textarea', { id: bodyId, rows: 6, spellcheck: 'false' }) : null;
  if (body) body.value = '{"data": {}}';
  const ifMatchId = `${id}-ifmatch`;
  const ifMatch = method === 'get' ? null : h('input', { id: ifMatchId, autocomplete: 'off', placeholder: t('api.ifMatch') });
  const result = h('div', { class: 'result', 'aria-live': 'polite' });
  const send = h('button', { type: 'submit' }, t('api.send'));
  const form = h('form', { class: 'try', novalidate: true },
    h('h3', null, t('api.try')),
    inputs.map((i) => h('div', { class: 'field' }, i.label, i.el)),
    h('div', { class: 'field' }, h('label', { for: queryId }, t('api.query')), query),
    ifMatch ? h('div', { class: 'field' }, h('label', { for: ifMatchId }, 'If-Match'), ifMatch) : null,
    body ? h('div', { class: 'field' }, h('label', { for: bodyId }, t('api.body')), body) : null,
    send, result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let url = `/v1${path}`;
    for (const i of inputs) url = url.replace(`{${i.name}}`, encodeURIComponent(i.el.value.trim()));
    const q = query.value.trim().replace(/^\?/, '');
    if (q) url += `?${q}`;
    const headers = { Accept: path === '/openapi.json' ? 'application/json' : MEDIA, Authorization: `Bearer ${session.token()}` };
    if (body) headers['Content-Type'] = mediaType;
    if (ifMatch?.value.trim()) headers['If-Match'] = ifMatch.value.trim();
    send.disabled = true;
    try {
      const res = await fetch(url, { method: method.toUpperCase(), headers, body: body ? body.value : undefined, cache: 'no-cache', credentials: 'omit' });
      const text = await res.text();
      let shown = text;
      try {
        shown = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        // Not JSON: shown as it came.
      }
      const tag = res.headers.get('ETag');
      result.replaceChildren(
        h('p', null, h('strong', null, `${res.status} ${res.statusText}`), tag ? ` · ETag ${tag}` : ''),
        h('pre', { tabindex: '0', role: 'region', 'aria-label': t('api.response') }, shown.length > 200_000 ? `${shown.slice(0, 200_000)}\n…` : shown),
      );
    } catch (e) {
      result.replaceChildren(h('p', { role: 'alert' }, t('error.network')));
    } finally {
      send.disabled = false;
    }
  });
  return form;
}
