// The views that write: creating and editing modules, subjects and chapters (moving a
// subject to another module is editing its module). Every field's rules come from the
// server's OpenAPI document and are checked as the user types; what the server refuses is
// shown next to the field its `source.pointer` names. An edit is sent with the tag it was
// read with: when someone else saved meanwhile (412), both versions are shown side by side
// and the user chooses, field by field; nothing is overwritten unseen.

import { ApiError, call, openapi, query } from './api.js';
import { h, uid } from './dom.js';
import { t } from './strings.js';
import { href, preview, read, TYPES } from './views.js';

/** The order fields are shown in, and which are written as what. */
const FIELDS = ['title', 'introduction', 'content', 'position', 'available_for_courses', 'external_id'];
const LONG = new Set(['introduction', 'content']);

/** The writable attributes of `type` with their rules, from the OpenAPI document. */
async function rules(type) {
  const doc = await openapi();
  const props = doc.components.schemas[`${type}_resource`].properties.attributes.properties;
  return FIELDS.filter((name) => props[name] && !props[name].readOnly).map((name) => {
    const s = props[name];
    const types = [s.type].flat();
    return {
      name,
      kind: types.includes('boolean') ? 'bool' : types.includes('integer') ? 'integer' : 'text',
      nullable: types.includes('null'),
      required: (s.minLength ?? 0) > 0,
      maxLength: s.maxLength,
      maxBytes: s['x-max-bytes'],
      minimum: s.minimum,
    };
  });
}

/** The to-one relationship a resource of `type` is written with, if any. */
function parentOf(type) {
  const name = TYPES[type].parent;
  return name ? { name, type: `${name}s`, nullable: name === 'module' } : null;
}

const encoder = new TextEncoder();

/** What is wrong with `value` for `rule`, or null. */
function problem(rule, value) {
  if (rule.kind === 'integer') {
    if (value === '') return t('rule.required');
    if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(Number(value))) return t('rule.integer');
    if (rule.minimum !== undefined && Number(value) < rule.minimum) return t('rule.minimum', { n: rule.minimum });
    return null;
  }
  if (rule.kind !== 'text') return null;
  if (rule.required && !value.trim()) return t('rule.required');
  const length = [...value].length;
  if (rule.maxLength !== undefined && length > rule.maxLength) return t('rule.maxLength', { n: rule.maxLength, length });
  if (rule.maxBytes !== undefined && encoder.encode(value).length > rule.maxBytes) return t('rule.maxBytes', { n: Math.round(rule.maxBytes / 1024) });
  return null;
}

/** A value as its control holds it: a text area keeps line breaks as LF only, a one-line box
 * none. Values are compared in this form, so that what the browser rewrote by itself (a CRLF
 * from another client) is neither sent back as a change nor taken for the user's. */
function normal(rule, value) {
  if (typeof value !== 'string') return value ?? null;
  return LONG.has(rule.name) ? value.replace(/\r\n?/g, '\n') : value.replace(/[\r\n]/g, '');
}

/** Whether two values of `rule`'s field are the same once as their control would hold them. */
function sameValue(rule, a, b) {
  return same(normal(rule, a), normal(rule, b));
}

/** A field's value as the API takes it. */
function toApi(rule, value) {
  if (rule.kind === 'bool') return Boolean(value);
  if (rule.kind === 'integer') return Number(value);
  if (rule.nullable && value.trim() === '') return null;
  return value;
}

/** A value of the API as a control shows it. */
function toControl(rule, value) {
  if (rule.kind === 'bool') return Boolean(value);
  if (value === null || value === undefined) return rule.kind === 'integer' ? '0' : '';
  return String(value);
}

