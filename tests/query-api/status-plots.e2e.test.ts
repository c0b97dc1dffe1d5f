// The status page's plots and per-request page in real headless Chromium (CHROMIUM_PATH, from scripts/test.mjs),
// against a fabric in this process with a real GPU agent and SDK traffic: four uPlot charts over GET /live/series
// (queue depth and running, throughput, latency, GPU memory) drawn from samples the traffic moved, a running
// request's timeline as a bar whose segments are to scale, an ERROR row naming its error type, and a request's own
// page (timeline, error with stack, log lines, the why story). Screenshots are written to
// $NDIF_SCREENSHOT_DIR (default dist/screenshots/) for people to look at. Functions that run in the
// page reach its document as `globalThis.document` (this file is compiled without the DOM's types).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { Fabric, RemoteError } from '../../client/sdk/index.js';
import { startInProcessFabric, type InProcessFabric } from '../client/fabric-harness.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const shots = process.env.NDIF_SCREENSHOT_DIR ?? fileURLToPath(new URL('../../screenshots/', import.meta.url));

let fab: InProcessFabric;
let ndif: Fabric;
let browser: Browser;
let page: Page;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: run through scripts/test.mjs or set CHROMIUM_PATH`);
  mkdirSync(shots, { recursive: true });
  fab = await startInProcessFabric();
  ndif = new Fabric({ url: fab.url, progress: false, onLog: null });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  page = await browser.newPage({ viewport: { width: 1400, height: 1500 } });
});
after(async () => {
  await browser?.close();
  ndif?.close();
  await fab?.close();
});

const samples = async () => Number((await page.locator('body').getAttribute('data-samples')) ?? 0);
/** Waits until the plots have drawn a sample more than now (the page reads the series every refresh, ≤ 5 s). */
const morePlotted = async () =>
  page.waitForFunction(
    (n: number) => Number((globalThis as any).document.body.getAttribute('data-samples')) > n,
    await samples(),
    {
      timeout: 20_000,
    },
  );

it('plots the fabric over time, draws timelines to scale, names errors, and has a page per request', async (t) => {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(fab.url);
  await page.waitForSelector('#conn.live');
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('.plot canvas').length === 4);

  // Traffic: traces in waves (the queue fills, throughput and latency move), one that fails, one that runs slowly.
  const block = async (m: any) => {
    console.log('reading layer 1');
    return (await m.transformer.h[1].output).mean();
  };
  for (let wave = 0; wave < 3; wave++) {
    await Promise.all(Array.from({ length: 6 }, (_, i) => ndif.trace('gpt2-tiny', `wave ${wave} prompt ${i}`, block)));
    await morePlotted();
  }
  const failed = await ndif
    .execute('gpt2-tiny', 'Hi', async () => {
      console.error('about to fail');
      throw new TypeError('the block gave up');
    })
    .catch((e: unknown) => e);
  assert.ok(failed instanceof RemoteError);
  const slow = ndif.submit(
    'gpt2-tiny',
    'slow',
    'async (m) => { const h = await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 4000)); return h.mean(); }',
  );
  const slowId = (await slow).requestId;
  const run = page.locator(`.run[data-running="${slowId}"]`);
  await run.locator('.seg[data-phase="RUNNING"]').waitFor({ timeout: 20_000 });
  await page.waitForTimeout(1200);

  // The timeline: one bar, its segments as wide as their share of the time (the running one growing).
  // (The page redraws the running list every second; a bar caught as it is replaced measures 0: measure again.)
  let segs: { phase: string; ms: number; share: number }[] = [];
  for (let i = 0; i < 10 && !(segs.length > 0 && segs.every((x) => Number.isFinite(x.share))); i++) {
    segs = await run.locator('.timeline').evaluate((bar: any) => {
      const w = bar.getBoundingClientRect().width;
      return [...bar.querySelectorAll('.seg')].map((s: any) => ({
        phase: s.dataset.phase,
        ms: Number(s.dataset.ms),
        share: s.getBoundingClientRect().width / w,
      }));
    });
  }
  const total = segs.reduce((a, s) => a + s.ms, 0);
  assert.ok(segs.length >= 3, JSON.stringify(segs));
  for (const s of segs)
    assert.ok(
      Math.abs(s.share - s.ms / total) < 0.03 || s.share * 1400 < 6,
      `${s.phase} to scale: ${JSON.stringify(segs)}`,
    );
  assert.ok(segs.at(-1)!.phase === 'RUNNING' && segs.at(-1)!.share > 0.5, 'the running phase is most of the bar');
  await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('.plot .u-legend').length === 4);
  await page.screenshot({ path: join(shots, 'status-page-running.png'), fullPage: true });

  const h = await slow;
  await h.result({ waitMs: 30_000 });
  await morePlotted();

  // The plots read the samples the traffic made: queue and running moved, throughput and latency have values.
  const series = (await (await fetch(`${fab.url}/live/series`)).json()) as {
    samples: {
      queued: number;
      running: number;
      throughput: number;
      latencyP50Ms: number | null;
      gpuUsedBytes: Record<string, number>;
    }[];
  };
  assert.ok(series.samples.length >= 4, `${series.samples.length} samples`);
  assert.ok(
    series.samples.some((s) => s.throughput > 0),
    'throughput moved',
  );
  assert.ok(
    series.samples.some((s) => s.latencyP50Ms !== null && s.latencyP50Ms > 0),
    'latency has values',
  );
  assert.ok(
    series.samples.some((s) => s.running + s.queued > 0),
    'requests were seen waiting or running',
  );
  assert.ok(
    series.samples.some((s) => Object.values(s.gpuUsedBytes).some((b) => b > 0)),
    'GPU memory held by the replica',
  );
  const legends = await page.locator('.plot .u-legend').allInnerTexts();
  for (const label of ['queued', 'running', 'finished / s', 'p50 ms', 'agent-1/0'])
    assert.ok(legends.join(' ').includes(label), label);

  // The failed request: its row names the error type; its page has the timeline, error, logs and why.
  const id = (failed as RemoteError).requestId;
  const rowSel = `#requests tr[data-request="${id}"]`;
  await page.locator(rowSel).waitFor();
  assert.equal(await page.locator(rowSel).getAttribute('data-error'), 'BlockError');
  assert.match(await page.locator(`${rowSel} td.status`).innerText(), /^ERROR · BlockError$/);
  await page.screenshot({ path: join(shots, 'status-page-plots.png'), fullPage: true });

  await page.locator(`${rowSel} a`).click();
  await page.waitForFunction(
    (rid: string) => (globalThis as any).document.body.getAttribute('data-request-page') === rid,
    id,
  );
  assert.match(await page.locator('#rq-error').innerText(), /BlockError \(execution\): .*the block gave up/);
  assert.match(await page.locator('#rq-logs').innerText(), /about to fail/);
  const phases = await page
    .locator('#rq-timeline .seg')
    .evaluateAll((xs) => xs.map((x) => x.getAttribute('data-phase')));
  assert.deepEqual(phases.slice(-2), ['RUNNING', 'ERROR']);
  assert.match(await page.locator('#rq-why').innerText(), /\S/);
  assert.doesNotMatch(await page.locator('#rq-why').innerText(), /^why: \d+/);
  await page.screenshot({ path: join(shots, 'status-page-request.png'), fullPage: true });

  await page.locator('#back').click();
  await page.locator('#overview').waitFor({ state: 'visible' });
  assert.deepEqual(errors, []);
  t.diagnostic(`screenshots in ${shots}`);
});
