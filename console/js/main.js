// The console's frame: which view a URL names, the header, signing in and out, and moving
// between views with the browser's own history (every view has its URL: back, forward,
// reload and a shared link all work).

import { ApiError, onUnauthorized, session, whoami } from './api.js';
import { announce, h, replace } from './dom.js';
import * as edit from './edit.js';
import { historyView } from './history.js';
import { reference } from './reference.js';
import { applyLanguage, t } from './strings.js';
import * as views from './views.js';

const TYPE = '(modules|subjects|chapters)';
const ID = '([^/]+)';

/** The views, by path: each takes the context and resolves to `{title, body}`. */
const ROUTES = [
  [/^\/(console\/?)?$/, views.modules],
  [/^\/console\/modules$/, views.modules],
  [/^\/console\/subjects$/, views.unfiled],
  [/^\/console\/search$/, views.search],
  [/^\/console\/api$/, reference],
  [new RegExp(`^/console/${TYPE}/new$`), (ctx) => edit.create(ctx, ctx.match[1])],
  [new RegExp(`^/console/${TYPE}/${ID}$`), (ctx) => views.item(ctx, ctx.match[1], ctx.match[2])],
  [new RegExp(`^/console/${TYPE}/${ID}/edit$`), (ctx) => edit.update(ctx, ctx.match[1], ctx.match[2])],
  [new RegExp(`^/console/${TYPE}/${ID}/history$`), (ctx) => historyView(ctx, ctx.match[1], ctx.match[2])],
];

const SIGN_IN = '/console/signin';

/** What leaving the current view would lose, if anything (set by a form with changes). */
let unsaved = null;
function setUnsaved(check) {
  unsaved = check;
}

/** A sentence for the next view to show first (what the last action did). */
let flashed = null;
function flash(message) {
  flashed = message;
}

/** The URL of the view shown (to go back to when leaving it is cancelled). */
let shownUrl = null;

/** Goes to `url` (a path of the console) as a new entry of the history, or in place of the
 * current one. */
export function navigate(url, { replace: inPlace = false } = {}) {
  if (unsaved?.() && !window.confirm(t('leave.confirm'))) return;
  unsaved = null;
  if (inPlace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  render();
}

let rendering = 0;

/** Shows the view of the current URL. */
async function render() {
  const mine = ++rendering;
  const main = document.getElementById('main');
  const { pathname, search } = window.location;
  shownUrl = pathname + search;
  const params = new URLSearchParams(search);
  if (pathname === SIGN_IN) {
    show(mine, signInView(params.get('next')));
    return;
  }
  const caller = session.caller();
  if (!session.token() || !caller) {
    navigate(`${SIGN_IN}?next=${encodeURIComponent(pathname + search)}`, { replace: true });
    return;
  }
  header(caller, pathname);
  const route = ROUTES.find(([pattern]) => pattern.test(pathname));
  main.setAttribute('aria-busy', 'true');
  let shown;
  try {
    if (!route) throw new ApiError(404, []);
    const match = pathname.match(route[0]).map((part) => (part === undefined ? part : decodeURIComponent(part)));
    shown = await route[1]({ match, params, caller, writes: Boolean(caller.writes), navigate, setUnsaved, flash, rerender: render });
  } catch (e) {
    shown = failure(e);
  }
  show(mine, shown);
}

function show(mine, { title, body }) {
  if (mine !== rendering) return;
  const main = document.getElementById('main');
  main.removeAttribute('aria-busy');
  const flash = flashed ? h('p', { class: 'flash' }, flashed) : null;
  flashed = null;
  const said = flash?.textContent;
  replace(main, flash, body);
  document.title = `${title} · coursed`;
  // Screen readers and keyboards start at the new view's heading.
  const heading = main.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: true });
  }
  window.scrollTo(0, 0);
  announce(said ? `${said} ${title}` : title);
  // When the view was shown, for whoever measures (bench/console-load.sh).
  performance.mark('coursed:view', { detail: window.location.pathname });
}

/** The view of an error: what the API said, in words. */
export function failure(e) {
  if (!(e instanceof ApiError)) {
    console.error(e);
    return { title: t('error.title'), body: [h('h1', null, t('error.title')), h('p', { role: 'alert' }, String(e?.message ?? e))] };
  }
  const title = e.status === 404 ? t('notfound.title') : t('error.title');
  // A resource's page that finds nothing: it may have been deleted, and its history keeps it.
  const resource = window.location.pathname.match(/^\/console\/(modules|subjects|chapters)\/([^/]+)$/);
  return {
    title,
    body: [
      h('h1', null, title),
      h('p', { role: 'alert' }, e.status === 404 ? t('notfound.text') : e.message),
      resource && e.status === 404 ? h('p', null, h('a', { href: `${resource[0]}/history` }, t('notfound.history'))) : null,
      h('p', null, h('a', { href: '/console/modules' }, t('nav.modules'))),
    ],
  };
}