/** One field: label, help, control, and where its problem is said. */
function field(rule, value, onChange) {
  const id = `field-${rule.name}`;
  const errorId = `${id}-error`;
  const helpId = `${id}-help`;
  const error = h('p', { id: errorId, class: 'field-error' });
  const helpText = rule.kind === 'text' ? [rule.required ? t('rule.help.required') : t('rule.help.optional'), rule.maxLength ? t('rule.help.max', { n: rule.maxLength }) : null, rule.maxBytes ? t('rule.help.bytes', { n: Math.floor(rule.maxBytes / 1024) }) : null].filter(Boolean).join(' ') : rule.kind === 'integer' ? t('rule.help.integer', { n: rule.minimum ?? 0 }) : null;
  const help = helpText ? h('p', { id: helpId, class: 'help' }, helpText) : null;
  const described = [help ? helpId : null, errorId].filter(Boolean).join(' ');
  let control;
  if (rule.kind === 'bool') {
    control = h('input', { id, name: rule.name, type: 'checkbox', checked: value, 'aria-describedby': errorId });
    const wrap = h('div', { class: 'field check' }, control, h('label', { for: id }, t(`field.${rule.name}`)), error);
    control.addEventListener('change', onChange);
    return { rule, wrap, control, error, get: () => control.checked, set: (v) => { control.checked = v; } };
  }
  if (LONG.has(rule.name)) {
    control = h('textarea', { id, name: rule.name, rows: rule.name === 'content' ? 12 : 4, 'aria-describedby': described, required: rule.required, spellcheck: 'true' });
    control.value = value;
  } else {
    control = h('input', {
      id,
      name: rule.name,
      type: rule.kind === 'integer' ? 'number' : 'text',
      inputmode: rule.kind === 'integer' ? 'numeric' : null,
      min: rule.kind === 'integer' ? rule.minimum : null,
      step: rule.kind === 'integer' ? 1 : null,
      value,
      'aria-describedby': described,
      required: rule.required,
      autocomplete: 'off',
    });
  }
  const label = h('label', { for: id }, t(`field.${rule.name}`), rule.required ? h('span', { 'aria-hidden': 'true' }, ' *') : null);
  const wrap = h('div', { class: 'field' }, label, help, control, error);
  const check = () => {
    const wrong = problem(rule, control.value);
    error.textContent = wrong ?? '';
    if (wrong) control.setAttribute('aria-invalid', 'true');
    else control.removeAttribute('aria-invalid');
    return wrong;
  };
  control.addEventListener('input', () => {
    check();
    onChange();
  });
  return { rule, wrap, control, error, check, get: () => control.value, set: (v) => { control.value = v; check(); } };
}

/** The picker of a resource's parent (a subject's module, a chapter's subject): a box to
 * find one by its words, and the list to choose from. */
function parentPicker(parent, current, onChange) {
  const id = `field-${parent.name}`;
  const findId = `${id}-find`;
  const errorId = `${id}-error`;
  const error = h('p', { id: errorId, class: 'field-error' });
  // How many the box found, said to screen readers as the list changes.
  const found = h('p', { class: 'help', 'aria-live': 'polite' });
  const select = h('select', { id, name: parent.name, 'aria-describedby': errorId, required: !parent.nullable });
  const find = h('input', { id: findId, type: 'search', autocomplete: 'off', maxlength: 200 });
  let chosen = current;
  const fill = (resources) => {
    const options = [];
    if (parent.nullable) options.push(h('option', { value: '' }, t('module.none')));
    else if (!chosen) options.push(h('option', { value: '' }, t('choose')));
    if (chosen && !resources.some((r) => r.id === chosen.id)) resources = [chosen, ...resources];
    for (const r of resources) options.push(h('option', { value: r.id }, r.attributes?.title ?? r.id));
    select.replaceChildren(...options);
    select.value = chosen?.id ?? '';
  };
  let asked = 0;
  const load = async (words) => {
    const mine = ++asked;
    const params = words ? { 'filter[search]': words, 'page[size]': 50 } : { sort: 'title', 'page[size]': 100 };
    try {
      const { doc } = await call('GET', `/${parent.type}${query({ ...params, [`fields[${parent.type}]`]: 'title' })}`);
      // An answer to a box's older words is not shown over a newer one.
      if (mine !== asked) return;
      fill(doc.data);
      error.textContent = words && !doc.data.length ? t('find.nothing') : '';
      found.textContent = words ? t('find.found', { n: doc.data.length }) : '';
    } catch (e) {
      error.textContent = e.message;
    }
  };
  let timer = null;
  find.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => load(find.value.trim()), 250);
  });
  select.addEventListener('change', () => {
    const option = select.selectedOptions[0];
    chosen = select.value ? { type: parent.type, id: select.value, attributes: { title: option?.textContent } } : null;
    error.textContent = '';
    select.removeAttribute('aria-invalid');
    onChange();
  });
  fill([]);
  const ready = load('');
  const wrap = h(
    'fieldset',
    { class: 'field parent' },
    h('legend', null, t(`field.${parent.name}`)),
    h('label', { for: findId }, t(`find.${parent.name}`)),
    find,
    found,
    h('label', { for: id }, t(`choose.${parent.name}`)),
    select,
    error,
  );
  return {
    wrap,
    control: select,
    error,
    ready,
    get: () => (select.value ? { type: parent.type, id: select.value } : null),
    set: (r) => {
      chosen = r;
      fill([...select.options].filter((o) => o.value).map((o) => ({ id: o.value, attributes: { title: o.textContent } })));
    },
  };
}

