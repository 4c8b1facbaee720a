// The console's cold load: a browser with nothing cached opens the module list (the token
// already in the tab, as after a reload) and the time is taken from the start of the
// navigation to the list shown (the console's `coursed:view` mark). Also: the same load warm
// (files cached, revalidated), and, as the reference in the same run, the API's own answer
// to the list's requests from Node (no browser).
//
//   node bench/console_load.mjs BASE_URL TOKEN [ROUNDS]   (bench/console-load.sh runs it)
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { chromium } = createRequire(join(root, 'tests', 'console', 'package.json'))('playwright-core');
const [base, token, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 20);
const TARGET_MS = 300;

const browser = await chromium.launch({
  executablePath: process.env.COURSED_TEST_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const caller = await (await fetch(`${base}/v1`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/vnd.api+json' } })).json();

/** Loads the module list: when it was shown (the view's mark), and when every module's count
 * of subjects, which follows the list, was there too (to the frame). */
async function load(page) {
  await page.goto(`${base}/console/modules`, { waitUntil: 'commit' });
  await page.waitForFunction(() => performance.getEntriesByName('coursed:view').length > 0 && document.querySelector('main .cards li'), null, { polling: 'raf', timeout: 30_000 });
  const counted = await page.waitForFunction(() => {
    const counts = [...document.querySelectorAll('main .subject-count')];
    return counts.length > 0 && counts.every((c) => c.textContent) && performance.now();
  }, null, { polling: 'raf', timeout: 30_000 });
  return [await page.evaluate(() => performance.getEntriesByName('coursed:view')[0].startTime), await counted.jsonValue()];
}

const cold = [];
const coldCounts = [];
const warm = [];
const api = [];
for (let i = 0; i < rounds; i += 1) {
  const context = await browser.newContext();
  await context.addInitScript(([t, c]) => {
    sessionStorage.setItem('coursed.token', t);
    sessionStorage.setItem('coursed.caller', JSON.stringify(c));
  }, [token, caller.meta.caller]);
  const page = await context.newPage();
  const [shown, counted] = await load(page);
  cold.push(shown);
  coldCounts.push(counted);
  warm.push((await load(page))[0]);
  await context.close();
  // The reference: the list and its counts, as the page asks for them, from Node.
  const started = performance.now();
  const headers = { Authorization: `Bearer ${token}`, Accept: 'application/vnd.api+json' };
  const list = await (await fetch(`${base}/v1/modules?sort=title&page[number]=1&page[size]=20&fields[modules]=title,updated_at`, { headers })).json();
  await Promise.all(list.data.map((m) => fetch(`${base}/v1/modules/${m.id}/subjects?page[size]=1&fields[subjects]=title`, { headers }).then((r) => r.text())));
  api.push(performance.now() - started);
}
await browser.close();

const stat = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { median: at(0.5), p95: at(0.95), max: s[s.length - 1] };
};
const show = (name, xs) => {
  const { median, p95, max } = stat(xs);
  console.log(`${name.padEnd(34)} median ${median.toFixed(0).padStart(4)} ms   p95 ${p95.toFixed(0).padStart(4)} ms   max ${max.toFixed(0).padStart(4)} ms`);
};
console.log(`${rounds} rounds, ${base}`);
show('cold load to the list shown', cold);
show('cold load to every count shown', coldCounts);
show('warm load (files revalidated)', warm);
show('reference: the API alone (Node)', api);
const { median } = stat(cold);
console.log(`target: cold load median ≤ ${TARGET_MS} ms: ${median <= TARGET_MS ? 'met' : 'NOT met'}`);
process.exit(median <= TARGET_MS ? 0 : 1);
