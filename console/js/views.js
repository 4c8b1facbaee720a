// The views that read: the modules, the subjects without a module, one resource with its
// children, and the search over everything.

import { ApiError, call, query } from './api.js';
import { excerpt, h, time, uid } from './dom.js';
import { t } from './strings.js';

/** Resources per page of a list. */
export const PAGE = 20;

/** What each type is called, and what it holds. */
export const TYPES = {
  modules: { one: 'type.module', many: 'type.modules', children: 'subjects', childType: 'subjects', parent: null },
  subjects: { one: 'type.subject', many: 'type.subjects', children: 'chapters', childType: 'chapters', parent: 'module' },
  chapters: { one: 'type.chapter', many: 'type.chapters', children: null, childType: null, parent: 'subject' },
};

export function href(type, id, suffix = '') {
  return `/console/${type}/${encodeURIComponent(id)}${suffix}`;
}

/** The page number a URL asks for (1 when it asks for none or for nonsense). */
export function pageNumber(params, name = 'page') {
  const n = Number.parseInt(params.get(name) ?? '1', 10);
  return Number.isFinite(n) && n >= 1 ? n : 1;
}

/** Links to the previous and next pages of a list, and where this page is. */
export function pager(doc, page, urlOf, label) {
  const pages = doc?.meta?.page?.lastPage ?? null;
  const prev = page > 1 ? h('a', { href: urlOf(page - 1), rel: 'prev' }, t('page.prev')) : null;
  const next = doc?.links?.next ? h('a', { href: urlOf(page + 1), rel: 'next' }, t('page.next')) : null;
  if (!prev && !next) return null;
  return h(
    'nav',
    { class: 'pager', 'aria-label': label },
    prev,
    h('span', null, pages ? t('page.of', { page, pages }) : t('page.n', { page })),
    next,
  );
}

/** A list of resources, each a link with a line under it; or a sentence when there is none
 * (or, past the last page of a list that has some, a link back to its first page). */
export function list(items, empty, beyond) {
  if (!items.length && beyond) return h('p', { class: 'empty' }, t('page.beyond'), ' ', h('a', { href: beyond }, t('page.first')));
  if (!items.length) return h('p', { class: 'empty' }, empty);
  return h('ul', { class: 'cards' }, items.map(({ link, title, detail }) => h('li', null, h('a', { href: link }, title), detail ? h('div', { class: 'detail' }, detail) : null)));
}

/** A link that looks like a button, to a view that changes something. */
function action(link, label) {
  return h('a', { class: 'button', href: link }, label);
}

/** `/console/modules`: every module by title, with how many subjects each has. */
export async function modules(ctx) {
  const page = pageNumber(ctx.params);
  const { doc } = await call('GET', `/modules${query({ sort: 'title', 'page[number]': page, 'page[size]': PAGE, 'fields[modules]': 'title,updated_at' })}`);
  // The list is shown at once; each module's count of subjects follows as it arrives.
  const items = doc.data.map((m) => {
    const count = h('span', { class: 'subject-count' });
    subjectCount(m.id).then((n) => {
      if (n !== null) count.textContent = `${t('count.subjects', { n })} · `;
    });
    return { link: href('modules', m.id), title: m.attributes.title, detail: [count, t('updated'), ' ', time(m.attributes.updated_at)] };
  });
  const title = t('modules.title');
  return {
    title,
    body: [
      h('h1', null, title),
      ctx.writes ? h('p', { class: 'actions' }, action('/console/modules/new', t('modules.new'))) : null,
      h('p', { class: 'total' }, t('count.modules', { n: doc.meta?.page?.total ?? doc.data.length })),
      list(items, t('modules.none'), page > 1 && '/console/modules'),
      pager(doc, page, (n) => `/console/modules?page=${n}`, t('page.label', { what: title })),
    ],
  };
}

/** How many subjects a module has (the total of a page of one), or null if unknown. */
async function subjectCount(id) {
  try {
    const { doc } = await call('GET', `/modules/${encodeURIComponent(id)}/subjects?page[size]=1&fields[subjects]=title`);
    return doc.meta?.page?.total ?? doc.data.length;
  } catch {
    return null;
  }
}

/** `/console/subjects`: the subjects that belong to no module. */
export async function unfiled(ctx) {
  const page = pageNumber(ctx.params);
  const { doc } = await call('GET', `/subjects${query({ 'filter[module]': 'null', sort: 'title', 'page[number]': page, 'page[size]': PAGE, 'fields[subjects]': 'title,updated_at' })}`);
  const title = t('unfiled.title');
  return {
    title,
    body: [
      h('h1', null, title),
      h('p', null, t('unfiled.intro')),
      ctx.writes ? h('p', { class: 'actions' }, action('/console/subjects/new', t('subjects.new'))) : null,
      list(
        doc.data.map((s) => ({ link: href('subjects', s.id), title: s.attributes.title, detail: [t('updated'), ' ', time(s.attributes.updated_at)] })),
        t('unfiled.none'),
        page > 1 && '/console/subjects',
      ),
      pager(doc, page, (n) => `/console/subjects?page=${n}`, t('page.label', { what: title })),
    ],
  };
}

