// Drives the Synod dashboard in headless Chromium: usage
//   node dashboard-test.mjs URL OUT_DIR NODE_PID CHROMIUM
// Waits for pool 0 with a final round, its timeline and a validation-loss chart of ≥ 2 rounds
// (screenshot OUT_DIR/dashboard.png), then SIGTERMs the node and waits for the page to say the
// node is unreachable (OUT_DIR/dashboard-node-down.png). Fails on any uncaught page error, and on
// any console error while the node is up.
import { chromium } from 'playwright-core';

const [url, out, nodePid, executablePath] = process.argv.slice(2);
const T = Number(process.env.DASHBOARD_TIMEOUT_MS || 300_000); // ms: a debug trainer's first rounds, with the chain's block time
const browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
const errors = [];
let nodeUp = true;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => nodeUp && m.type() === 'error' && errors.push(`console: ${m.text()}`));
  await page.goto(url);
  await page.waitForSelector('#pools tbody tr[data-pool="0"]', { timeout: 120_000 });
  console.log('dashboard-test: pool 0 listed:', (await page.textContent('#pools tbody tr[data-pool="0"]')).replace(/\s+/g, ' '));
  await page.waitForFunction(() => [...document.querySelectorAll('#rounds tbody tr')]
    .some((r) => r.cells[1]?.textContent === 'final' && /^0x/.test(r.cells[2]?.title || '')
      && Number(r.cells[6]?.textContent) > 0), null, { timeout: T });
  await page.waitForFunction(() => document.querySelectorAll('#chart svg path.series').length >= 1
    && document.querySelectorAll('#chart svg circle.point').length >= 2, null, { timeout: T });
  const rounds = await page.$$eval('#rounds tbody tr', (rs) => rs.map((r) => [...r.cells].map((c) => c.textContent)));
  console.log('dashboard-test: rounds', JSON.stringify(rounds));
  // The on-chain hash shown is the checkpoint the trainer committed (its metrics.jsonl). A
  // round's record is written once the next round's inner phase, computed while the round
  // settles, has ended: wait for a record of every final round shown.
  const { readFileSync } = await import('node:fs');
  const shown = await page.$$eval('#rounds tbody tr', (rs) => rs
    .filter((r) => r.cells[1].textContent === 'final').map((r) => [r.cells[0].textContent, r.cells[2].title]));
  const recorded = () => new Map(readFileSync(`${out}/trainer.jsonl`, 'utf8').split('\n')
    .filter((l) => l.includes('"checkpoint_hash"') && l.endsWith('}')).map((l) => JSON.parse(l))
    .filter((e) => e.event === 'round').map((e) => [String(e.round), `0x${e.checkpoint_hash}`]));
  let committed = recorded();
  for (const until = Date.now() + T; shown.some(([round]) => !committed.has(round)) && Date.now() < until;) {
    await new Promise((r) => setTimeout(r, 500));
    committed = recorded();
  }
  for (const [round, hash] of shown) {
    if (committed.get(round) !== hash) throw new Error(`round ${round}: page shows ${hash}, the trainer committed ${committed.get(round)}`);
  }
  const timeline = await page.$$eval('#timeline span', (s) => s.map((b) => b.className));
  if (timeline.length !== 3 || !timeline.includes('final')) throw new Error(`timeline ${timeline}`);
  const members = await page.$$eval('#members tbody tr', (rs) => rs.length);
  if (members !== 1) throw new Error(`${members} member rows, expected 1`);
  if (!(await page.isHidden('#node-down'))) throw new Error('node-down banner shown while the node runs');
  await page.screenshot({ path: `${out}/dashboard.png`, fullPage: true });

  if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  nodeUp = false;
  process.kill(Number(nodePid), 'SIGTERM');
  await page.waitForSelector('#node-down:not([hidden])', { timeout: 60_000 });
  const banner = await page.textContent('#node-down');
  if (!banner.includes('Cannot reach the Synod node')) throw new Error(`banner: ${banner}`);
  console.log('dashboard-test: node down:', banner);
  // The last state read stays on the page.
  if (!(await page.$('#pools tbody tr[data-pool="0"]'))) throw new Error('pool table cleared');
  await page.screenshot({ path: `${out}/dashboard-node-down.png`, fullPage: true });
  if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  console.log(`dashboard-test: ok (screenshots ${out}/dashboard.png, ${out}/dashboard-node-down.png)`);
} catch (e) {
  console.error(`dashboard-test: ${e.message}\npage errors: ${errors.join('; ') || 'none'}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
