// The editor console as a teacher uses it, in Debian's Chromium: found by roles and labels
// (as a screen reader finds it), axe-core on every view, and every request checked to stay
// on the server's own origin.
//
// Runs against the debug binary that `cargo build` (or `cargo test`) made, or $COURSED_BIN;
// Chromium is /usr/bin/chromium or $COURSED_TEST_CHROMIUM. Without Chromium the run fails
// (it is never skipped): `.ci/run` installs it. The catalogue is a fresh SQLite file, or, with
// COURSED_TEST_ENGINE=postgres, a database on a throwaway PostgreSQL cluster that the run
// starts and removes itself (bench/pg.py, from Debian's server binaries).

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const BIN = process.env.COURSED_BIN ?? join(root, 'target', 'debug', 'coursed');
const CHROMIUM = process.env.COURSED_TEST_CHROMIUM ?? '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const WRITER = 'console-writer-token';
const ENGINE = process.env.COURSED_TEST_ENGINE ?? 'sqlite';
/** Where the throwaway PostgreSQL cluster lives (a folder its server's user can reach). */
const PG_ROOT = join('/tmp', `coursed-console-pg-${process.pid}`);

let dir;
/** The catalogue: a SQLite file or a PostgreSQL URL. */
let databaseUrl;
let server;
let base;
let reader;
let browser;
/** Every URL the browser asked for, to check that none is on another host. */
const requested = [];
/** The requests that failed, and why. */
const failed = new Map();
/** Uncaught errors of the console's pages. */
const pageErrors = [];

/** Starts `coursed serve` on port 0 and resolves to its origin, from its readiness line. */
function start(args) {
  const child = spawn(BIN, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('coursed did not say it was listening within 30 s')), 30_000);
    let seen = '';
    const read = (chunk) => {
      seen += chunk;
      const m = seen.match(/listening on (http:\/\/127\.0\.0\.1:\d+)\/v1/);
      if (m) {
        clearTimeout(timer);
        resolve({ child, origin: m[1] });
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => reject(new Error(`coursed exited (${code}) before listening:\n${seen}`)));
  });
}