/** A resource, its parent (a subject's module, a chapter's subject), and the resource's tag:
 * the tag of its plain document, the one `If-Match` compares with. */
export async function read(type, id) {
  const parentName = TYPES[type].parent;
  const path = `/${type}/${encodeURIComponent(id)}`;
  const [{ doc, etag }, parent] = await Promise.all([
    call('GET', path),
    parentName ? call('GET', `${path}/${parentName}?fields[${parentName}s]=title`).then((r) => r.doc.data) : null,
  ]);
  return { resource: doc.data, parent, etag };
}

/** The fields of a resource to show, in order: label and content. */
function fields(type, r) {
  const a = r.attributes;
  const out = [];
  if ('introduction' in a) out.push([t('field.introduction'), a.introduction ? h('div', { class: 'text' }, a.introduction) : h('span', { class: 'empty' }, t('none'))]);
  if (type === 'modules') out.push([t('field.content'), preview(a.content ?? '', t('preview.label'))]);
  else out.push([t('field.content'), a.content ? h('div', { class: 'text' }, a.content) : h('span', { class: 'empty' }, t('none'))]);
  if ('position' in a) out.push([t('field.position'), String(a.position)]);
  if ('available_for_courses' in a) out.push([t('field.available_for_courses'), a.available_for_courses ? t('yes') : t('no')]);
  if ('external_id' in a) out.push([t('field.external_id'), a.external_id ?? h('span', { class: 'empty' }, t('none'))]);
  out.push([t('field.created_at'), time(a.created_at)]);
  out.push([t('field.updated_at'), time(a.updated_at)]);
  return h('dl', { class: 'fields' }, out.map(([label, value]) => [h('dt', null, label), h('dd', null, value)]));
}

/** A module's content (HTML) shown as a page would show it, in a frame where no script runs
 * and nothing is fetched from another host (the frame inherits the console's policy). */
export function preview(html, label) {
  const frame = h('iframe', { class: 'preview', sandbox: '', title: label, referrerpolicy: 'no-referrer' });
  frame.srcdoc = html;
  return frame;
}

/** `/console/{type}/{id}`: one resource, its parent, its children, and what can be done. */
export async function item(ctx, type, id) {
  const { resource, parent, etag } = await read(type, id);
  const info = TYPES[type];
  const title = resource.attributes.title;
  const body = [h('p', { class: 'kind' }, t(info.one)), h('h1', null, title)];
  if (info.parent) {
    const label = t(info.parent === 'module' ? 'field.module' : 'field.subject');
    body.push(
      h('p', { class: 'parent' }, label, ': ',
        parent ? h('a', { href: href(`${info.parent}s`, parent.id) }, parent.attributes?.title ?? parent.id) : h('span', { class: 'empty' }, t('module.none'))),
    );
  }
  const actions = h('p', { class: 'actions' });
  if (ctx.writes) {
    actions.append(action(href(type, resource.id, '/edit'), t('edit')), ' ');
    if (info.childType) actions.append(action(`/console/${info.childType}/new?${info.parent ? 'subject' : 'module'}=${encodeURIComponent(resource.id)}`, t(`${info.childType}.new`)), ' ');
  }
  actions.append(h('a', { class: 'button secondary', href: href(type, resource.id, '/history') }, t('history.link')));
  body.push(actions, fields(type, resource));
  if (info.children) body.push(await children(ctx, type, resource.id));
  if (ctx.writes) body.push(deletion(ctx, type, resource, etag, parent));
  return { title, body };
}

/** A resource's children, paged (`?page=` of the view): a module's subjects by title, a
 * subject's chapters in their order. */
async function children(ctx, type, id) {
  const info = TYPES[type];
  const child = info.childType;
  const page = pageNumber(ctx.params);
  const sort = child === 'chapters' ? 'position,title' : 'title';
  const { doc } = await call('GET', `/${type}/${encodeURIComponent(id)}/${info.children}${query({ sort, 'page[number]': page, 'page[size]': PAGE, [`fields[${child}]`]: child === 'chapters' ? 'title,position' : 'title,updated_at' })}`);
  const heading = uid('children');
  const title = t(TYPES[child].many);
  return h(
    'section',
    { 'aria-labelledby': heading },
    h('h2', { id: heading }, title, ' ', h('span', { class: 'count' }, `(${doc.meta?.page?.total ?? doc.data.length})`)),
    list(
      doc.data.map((r) => ({
        link: href(child, r.id),
        title: r.attributes.title,
        detail: child === 'chapters' ? t('field.position.n', { n: r.attributes.position }) : [t('updated'), ' ', time(r.attributes.updated_at)],
      })),
      t(`${child}.none`),
      page > 1 && href(type, id),
    ),
    pager(doc, page, (n) => `${href(type, id)}?page=${n}`, t('page.label', { what: title })),
  );
}

