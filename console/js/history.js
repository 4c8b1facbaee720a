// A resource's history: its revisions, newest first (who, when, what changed, as a diff of
// words), and restoring the resource to any of them.

import { ApiError, call, query } from './api.js';
import { h, time, uid } from './dom.js';
import { t } from './strings.js';
import { href, pageNumber, pager, PAGE, TYPES } from './views.js';

/** Above this many word pairs to compare, a change is shown as before and after whole. */
const MOST_COMPARED = 400_000;

/** `/console/{type}/{id}/history`. A deleted resource keeps its history, and can be brought
 * back from it. */
export async function historyView(ctx, type, id) {
  const page = pageNumber(ctx.params);
  const path = `/${type}/${encodeURIComponent(id)}`;
  const [current, revisions] = await Promise.all([
    call('GET', path).catch((e) => (e instanceof ApiError && e.status === 404 ? null : Promise.reject(e))),
    call('GET', `${path}/revisions${query({ 'page[number]': page, 'page[size]': PAGE })}`),
  ]);
  const doc = revisions.doc;
  if (!current && !doc.data.length) throw new ApiError(404, []);
  const name = current?.doc.data.attributes.title ?? latestTitle(doc.data) ?? id;
  const title = t('history.title', { title: name });
  const body = [h('p', { class: 'kind' }, t(TYPES[type].one)), h('h1', null, title)];
  body.push(current
    ? h('p', null, h('a', { href: href(type, id) }, t('history.back', { title: name })))
    : h('p', { class: 'flash' }, t('history.deleted')));
  const items = doc.data.map((revision) => entry(ctx, type, id, revision, current?.etag ?? null));
  body.push(items.length ? h('ol', { class: 'revisions', reversed: true }, items) : h('p', { class: 'empty' }, t('history.none')));
  body.push(pager(doc, page, (n) => `${href(type, id, '/history')}?page=${n}`, t('page.label', { what: title })));
  return { title, body };
}

/** The title a deleted resource last had, from its revisions. */
function latestTitle(revisions) {
  for (const r of revisions) {
    const c = r.attributes.changes?.title;
    if (c) return c.before ?? c.after;
  }
  return null;
}

/** One revision: its heading, who and when, the changes, and its restore button. */
function entry(ctx, type, id, revision, etag) {
  const a = revision.attributes;
  const heading = uid('revision');
  const li = h('li', { class: 'revision' },
    h('article', { 'aria-labelledby': heading },
      h('h2', { id: heading }, t('revision.heading', { n: a.number, action: t(`action.${a.action}`) })),
      h('p', { class: 'detail' }, t('revision.by', { by: a.by }), ' · ', time(a.at)),
      changes(a.changes ?? {}, a.action)));
  if (ctx.writes && a.action !== 'delete') {
    const message = h('p', { class: 'field-error', role: 'alert' });
    const button = h('button', { type: 'button', class: 'secondary' }, t('restore.button', { n: a.number }));
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        // Based on what the page showed: the resource's tag, or, when it was deleted, only
        // while it still is (never over what someone brought back meanwhile).
        await call('POST', `/revisions/${encodeURIComponent(revision.id)}/restore`, etag ? { ifMatch: etag } : { ifNoneMatch: '*' });
        ctx.flash(t('restored', { n: a.number }));
        ctx.navigate(href(type, id));
      } catch (e) {
        button.disabled = false;
        message.textContent = e instanceof ApiError && e.status === 412 ? t('restore.changed') : e.message;
      }
    });
    li.firstChild.append(h('p', { class: 'actions' }, button), message);
  }
  return li;
}

/** What a revision changed: each member, before and after. */
function changes(members, action) {
  const names = Object.keys(members).filter((n) => n !== 'created_at' && n !== 'updated_at');
  if (!names.length) return h('p', { class: 'empty' }, t('revision.nothing'));
  return h('dl', { class: 'changes' }, names.map((name) => {
    const { before, after } = members[name];
    let shown;
    if (action === 'create') shown = value(after);
    else if (action === 'delete') shown = value(before);
    else if (typeof before === 'string' && typeof after === 'string') shown = diff(before, after);
    else shown = [h('del', null, h('span', { class: 'visually-hidden' }, t('diff.removed')), value(before)), ' → ', h('ins', null, h('span', { class: 'visually-hidden' }, t('diff.added')), value(after))];
    return [h('dt', null, t(`field.${name}`)), h('dd', null, shown)];
  }));
}

/** A member's value in words: a related resource as a link. */
function value(v) {
  if (v === null || v === undefined) return t('none');
  if (typeof v === 'object' && v.type && v.id) return h('a', { href: href(v.type, v.id) }, `${t(TYPES[v.type]?.one ?? v.type)} ${v.id.slice(0, 8)}`);
  if (typeof v === 'boolean') return v ? t('yes') : t('no');
  return String(v);
}

/** Two texts as one, words removed in `del` and words added in `ins` (a longest common
 * subsequence of words and spaces, after the common start and end are set aside); in each
 * change, what was removed comes before what was added, and the spaces between changed words
 * belong to the change. */
export function diff(before, after) {
  const a = before.match(/\s+|\S+/g) ?? [];
  const b = after.match(/\s+|\S+/g) ?? [];
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start += 1;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end += 1;
  const x = a.slice(start, a.length - end);
  const y = b.slice(start, b.length - end);
  // The edit, as steps: ['same', word], ['del', word], ['ins', word].
  const steps = [];
  if (x.length * y.length > MOST_COMPARED) {
    for (const w of x) steps.push(['del', w]);
    for (const w of y) steps.push(['ins', w]);
  } else {
    // lengths[i][j]: the longest common subsequence of x[i..] and y[j..].
    const lengths = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i -= 1) {
      for (let j = y.length - 1; j >= 0; j -= 1) {
        lengths[i][j] = x[i] === y[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        steps.push(['same', x[i]]);
        i += 1;
        j += 1;
      } else if (i < x.length && (j === y.length || lengths[i + 1][j] >= lengths[i][j + 1])) {
        steps.push(['del', x[i]]);
        i += 1;
      } else {
        steps.push(['ins', y[j]]);
        j += 1;
      }
    }
  }
  const out = [a.slice(0, start).join('')];
  let removed = '';
  let added = '';
  const flush = () => {
    if (removed) out.push(h('del', null, h('span', { class: 'visually-hidden' }, t('diff.removed')), removed));
    if (added) out.push(h('ins', null, h('span', { class: 'visually-hidden' }, t('diff.added')), added));
    removed = '';
    added = '';
  };
  for (let k = 0; k < steps.length; k += 1) {
    const [kind, word] = steps[k];
    const between = kind === 'same' && !word.trim() && (removed || added) && steps[k + 1] && steps[k + 1][0] !== 'same';
    if (kind === 'del' || between) removed += word;
    if (kind === 'ins' || between) added += word;
    if (kind === 'same' && !between) {
      flush();
      out.push(word);
    }
  }
  flush();
  out.push(a.slice(a.length - end).join(''));
  return h('span', { class: 'diff' }, out.filter((part) => part !== ''));
}