before(async () => {
  assert.ok(existsSync(BIN), `no coursed binary at ${BIN}: run cargo build first`);
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install chromium`);
  dir = mkdtempSync(join(tmpdir(), 'coursed-console-'));
  assert.ok(ENGINE === 'sqlite' || ENGINE === 'postgres', `COURSED_TEST_ENGINE=${ENGINE}: sqlite or postgres`);
  const database = ENGINE === 'postgres'
    ? execFileSync('python3', [join(root, 'bench', 'pg.py'), 'start', PG_ROOT], { encoding: 'utf8' }).trim()
    : join(dir, 'console.db');
  databaseUrl = database;
  server = await start(['--database', database, '--token', WRITER]);
  // Made in the database the server made (`coursed token create` makes none).
  reader = execFileSync(BIN, ['token', 'create', '--database', database, '--name', 'reader', '--scope', 'read'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  base = server.origin;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  server?.child.kill('SIGTERM');
  if (server) await new Promise((resolve) => (server.child.exitCode === null ? server.child.on('exit', resolve) : resolve()));
  if (ENGINE === 'postgres') execFileSync('python3', [join(root, 'bench', 'pg.py'), 'stop', PG_ROOT]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A new browser tab (a context of its own: its own sessionStorage), watched. */
async function tab(options = {}) {
  const context = await browser.newContext({ locale: 'en-US', ...options });
  const page = await context.newPage();
  page.on('request', (r) => requested.push(r.url()));
  page.on('requestfailed', (r) => failed.set(r.url(), r.failure()?.errorText));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('dialog', (d) => d.accept());
  return page;
}

/** Waits for the view whose heading is `name` (a string or a RegExp). */
async function view(page, name) {
  await page.getByRole('heading', { level: 1, name, exact: typeof name === 'string' }).waitFor({ timeout: 15_000 });
  await page.waitForFunction(() => !document.getElementById('main').hasAttribute('aria-busy'));
}

/** axe-core on the page as it is: no serious or critical violation. */
async function accessible(page, what) {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(bad, [], `${what}: accessibility violations ${JSON.stringify(bad, null, 2)}`);
}

/** The API, as the test sees it (with the writer's token). */
async function api(method, path, body, headers = {}) {
  const res = await fetch(`${base}/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${WRITER}`, Accept: 'application/vnd.api+json', ...(body ? { 'Content-Type': 'application/vnd.api+json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, etag: res.headers.get('etag'), doc: text ? JSON.parse(text) : null };
}

async function signIn(page, token, path = '/') {
  await page.goto(`${base}${path}`);
  await view(page, 'Sign in');
  await page.getByLabel('Token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test('the page is served from the binary with a strict policy', async () => {
  const res = await fetch(`${base}/`);
  assert.equal(res.status, 200);
  const csp = res.headers.get('content-security-policy');
  assert.match(csp, /default-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  const html = await res.text();
  const asset = html.match(/src="(\/console\/assets\/[0-9a-f]+\/js\/main\.js)"/)[1];
  const js = await fetch(`${base}${asset}`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get('cache-control'), /immutable/);
});

let moduleId;
let moduleTitle;
let subjectId;

test('sign in, refused and accepted', async () => {
  const page = await tab();
  await page.goto(`${base}/console/modules`);
  await view(page, 'Sign in');
  await accessible(page, 'sign in');
  await page.getByLabel('Token').fill('not-a-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('This token is not accepted').waitFor();
  await page.getByLabel('Token').fill(WRITER);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // Back where the link pointed.
  await view(page, 'Modules');
  assert.equal(new URL(page.url()).pathname, '/console/modules');
  await page.getByText('There are no modules yet.').waitFor();
  await accessible(page, 'empty modules');
  // Signing out forgets the token.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await view(page, 'Sign in');
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  await page.context().close();
});

test('create a module, a subject in it and a chapter; content runs no script', async () => {
  const page = await tab();
  await signIn(page, WRITER);
  await view(page, 'Modules');
  await page.getByRole('link', { name: 'New module' }).click();
  await view(page, 'New module');
  await accessible(page, 'new module');
  const title = page.getByLabel('Title');
  // Rules checked as the user types.
  await title.fill('x'.repeat(256));
  await page.getByText('At most 255 characters (now 256).').waitFor();
  await title.fill('   ');
  await page.getByText('Required.', { exact: true }).first().waitFor();
  assert.equal(await title.getAttribute('aria-invalid'), 'true');
  moduleTitle = 'Photosynthesis basics';
  await title.fill(moduleTitle);
  assert.equal(await title.getAttribute('aria-invalid'), null);
  await page.getByLabel('Introduction').fill('How plants turn light into sugar.');
  const hostile = '<h2>Leaves</h2><p>Light and water.</p><script>parent.document.title = "ran"; document.title = "ran";</script>'
    + '<img src="http://198.51.100.7/x.png" alt="remote" onerror="parent.document.title=\'ran\'">';
  await page.getByLabel('Content').fill(hostile);
  // The preview shows the markup, in a sandboxed frame.
  const frame = page.frameLocator('iframe[title="Preview of the content"]');
  await frame.getByRole('heading', { name: 'Leaves' }).waitFor();
  await page.getByRole('button', { name: 'Create' }).click();
  await view(page, moduleTitle);
  await page.getByRole('main').getByText(`Created “${moduleTitle}”.`).waitFor();
  moduleId = new URL(page.url()).pathname.split('/').pop();
  await page.frameLocator('iframe[title="Preview of the content"]').getByText('Light and water.').waitFor();
  assert.notEqual(await page.title(), 'ran');
  assert.equal(await page.evaluate(() => document.querySelector('iframe').getAttribute('sandbox')), '');
  await accessible(page, 'module');

  // A second module with the same external id: the server's error is shown at its field.
  await api('POST', '/modules', { data: { type: 'modules', attributes: { title: 'Taken', external_id: 'mod-1' } } });
  await page.getByRole('link', { name: 'Modules', exact: true }).first().click();
  await view(page, 'Modules');
  await page.getByRole('link', { name: 'New module' }).click();
  await view(page, 'New module');
  await page.getByLabel('Title').fill('Duplicate');
  await page.getByLabel('External id').fill('mod-1');
  await page.getByRole('button', { name: 'Create' }).click();
  const external = page.getByLabel('External id');
  await page.waitForFunction(() => document.getElementById('field-external_id-error').textContent.length > 0);
  assert.equal(await external.getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#field-external_id-error').textContent(), /external_id|mod-1/);
  await page.getByRole('link', { name: 'Cancel' }).click();

  // A subject in the module, then a chapter in the subject.
  await page.getByRole('link', { name: moduleTitle }).click();
  await view(page, moduleTitle);
  await page.getByRole('link', { name: 'New subject' }).click();
  await view(page, 'New subject');
  await page.getByText(`In the module “${moduleTitle}”.`).waitFor();
  await accessible(page, 'new subject');
  await page.getByLabel('Title').fill('Chlorophyll');
  await page.getByLabel('Introduction').fill('The green pigment that catches light.');
  await page.getByRole('button', { name: 'Create' }).click();
  await view(page, 'Chlorophyll');
  subjectId = new URL(page.url()).pathname.split('/').pop();
  await page.getByRole('link', { name: moduleTitle }).waitFor();
  await page.getByRole('link', { name: 'New chapter' }).click();
  await view(page, 'New chapter');
  await accessible(page, 'new chapter');
  await page.getByLabel('Title').fill('Absorption spectrum');
  await page.getByLabel('Position').fill('2');
  await page.getByRole('button', { name: 'Create' }).click();
  await view(page, 'Absorption spectrum');
  await accessible(page, 'chapter');
  await page.getByRole('link', { name: 'Chlorophyll' }).click();
  await view(page, 'Chlorophyll');
  await page.getByRole('link', { name: 'Absorption spectrum' }).waitFor();
  await accessible(page, 'subject');
  const stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.relationships.module.data.id, moduleId);
  // The module list counts the subject.
  await page.getByRole('link', { name: 'Modules', exact: true }).first().click();
  await view(page, 'Modules');
  await page.getByText('1 subject', { exact: false }).first().waitFor();
  await page.context().close();
});

test('search finds with highlighted excerpts, and opens a result; back, forward and reload', async () => {
  const page = await tab();
  await signIn(page, WRITER);
  await view(page, 'Modules');
  const box = page.getByRole('searchbox', { name: 'Search everything' });
  await box.fill('pigment');
  await box.press('Enter');
  await view(page, 'Search: pigment');
  await accessible(page, 'search');
  const mark = page.locator('.excerpt mark');
  await mark.first().waitFor();
  assert.equal((await mark.first().textContent()).toLowerCase(), 'pigment');
  await page.getByRole('link', { name: 'Chlorophyll' }).click();
  await view(page, 'Chlorophyll');
  await page.goBack();
  await view(page, 'Search: pigment');
  await page.goForward();
  await view(page, 'Chlorophyll');
  await page.reload();
  await view(page, 'Chlorophyll');
  // A malformed search is said, not failed.
  await box.fill('"unclosed');
  await box.press('Enter');
  await page.getByRole('alert').filter({ hasText: 'filter[search]' }).or(page.getByRole('alert').filter({ hasText: '"' })).first().waitFor();
  await page.context().close();
});

test('two tabs edit one subject: the 412 is shown and resolved, nothing lost', async () => {
  const a = await tab();
  const b = await tab();
  await signIn(a, WRITER, `/console/subjects/${subjectId}/edit`);
  await view(a, 'Edit “Chlorophyll”');
  await accessible(a, 'edit subject');
  await signIn(b, WRITER, `/console/subjects/${subjectId}/edit`);
  await view(b, 'Edit “Chlorophyll”');
  // B saves first.
  await b.getByLabel('Introduction').fill('Theirs: the pigment of leaves.');
  await b.getByRole('button', { name: 'Save' }).click();
  await view(b, 'Chlorophyll');
  // A saves a change to the same field and another: refused, and shown side by side.
  await a.getByLabel('Title').fill('Chlorophyll a and b');
  await a.getByLabel('Introduction').fill('Mine: two pigments.');
  await a.getByRole('button', { name: 'Save' }).click();
  await a.getByRole('heading', { name: 'Changed by someone else meanwhile' }).waitFor();
  await accessible(a, 'conflict');
  const group = a.getByRole('group', { name: 'Introduction' });
  await group.getByText('Theirs: the pigment of leaves.').waitFor();
  await group.getByText('Mine: two pigments.').waitFor();
  // Nothing of A's was saved yet.
  let stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.attributes.introduction, 'Theirs: the pigment of leaves.');
  assert.equal(stored.doc.data.attributes.title, 'Chlorophyll');
  await group.getByLabel('Keep your version').check();
  await a.getByRole('button', { name: 'Put the chosen versions in the form' }).click();
  assert.equal(await a.getByLabel('Introduction').inputValue(), 'Mine: two pigments.');
  assert.equal(await a.getByLabel('Title').inputValue(), 'Chlorophyll a and b');
  await a.getByRole('button', { name: 'Save' }).click();
  await view(a, 'Chlorophyll a and b');
  stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.attributes.introduction, 'Mine: two pigments.');
  // Both saves are in the history.
  const revisions = await api('GET', `/subjects/${subjectId}/revisions`);
  assert.ok(revisions.doc.data.some((r) => r.attributes.changes.introduction?.after === 'Theirs: the pigment of leaves.'));
  await a.context().close();
  await b.context().close();
});

test('move a subject to another module and out of every module', async () => {
  const other = await api('POST', '/modules', { data: { type: 'modules', attributes: { title: 'Respiration' } } });
  const page = await tab();
  await signIn(page, WRITER, `/console/subjects/${subjectId}`);
  await view(page, 'Chlorophyll a and b');
  await page.getByRole('link', { name: 'Edit' }).click();
  await view(page, 'Edit “Chlorophyll a and b”');
  await page.getByLabel('Find a module by its words').fill('respiration');
  await page.getByRole('combobox', { name: 'Module' }).locator('option', { hasText: 'Respiration' }).waitFor({ state: 'attached' });
  await page.getByRole('combobox', { name: 'Module' }).selectOption({ label: 'Respiration' });
  await page.getByRole('button', { name: 'Save' }).click();
  await view(page, 'Chlorophyll a and b');
  await page.getByRole('link', { name: 'Respiration' }).waitFor();
  let stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.relationships.module.data.id, other.doc.data.id);
  // Out of every module: listed among the subjects without one.
  await page.getByRole('link', { name: 'Edit' }).click();
  await view(page, 'Edit “Chlorophyll a and b”');
  await page.getByRole('combobox', { name: 'Module' }).selectOption({ label: 'No module' });
  await page.getByRole('button', { name: 'Save' }).click();
  await view(page, 'Chlorophyll a and b');
  stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.relationships.module.data, null);
  await page.getByRole('link', { name: 'Subjects without a module' }).click();
  await view(page, 'Subjects without a module');
  await page.getByRole('link', { name: 'Chlorophyll a and b' }).waitFor();
  await accessible(page, 'unfiled');
  // And back into the first module.
  await page.getByRole('link', { name: 'Chlorophyll a and b' }).click();
  await page.getByRole('link', { name: 'Edit' }).click();
  await view(page, 'Edit “Chlorophyll a and b”');
  await page.getByRole('combobox', { name: 'Module' }).selectOption({ label: moduleTitle });
  await page.getByRole('button', { name: 'Save' }).click();
  await view(page, 'Chlorophyll a and b');
  await page.getByRole('link', { name: moduleTitle }).waitFor();
  await page.context().close();
});

test('history shows who changed what, and restores', async () => {
  const page = await tab();
  await signIn(page, WRITER, `/console/subjects/${subjectId}`);
  await view(page, 'Chlorophyll a and b');
  await page.getByRole('link', { name: 'History' }).click();
  await view(page, 'History of “Chlorophyll a and b”');
  await accessible(page, 'history');
  const first = page.getByRole('article', { name: 'Revision 1: created' });
  await first.waitFor();
  await first.getByText('by config').waitFor();
  // An update's text change is a diff of words.
  await page.locator('ins', { hasText: 'two pigments.' }).first().waitFor();
  await first.getByRole('button', { name: 'Restore revision 1' }).click();
  await view(page, 'Chlorophyll');
  await page.getByRole('main').getByText('Restored revision 1.').waitFor();
  const stored = await api('GET', `/subjects/${subjectId}`);
  assert.equal(stored.doc.data.attributes.title, 'Chlorophyll');
  assert.equal(stored.doc.data.attributes.introduction, 'The green pigment that catches light.');
  await page.context().close();
});

test('delete a chapter, and bring it back from its history', async () => {
  const page = await tab();
  await signIn(page, WRITER, `/console/subjects/${subjectId}`);
  await view(page, 'Chlorophyll');
  await page.getByRole('link', { name: 'Absorption spectrum' }).click();
  await view(page, 'Absorption spectrum');
  const chapterId = new URL(page.url()).pathname.split('/').pop();
  await page.getByRole('button', { name: 'Delete this chapter' }).click();
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('button', { name: 'Delete this chapter' }).click();
  await page.getByText('Delete the chapter “Absorption spectrum”?').waitFor();
  await accessible(page, 'delete question');
  await page.getByRole('button', { name: 'Yes, delete it' }).click();
  await view(page, 'Chlorophyll');
  await page.getByRole('main').getByText('Deleted “Absorption spectrum”.').waitFor();
  await page.getByText('This subject has no chapters.').waitFor();
  assert.equal((await api('GET', `/chapters/${chapterId}`)).status, 404);
  // The page of a deleted resource says where it can come back from.
  await page.goto(`${base}/console/chapters/${chapterId}`);
  await view(page, 'Not found');
  await accessible(page, 'not found');
  await page.getByRole('link', { name: 'If it was deleted, its history can bring it back.' }).click();
  await view(page, 'History of “Absorption spectrum”');
  await page.getByText('It has been deleted.').waitFor();
  await page.getByRole('button', { name: 'Restore revision 1' }).click();
  await view(page, 'Absorption spectrum');
  assert.equal((await api('GET', `/chapters/${chapterId}`)).status, 200);
  await page.context().close();
});

test('a delete based on a stale page is refused (412), nothing deleted', async () => {
  const page = await tab();
  const made = await api('POST', '/modules', { data: { type: 'modules', attributes: { title: 'Stale one' } } });
  await signIn(page, WRITER, `/console/modules/${made.doc.data.id}`);
  await view(page, 'Stale one');
  await api('PATCH', `/modules/${made.doc.data.id}`, { data: { type: 'modules', id: made.doc.data.id, attributes: { introduction: 'changed meanwhile' } } });
  await page.getByRole('button', { name: 'Delete this module' }).click();
  await page.getByRole('button', { name: 'Yes, delete it' }).click();
  await page.getByText('It was changed since this page was shown.').waitFor();
  assert.equal((await api('GET', `/modules/${made.doc.data.id}`)).status, 200);
  await page.context().close();
});

test('restoring a deleted resource never overwrites what someone brought back meanwhile', async () => {
  const made = await api('POST', '/modules', { data: { type: 'modules', attributes: { title: 'Brought back twice' } } });
  const id = made.doc.data.id;
  await api('DELETE', `/modules/${id}`);
  const page = await tab();
  await signIn(page, WRITER, `/console/modules/${id}/history`);
  await view(page, 'History of “Brought back twice”');
  await page.getByText('It has been deleted.').waitFor();
  // Someone else restores it and writes to it while this page is open.
  const revisions = await api('GET', `/modules/${id}/revisions`);
  const first = revisions.doc.data.find((r) => r.attributes.number === 1).id;
  await api('POST', `/revisions/${first}/restore`);
  const current = await api('GET', `/modules/${id}`);
  await api('PATCH', `/modules/${id}`, { data: { type: 'modules', id, attributes: { introduction: 'written meanwhile' } } }, { 'If-Match': current.etag });
  await page.getByRole('button', { name: 'Restore revision 1' }).click();
  await page.getByText('It was changed since this page was shown.').waitFor();
  assert.equal((await api('GET', `/modules/${id}`)).doc.data.attributes.introduction, 'written meanwhile');
  await page.context().close();
});

test('while a conflict waits for a choice the form is locked; line breaks of another client are not taken for changes', async () => {
  const made = await api('POST', '/subjects', { data: { type: 'subjects', attributes: { title: 'Line breaks', introduction: 'one\r\ntwo', content: 'c1\r\nc2' } } });
  const id = made.doc.data.id;
  const page = await tab();
  await signIn(page, WRITER, `/console/subjects/${id}/edit`);
  await view(page, 'Edit “Line breaks”');
  // Another client rewrites the content; this one changes the title only.
  const current = await api('GET', `/subjects/${id}`);
  await api('PATCH', `/subjects/${id}`, { data: { type: 'subjects', id, attributes: { content: 'rewritten by B' } } }, { 'If-Match': current.etag });
  await page.getByLabel('Title').fill('Line breaks kept');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByRole('heading', { name: 'Changed by someone else meanwhile' }).waitFor();
  // Only B changed the content: no choice is asked, theirs is taken.
  await page.getByText('Their changes do not touch yours').waitFor();
  assert.equal(await page.getByRole('group', { name: 'Content' }).count(), 0);
  // The fields cannot be typed into until the choice is made.
  assert.equal(await page.getByLabel('Title').evaluate((e) => Boolean(e.closest('[inert]'))), true);
  await page.getByRole('button', { name: 'Put the chosen versions in the form' }).click();
  assert.equal(await page.getByLabel('Title').evaluate((e) => Boolean(e.closest('[inert]'))), false);
  await page.getByRole('button', { name: 'Save' }).click();
  await view(page, 'Line breaks kept');
  const stored = (await api('GET', `/subjects/${id}`)).doc.data.attributes;
  assert.deepEqual([stored.title, stored.introduction, stored.content], ['Line breaks kept', 'one\r\ntwo', 'rewritten by B']);
  // The console's save changed the title alone.
  const newest = (await api('GET', `/subjects/${id}/revisions`)).doc.data[0].attributes.changes;
  assert.deepEqual(Object.keys(newest).filter((k) => k !== 'updated_at'), ['title']);
  await page.context().close();
});

test('a token refused in the middle of an edit: sign in again in a dialog, nothing typed is lost', async () => {
  const name = `temp-${Date.now()}`;
  const temp = execFileSync(BIN, ['token', 'create', '--database', databaseUrl, '--name', name, '--scope', 'write'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const page = await tab();
  await signIn(page, temp, `/console/subjects/${subjectId}/edit`);
  await view(page, /^Edit “/);
  await page.getByLabel('Introduction').fill('Typed before the token was revoked.');
  execFileSync(BIN, ['token', 'revoke', '--database', databaseUrl, name], { stdio: 'ignore' });
  await page.getByRole('button', { name: 'Save' }).click();
  const dialog = page.getByRole('dialog', { name: 'Sign in again' });
  await dialog.waitFor();
  await accessible(page, 'renew dialog');
  await dialog.getByLabel('Token').fill(WRITER);
  await dialog.getByRole('button', { name: 'Sign in' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal(await page.getByLabel('Introduction').inputValue(), 'Typed before the token was revoked.');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByRole('main').getByText(/^Saved “/).waitFor();
  assert.equal((await api('GET', `/subjects/${subjectId}`)).doc.data.attributes.introduction, 'Typed before the token was revoked.');
  await page.context().close();
});

test('a change of text reads as a diff of whole words, what went before what came', async () => {
  const page = await tab();
  await signIn(page, WRITER);
  await view(page, 'Modules');
  const script = await page.evaluate(() => document.querySelector('script[type=module]').src.replace(/main\.js$/, 'history.js'));
  const shown = await page.evaluate(async (url) => {
    const { diff } = await import(url);
    const html = (a, b) => diff(a, b).innerHTML.replace(/<span class="visually-hidden">[^<]*<\/span>/g, '');
    return [html('the cat sat', 'the dog sat'), html('a b c', 'a b c d'), html('one two three', 'one 2 3 three'), html('same', 'same')];
  }, script);
  assert.deepEqual(shown, [
    'the <del>cat</del><ins>dog</ins> sat',
    'a b c<ins> d</ins>',
    'one <del>two</del><ins>2 3</ins> three',
    'same',
  ]);
  await page.context().close();
});

test('leaving a form with unsaved changes asks first, and staying keeps them', async () => {
  const context = await browser.newContext({ locale: 'en-US' });
  const page = await context.newPage();
  page.on('request', (r) => requested.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const asked = [];
  page.on('dialog', (d) => {
    asked.push(d.message());
    d.dismiss();
  });
  await signIn(page, WRITER, `/console/subjects/${subjectId}/edit`);
  await view(page, /^Edit “/);
  await page.getByLabel('Introduction').fill('Not saved yet.');
  await page.getByRole('link', { name: 'Modules', exact: true }).first().click();
  // Back, as the browser's button does: the entry before this view is another page, so the
  // browser asks (its own question, with no text of ours: `beforeunload`).
  await page.evaluate(() => window.history.back());
  for (let i = 0; asked.length < 2 && i < 100; i += 1) await page.waitForTimeout(20);
  assert.deepEqual(asked, ['Leave this page? Your changes are not saved.', '']);
  await view(page, /^Edit “/);
  assert.equal(await page.getByLabel('Introduction').inputValue(), 'Not saved yet.');
  await context.close();
});

test('a read-only token sees everything and no control that would fail', async () => {
  const page = await tab();
  await signIn(page, reader);
  await view(page, 'Modules');
  await page.getByText('(read only)').waitFor();
  const editing = /^(New |Edit|Delete|Save|Create|Restore|Yes, delete)/;
  const controls = async () => {
    const names = await page.locator('main a, main button').evaluateAll((els) => els.map((e) => e.textContent.trim()));
    return names.filter((n) => editing.test(n));
  };
  assert.deepEqual(await controls(), []);
  await page.getByRole('link', { name: moduleTitle }).click();
  await view(page, moduleTitle);
  await page.getByRole('link', { name: 'Chlorophyll' }).waitFor();
  assert.deepEqual(await controls(), []);
  await accessible(page, 'module, read only');
  await page.getByRole('link', { name: 'Chlorophyll' }).click();
  await view(page, 'Chlorophyll');
  assert.deepEqual(await controls(), []);
  await page.getByRole('link', { name: 'History' }).click();
  await view(page, 'History of “Chlorophyll”');
  await page.getByRole('article').first().waitFor();
  assert.deepEqual(await controls(), []);
  // A form's URL typed by hand shows nothing to press.
  await page.goto(`${base}/console/modules/new`);
  await view(page, 'Not found');
  await page.goto(`${base}/console/subjects/${subjectId}/edit`);
  await view(page, 'Not found');
  // The API reference offers to try only what reads.
  await page.goto(`${base}/console/api`);
  await view(page, 'API reference');
  const post = page.locator('summary', { hasText: 'POST' }).first();
  await post.click();
  assert.equal(await page.getByRole('button', { name: 'Send' }).count(), 0);
  await page.context().close();
});

test('the API reference renders the OpenAPI document and tries a call', async () => {
  const page = await tab();
  await signIn(page, WRITER, '/console/api');
  await view(page, 'API reference');
  await accessible(page, 'reference');
  const op = page.locator('details', { has: page.locator('summary code', { hasText: /^\/v1\/subjects$/ }) }).filter({ has: page.locator('summary .method', { hasText: 'GET' }) });
  await op.locator('summary').click();
  await op.getByRole('cell', { name: 'filter[module]' }).waitFor();
  await op.getByLabel('Query string').fill('filter[module]=null');
  await op.getByRole('button', { name: 'Send' }).click();
  await op.getByText('200 OK').waitFor();
  const body = await op.getByRole('region', { name: 'Response body' }).textContent();
  assert.ok(JSON.parse(body).data.every((s) => s.relationships.module.data === null));
  await accessible(page, 'reference, opened');
  await page.context().close();
});

test('keyboard alone: sign in, open a module, create one', async () => {
  const page = await tab();
  await page.goto(`${base}/`);
  await view(page, 'Sign in');
  const tabTo = async (name) => {
    for (let i = 0; i < 40; i += 1) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate(() => {
        const e = document.activeElement;
        return e ? (e.labels?.[0]?.textContent ?? e.textContent ?? '').trim() : '';
      });
      if (focused.startsWith(name)) return;
    }
    throw new Error(`Tab never reached ${name}`);
  };
  await tabTo('Token');
  await page.keyboard.type(WRITER);
  await page.keyboard.press('Enter');
  await view(page, 'Modules');
  await tabTo('New module');
  await page.keyboard.press('Enter');
  await view(page, 'New module');
  await tabTo('Title');
  await page.keyboard.type('Typed by keyboard');
  await page.keyboard.press('Enter');
  await view(page, 'Typed by keyboard');
  await page.context().close();
});

test('readable at 360 px wide', async () => {
  const page = await tab({ viewport: { width: 360, height: 740 } });
  await signIn(page, WRITER);
  for (const path of ['/console/modules', `/console/modules/${moduleId}`, `/console/subjects/${subjectId}`, `/console/subjects/${subjectId}/edit`, `/console/subjects/${subjectId}/history`, '/console/search?q=pigment', '/console/api']) {
    await page.goto(`${base}${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.waitForFunction(() => !document.getElementById('main').hasAttribute('aria-busy'));
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(wide <= 360, `${path} is ${wide} px wide at 360`);
    await accessible(page, `${path} at 360 px`);
  }
  await page.context().close();
});