/** Deleting, in two steps: a button, then a question that says what goes with it. The
 * delete is sent with the tag the view was read with: a change made meanwhile is a 412, and
 * nothing is deleted unseen. */
function deletion(ctx, type, resource, etag, parent) {
  const info = TYPES[type];
  const region = h('section', { class: 'danger', 'aria-labelledby': 'delete-heading' }, h('h2', { id: 'delete-heading' }, t('delete.heading')));
  const ask = h('button', { type: 'button', class: 'danger' }, t(`delete.button.${type}`));
  const message = h('p', { role: 'alert', class: 'field-error' });
  ask.addEventListener('click', () => {
    ask.hidden = true;
    const confirm = h('button', { type: 'button', class: 'danger' }, t('delete.confirm'));
    const cancel = h('button', { type: 'button' }, t('cancel'));
    const question = h('div', { class: 'question', role: 'group', 'aria-labelledby': 'delete-question' },
      h('p', { id: 'delete-question' }, t(`delete.question.${type}`, { title: resource.attributes.title })),
      confirm, ' ', cancel);
    cancel.addEventListener('click', () => {
      question.remove();
      ask.hidden = false;
      ask.focus();
    });
    confirm.addEventListener('click', async () => {
      if (!etag) {
        // Without the tag it was read with, a delete could remove a change unseen.
        message.textContent = t('form.untagged');
        return;
      }
      confirm.disabled = true;
      try {
        await call('DELETE', `/${type}/${encodeURIComponent(resource.id)}`, { ifMatch: etag });
        ctx.flash([t('deleted', { title: resource.attributes.title }), ' ', h('a', { href: href(type, resource.id, '/history') }, t('deleted.history'))]);
        ctx.navigate(parent ? href(`${info.parent}s`, parent.id) : type === 'modules' ? '/console/modules' : '/console/subjects');
      } catch (e) {
        confirm.disabled = false;
        message.textContent = e instanceof ApiError && e.status === 412 ? t('delete.changed') : e.message;
      }
    });
    region.append(question);
    confirm.focus();
  });
  region.append(ask, message);
  return region;
}

/** `/console/search?q=...`: one box over everything; each type's best matches with the
 * excerpts the API marks, and `&type=T&page=N` pages one type. */
export async function search(ctx) {
  const q = (ctx.params.get('q') ?? '').trim();
  const only = TYPES[ctx.params.get('type')] ? ctx.params.get('type') : null;
  const title = q ? t('search.title.q', { q }) : t('search.title');
  const body = [h('h1', null, title)];
  if (!q) {
    body.push(h('p', null, t('search.empty')));
    return { title, body };
  }
  const types = only ? [only] : Object.keys(TYPES);
  const page = pageNumber(ctx.params);
  const size = only ? PAGE : 5;
  const results = await Promise.all(
    types.map((type) =>
      call('GET', `/${type}${query({ 'filter[search]': q, 'page[size]': size, 'page[number]': only ? page : 1, [`fields[${type}]`]: 'title' })}`)
        .then(({ doc }) => ({ type, doc }))
        .catch((e) => ({ type, error: e })),
    ),
  );
  const refused = results.find((r) => r.error instanceof ApiError && r.error.status === 400);
  if (refused) {
    body.push(h('p', { role: 'alert', class: 'field-error' }, refused.error.message));
    return { title, body };
  }
  let found = 0;
  for (const { type, doc, error } of results) {
    const heading = uid('found');
    const section = h('section', { 'aria-labelledby': heading });
    const total = doc?.meta?.page?.total ?? doc?.data?.length ?? 0;
    found += total;
    section.append(h('h2', { id: heading }, t(TYPES[type].many), ' ', h('span', { class: 'count' }, `(${total})`)));
    if (error) {
      section.append(h('p', { role: 'alert' }, error.message));
    } else {
      section.append(
        list(
          doc.data.map((r) => {
            const found = r.meta?.search;
            return {
              link: href(type, r.id),
              title: r.attributes.title,
              detail: found ? [h('span', { class: 'where' }, t(`field.${found.attribute}`), ': '), h('span', { class: 'excerpt' }, excerpt(found.excerpt ?? ''))] : null,
            };
          }),
          t('search.nothing'),
        ),
      );
      if (only) {
        section.append(pager(doc, page, (n) => `/console/search?q=${encodeURIComponent(q)}&type=${type}&page=${n}`, t('page.label', { what: t(TYPES[type].many) })));
      } else if (total > size) {
        section.append(h('p', null, h('a', { href: `/console/search?q=${encodeURIComponent(q)}&type=${type}` }, t('search.more', { n: total, what: t(TYPES[type].many) }))));
      }
    }
    body.push(section);
  }
  if (only) body.push(h('p', null, h('a', { href: `/console/search?q=${encodeURIComponent(q)}` }, t('search.all'))));
  body.splice(1, 0, h('p', { class: 'total' }, t('search.found', { n: found })));
  return { title, body };
}