/** The header: where to go, the search box, who is signed in. */
function header(caller, pathname) {
  const top = document.getElementById('top');
  const current = (path) => (pathname === path || (path === '/console/modules' && /^\/(console\/?)?$/.test(pathname)) ? 'page' : null);
  const link = (path, label) => h('li', null, h('a', { href: path, 'aria-current': current(path) }, label));
  const q = pathname === '/console/search' ? new URLSearchParams(window.location.search).get('q') ?? '' : '';
  replace(
    top,
    h('a', { class: 'brand', href: '/console/modules' }, 'coursed'),
    h(
      'nav',
      { 'aria-label': t('nav.label') },
      h('ul', null, link('/console/modules', t('nav.modules')), link('/console/subjects', t('nav.unfiled')), link('/console/api', t('nav.api'))),
    ),
    h(
      'form',
      { role: 'search', class: 'search', action: '/console/search', onsubmit: searchSubmitted },
      h('label', { for: 'search-q', class: 'visually-hidden' }, t('search.label')),
      h('input', { id: 'search-q', name: 'q', type: 'search', value: q, placeholder: t('search.placeholder'), maxlength: 200, required: true }),
      h('button', { type: 'submit' }, t('search.button')),
    ),
    h(
      'div',
      { class: 'who' },
      h('span', null, t('signedin.as', { name: caller.name }), ' ', h('span', { class: 'scope' }, caller.writes ? t('scope.write') : t('scope.read'))),
      h('button', { type: 'button', onclick: signOut }, t('signout')),
    ),
  );
}

function searchSubmitted(event) {
  event.preventDefault();
  const q = new FormData(event.target).get('q').trim();
  if (q) navigate(`/console/search?q=${encodeURIComponent(q)}`);
}

function signOut() {
  if (unsaved?.() && !window.confirm(t('leave.confirm'))) return;
  unsaved = null;
  session.signOut();
  replace(document.getElementById('top'));
  navigate(SIGN_IN);
  announce(t('signedout'));
}

/** The sign-in page: a token, checked against the API before it is kept. */
function signInView(next) {
  replace(document.getElementById('top'), h('span', { class: 'brand' }, 'coursed'));
  const error = h('p', { id: 'token-error', class: 'field-error', role: 'alert' });
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'token-help token-error',
  });
  const button = h('button', { type: 'submit' }, t('signin.button'));
  const form = h(
    'form',
    { class: 'signin', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'token' }, t('signin.token')),
      h('p', { id: 'token-help', class: 'help' }, t('signin.help')),
      input,
      error),
    button,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) {
      error.textContent = t('signin.empty');
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      const caller = await whoami(token);
      session.signIn(token, caller ?? { name: '?', scope: 'read', writes: false });
      navigate(ownView(next) ?? '/console/modules', { replace: true });
    } catch (e) {
      error.textContent = e instanceof ApiError && e.status === 401 ? t('signin.refused') : e.message;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  return { title: t('signin.title'), body: [h('h1', null, t('signin.title')), h('p', null, t('signin.intro')), form] };
}

/** `next` as a path of the console's own views on this origin, or null. */
function ownView(next) {
  try {
    const url = new URL(next ?? '', window.location.origin);
    const ours = url.origin === window.location.origin && (url.pathname === '/' || url.pathname.startsWith('/console/'));
    return next && ours && !url.pathname.startsWith(SIGN_IN) ? url.pathname + url.search : null;
  } catch {
    return null;
  }
}

/** When the token is refused in the middle of an edit: a dialog to sign in again, so that the
 * form and what it holds stay, and the user saves again once signed in. */
function renew() {
  if (document.getElementById('renew')) return;
  const input = h('input', { id: 'renew-token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'renew-error' });
  const error = h('p', { id: 'renew-error', class: 'field-error', role: 'alert' });
  const cancel = h('button', { type: 'button', class: 'secondary' }, t('cancel'));
  const form = h('form', { novalidate: true },
    h('h2', { id: 'renew-title' }, t('renew.title')),
    h('p', null, t('renew.text')),
    h('div', { class: 'field' }, h('label', { for: 'renew-token' }, t('signin.token')), input, error),
    h('p', { class: 'actions' }, h('button', { type: 'submit' }, t('signin.button')), ' ', cancel));
  const dialog = h('dialog', { id: 'renew', 'aria-labelledby': 'renew-title' }, form);
  const close = () => {
    dialog.close();
    dialog.remove();
  };
  cancel.addEventListener('click', close);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const caller = await whoami(input.value.trim());
      session.signIn(input.value.trim(), caller);
      close();
      announce(t('renew.done'));
    } catch (e) {
      error.textContent = e instanceof ApiError && e.status === 401 ? t('signin.refused') : e.message;
      input.focus();
    }
  });
  document.body.append(dialog);
  dialog.showModal();
}

/** Links to the console's own views move within the page; any other link is left alone. */
function clicked(event) {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const a = event.target.closest?.('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, window.location.href);
  if (url.origin !== window.location.origin || !(url.pathname === '/' || url.pathname.startsWith('/console'))) return;
  if (url.pathname.startsWith('/console/assets/')) return;
  event.preventDefault();
  if (url.hash && url.pathname === window.location.pathname && url.search === window.location.search) {
    document.querySelector(url.hash)?.focus();
    return;
  }
  navigate(url.pathname + url.search);
}

function start() {
  applyLanguage();
  document.getElementById('skip').textContent = t('skip');
  onUnauthorized(() => {
    // A form with changes stays, its error said in it: what was typed is not lost, and the
    // token can be renewed in another tab before saving again.
    if (unsaved?.()) {
      renew();
      return;
    }
    session.signOut();
    navigate(`${SIGN_IN}?next=${encodeURIComponent(window.location.pathname + window.location.search)}`, { replace: true });
  });
  document.addEventListener('click', clicked);
  window.addEventListener('popstate', () => {
    if (unsaved?.() && !window.confirm(t('leave.confirm'))) {
      // Back or forward was pressed: the entry of the view being edited comes back.
      window.history.pushState(null, '', shownUrl);
      return;
    }
    unsaved = null;
    render();
  });
  window.addEventListener('beforeunload', (event) => {
    if (unsaved?.()) event.preventDefault();
  });
  render();
}

start();