test('in the browser’s language: French', async () => {
  const page = await tab({ locale: 'fr-FR' });
  await page.goto(`${base}/`);
  await view(page, 'Connexion');
  await page.getByLabel('Jeton').fill(WRITER);
  await page.getByRole('button', { name: 'Se connecter' }).click();
  await view(page, 'Modules');
  await page.getByRole('link', { name: 'Matières sans module' }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'fr');
  await accessible(page, 'French');
  await page.context().close();
});

test('every string has its translation', async () => {
  const { STRINGS } = await import('../../console/js/strings.js');
  const english = Object.keys(STRINGS.en).sort();
  for (const [language, strings] of Object.entries(STRINGS)) {
    assert.deepEqual(Object.keys(strings).sort(), english, `${language} lacks or adds strings`);
  }
});

test('nothing was asked of another host, and no page failed', () => {
  assert.ok(requested.length > 50, `only ${requested.length} requests seen`);
  // The content's image was named, and refused by the page's policy before any connection.
  const foreign = requested.filter((u) => !u.startsWith(base) && !u.startsWith('data:') && u !== 'about:srcdoc' && u !== 'about:blank');
  assert.deepEqual(foreign.map((u) => [u, failed.get(u)]).filter(([, why]) => why !== 'csp' && why !== 'net::ERR_BLOCKED_BY_CSP'), []);
  assert.deepEqual(pageErrors, []);
});