/** The form of `type`: its fields, the parent picker, a place for the form's own errors.
 * `values` are the attributes to start with, `parent` the parent resource (or null). */
async function form(type, values, parent, onChange) {
  const fields = (await rules(type)).map((rule) => field(rule, toControl(rule, values[rule.name]), onChange));
  const relation = parentOf(type);
  const picker = relation ? parentPicker(relation, parent, onChange) : null;
  if (picker) await picker.ready;
  const summary = h('div', { class: 'summary', role: 'alert', tabindex: '-1' });
  const parts = [summary, fields.map((f) => f.wrap), picker?.wrap];
  // A module's content is HTML: edited as source, shown beside it as a page would show it.
  const content = fields.find((f) => f.rule.name === 'content');
  if (type === 'modules' && content) {
    const frame = preview(content.get(), t('preview.label'));
    let timer = null;
    content.control.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => { frame.srcdoc = content.get(); }, 300);
    });
    content.wrap.append(h('p', { class: 'help' }, t('preview.help')), frame);
  }
  return { fields, picker, summary, parts };
}

/** What the form holds, as the API's members: `{attributes, relationships}`. */
function collect(type, f) {
  const attributes = {};
  for (const field of f.fields) attributes[field.rule.name] = toApi(field.rule, field.get());
  const relationships = {};
  const relation = parentOf(type);
  if (relation && f.picker) relationships[relation.name] = { data: f.picker.get() };
  return { attributes, relationships };
}

/** Checks every field; focuses the first wrong one. */
function checkAll(f) {
  let first = null;
  for (const field of f.fields) {
    if (field.check?.() && !first) first = field.control;
  }
  const relation = f.picker && !f.picker.control.required ? null : f.picker;
  if (relation && !relation.get()) {
    relation.error.textContent = t('rule.required');
    relation.control.setAttribute('aria-invalid', 'true');
    first ??= relation.control;
  }
  if (first) {
    f.summary.textContent = t('form.fix');
    first.focus();
  }
  return !first;
}

/** Shows the server's errors: each next to the field its `source.pointer` names, the others
 * above the form. */
function showErrors(f, e) {
  const loose = [];
  let first = null;
  for (const error of e.errors.length ? e.errors : [{ detail: e.message }]) {
    const pointer = error.source?.pointer ?? '';
    const name = pointer.match(/^\/data\/(?:attributes|relationships)\/([^/]+)/)?.[1];
    const target = f.fields.find((x) => x.rule.name === name) ?? (f.picker && name === f.picker.control.name ? f.picker : null);
    const text = e.status === 401 ? t('error.unauthorized') : error.detail ?? error.title ?? e.message;
    if (target) {
      target.error.textContent = text;
      target.control.setAttribute('aria-invalid', 'true');
      first ??= target.control;
    } else {
      loose.push(text);
    }
  }
  f.summary.replaceChildren(...(loose.length ? [h('p', null, t('form.refused')), h('ul', null, loose.map((x) => h('li', null, x)))] : [t('form.fix')]));
  (first ?? f.summary).focus();
}

function buttons(cancelHref, saveLabel) {
  const save = h('button', { type: 'submit' }, saveLabel);
  return { save, bar: h('p', { class: 'actions' }, save, ' ', h('a', { href: cancelHref, class: 'button secondary' }, t('cancel'))) };
}

/** `/console/{type}/new`: a new resource (`?module=ID`, `?subject=ID`: in that parent). */
export async function create(ctx, type) {
  if (!ctx.writes) throw new ApiError(404, []);
  const info = TYPES[type];
  const relation = parentOf(type);
  let parent = null;
  const parentId = relation ? ctx.params.get(relation.name) : null;
  if (parentId) parent = (await read(relation.type, parentId)).resource;
  let dirty = false;
  const f = await form(type, type === 'chapters' ? { position: 0 } : {}, parent, () => { dirty = true; });
  ctx.setUnsaved(() => dirty);
  const back = parent ? href(relation.type, parent.id) : type === 'modules' ? '/console/modules' : '/console/subjects';
  const { save, bar } = buttons(back, t('create'));
  const el = h('form', { class: 'edit', novalidate: true }, f.parts, bar);
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!checkAll(f)) return;
    const { attributes, relationships } = collect(type, f);
    const data = { type, attributes };
    if (relationships[relation?.name]?.data) data.relationships = relationships;
    save.disabled = true;
    try {
      const { doc } = await call('POST', `/${type}`, { body: { data } });
      ctx.setUnsaved(null);
      ctx.flash(t('created', { title: doc.data.attributes.title }));
      ctx.navigate(href(type, doc.data.id));
    } catch (e) {
      save.disabled = false;
      showErrors(f, e);
    }
  });
  const title = t(`${type}.new`);
  return { title, body: [h('h1', null, title), parent ? h('p', null, t(`in.${relation.name}`, { title: parent.attributes.title })) : null, el] };
}

/** `/console/{type}/{id}/edit`: a resource's fields, its parent (moving it), saved with the
 * tag it was read with. */
export async function update(ctx, type, id) {
  if (!ctx.writes) throw new ApiError(404, []);
  const relation = parentOf(type);
  let { resource, parent, etag } = await read(type, id);
  let dirty = false;
  const f = await form(type, resource.attributes, parent, () => { dirty = true; });
  ctx.setUnsaved(() => dirty);
  // What the edit started from: what counts as a change, and what a conflict is against.
  let base = snapshot(resource, parent);
  const { save, bar } = buttons(href(type, id), t('save'));
  const conflictArea = h('div');
  // The fields, locked while a conflict waits for the user's choice (what they would type
  // then would be replaced by the choice).
  const fieldsBox = h('div', null, f.parts);
  const heading = h('h1', null, t('edit.title', { title: resource.attributes.title }));
  const el = h('form', { class: 'edit', novalidate: true }, conflictArea, fieldsBox, bar);
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (fieldsBox.inert || !checkAll(f)) return;
    if (!etag) {
      // Without the tag it was read with, a save could overwrite unseen: never sent.
      f.summary.replaceChildren(t('form.untagged'));
      f.summary.focus();
      return;
    }
    const mine = collect(type, f);
    const data = { type, id: resource.id, attributes: {} };
    for (const field of f.fields) {
      const name = field.rule.name;
      if (!sameValue(field.rule, mine.attributes[name], base.attributes[name])) data.attributes[name] = mine.attributes[name];
    }
    if (relation && !same(mine.relationships[relation.name].data?.id ?? null, base.parent)) data.relationships = { [relation.name]: mine.relationships[relation.name] };
    if (!Object.keys(data.attributes).length && !data.relationships) {
      ctx.setUnsaved(null);
      ctx.flash(t('unchanged'));
      ctx.navigate(href(type, id));
      return;
    }
    save.disabled = true;
    try {
      await call('PATCH', `/${type}/${encodeURIComponent(resource.id)}`, { body: { data }, ifMatch: etag });
      ctx.setUnsaved(null);
      ctx.flash(t('saved', { title: mine.attributes.title ?? resource.attributes.title }));
      ctx.navigate(href(type, id));
    } catch (e) {
      save.disabled = false;
      if (!(e instanceof ApiError) || e.status !== 412) {
        showErrors(f, e);
        return;
      }
      // Someone saved meanwhile: read what they saved, and let the user choose.
      let theirs;
      try {
        theirs = await read(type, id);
      } catch (gone) {
        f.summary.replaceChildren(gone instanceof ApiError && gone.status === 404 ? t('conflict.deleted') : gone.message);
        f.summary.focus();
        return;
      }
      fieldsBox.inert = true;
      save.disabled = true;
      conflictArea.replaceChildren(conflict(type, f, base, mine, theirs, (chosen) => {
        // The choice becomes the form, based on their version: saving sends it with their tag.
        resource = theirs.resource;
        etag = theirs.etag;
        base = snapshot(theirs.resource, theirs.parent);
        for (const field of f.fields) field.set(toControl(field.rule, chosen.attributes[field.rule.name]));
        if (f.picker) f.picker.set(chosen.parent);
        fieldsBox.inert = false;
        save.disabled = false;
        heading.textContent = t('edit.title', { title: resource.attributes.title });
        conflictArea.replaceChildren(h('p', { class: 'flash', tabindex: '-1' }, t('conflict.applied')));
        conflictArea.firstChild.focus();
      }));
      conflictArea.querySelector('h2').focus();
    }
  });
  return { title: heading.textContent, body: [heading, el] };
}

/** The members an edit compares: attributes as the API has them, and the parent's id. */
function snapshot(resource, parent) {
  return { attributes: { ...resource.attributes }, parent: parent?.id ?? null };
}

function same(a, b) {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** The conflict: for each field someone else changed, their value beside the user's, and a
 * choice (the user's value is kept where only they changed it, theirs where only they did).
 * Values are compared as the form's controls hold them (see `normal`). */
function conflict(type, f, base, mine, theirs, apply) {
  const relation = parentOf(type);
  const rows = [];
  const chosen = { attributes: { ...mine.attributes }, parent: null };
  const theirAttributes = theirs.resource.attributes;
  for (const field of f.fields) {
    const { rule } = field;
    const name = rule.name;
    const theirsChanged = !sameValue(rule, theirAttributes[name], base.attributes[name]);
    const mineChanged = !sameValue(rule, mine.attributes[name], base.attributes[name]);
    if (!theirsChanged) continue;
    if (!mineChanged || sameValue(rule, theirAttributes[name], mine.attributes[name])) {
      chosen.attributes[name] = theirAttributes[name];
      continue;
    }
    rows.push({ label: t(`field.${name}`), theirs: theirAttributes[name], mine: mine.attributes[name], set: (which) => { chosen.attributes[name] = which === 'mine' ? mine.attributes[name] : theirAttributes[name]; } });
  }
  if (relation) {
    const myParentId = mine.relationships[relation.name].data?.id ?? null;
    const theirParent = theirs.parent;
    const myParent = myParentId ? { id: myParentId, type: relation.type, attributes: { title: f.picker.control.selectedOptions[0]?.textContent } } : null;
    const theirsChanged = !same(theirParent?.id ?? null, base.parent);
    const mineChanged = !same(myParentId, base.parent);
    chosen.parent = theirsChanged && !mineChanged ? theirParent : myParent;
    if (theirsChanged && mineChanged && !same(theirParent?.id ?? null, myParentId)) {
      const title = (r) => (r ? r.attributes?.title ?? r.id : t('module.none'));
      rows.push({ label: t(`field.${relation.name}`), theirs: title(theirParent), mine: title(myParent), set: (which) => { chosen.parent = which === 'mine' ? myParent : theirParent; } });
    }
  }
  const heading = uid('conflict');
  const section = h('section', { class: 'conflict', 'aria-labelledby': heading },
    h('h2', { id: heading, tabindex: '-1' }, t('conflict.title')),
    h('p', null, t('conflict.intro')));
  if (!rows.length) section.append(h('p', null, t('conflict.nothing')));
  for (const row of rows) {
    const group = uid('choice');
    const show = (v) => (typeof v === 'string' ? v : v === null || v === undefined ? t('none') : String(v));
    const radio = (which, label) => {
      const radioId = `${group}-${which}`;
      const input = h('input', { type: 'radio', id: radioId, name: group, value: which, checked: which === 'mine' });
      input.addEventListener('change', () => row.set(which));
      return h('div', { class: 'choice' }, input, h('label', { for: radioId }, label));
    };
    section.append(
      h('fieldset', { class: 'versions' },
        h('legend', null, row.label),
        h('div', { class: 'side' }, h('h3', null, t('conflict.theirs')), h('div', { class: 'value' }, show(row.theirs))),
        h('div', { class: 'side' }, h('h3', null, t('conflict.mine')), h('div', { class: 'value' }, show(row.mine))),
        radio('theirs', t('conflict.takeTheirs')),
        radio('mine', t('conflict.keepMine'))),
    );
  }
  const use = h('button', { type: 'button' }, t('conflict.apply'));
  use.addEventListener('click', () => apply(chosen));
  section.append(h('p', { class: 'actions' }, use));
  return section;
}
