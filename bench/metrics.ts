// `npm run bench -- metrics [--budget-ms B] [--scrape-ms S] [--per-setting N]`: what the metrics cost a request.
// 2N embedded fabrics (`npm start`'s real processes: API, SQLite event store, projection, scheduler, relay, IPC, GPU
// agent child; N = 3) on gpt2-tiny, N with NDIF_METRICS=off and N with metrics on and scraped as Prometheus would
// (each one's API and its agent's health port every S ms, default 1000: 15× Prometheus' default rate). Each round
// sends the same request — a block reading transformer.h[1].output, through the SDK — to every fabric in turn,
// starting at the next one each round, until the budget (default 14 s). The ratio is the median, over every
// round and every (on, off) pair of fabrics in it, of their latency ratio: requests compared are sent moments
// apart, so a busy moment of this shared machine weighs on both sides alike; `same_setting_ratio` is the same
// figure for two off fabrics (off-a against off-b): the noise to read the ratio against. gpt2-tiny's forward pass is ~0.3 ms, so nearly all of a request is the fabric's own
// path that metrics instrument: the strict case.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { numberArg, quantile, round } from './_numbers.js';

const MODEL = 'gpt2-tiny';
const BLOCK = 'async (m) => (await m.transformer.h[1].output).mean()';

type Setting = 'off' | 'on';

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const budgetMs = numberArg(args, 'budget-ms', 14_000);
  const scrapeMs = numberArg(args, 'scrape-ms', 1000);
  const perSetting = numberArg(args, 'per-setting', 3);
  const t0 = performance.now();
  ensureBenchModel(MODEL);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-metrics-'));
  const started: EmbeddedFabric[] = [];
  const clients: Fabric[] = [];
  let scraper: NodeJS.Timeout | undefined;
  try {
    const plan: { name: string; setting: Setting }[] = [];
    for (let i = 0; i < perSetting; i++)
      for (const setting of ['off', 'on'] as const)
        plan.push({ name: `${setting}-${String.fromCharCode(97 + i)}`, setting });
    const fabrics = await Promise.all(
      plan.map(async (p) => {
        const env: Record<string, string> =
          p.setting === 'on'
            ? { NDIF_METRICS: 'on', NDIF_HEALTH_PORT: '0', NDIF_HEALTH_HOST: '127.0.0.1' }
            : { NDIF_METRICS: 'off' };
        const f = await startEmbeddedFabric(join(tmp, p.name), {
          NDIF_MODELS: MODEL,
          NDIF_AGENT_GPUS: '1x16GiB',
          NDIF_AGENT_RAM: '8GiB',
          ...env,
        });
        started.push(f);
        const sdk = new Fabric({ url: f.url, progress: false, onLog: null, cacheDir: false });
        clients.push(sdk);
        const scrapeUrls =
          p.setting === 'on' ? [`${f.url}/metrics`, /metrics (http:\/\/\S+\/metrics)\)/.exec(f.banner)?.[1] ?? ''] : [];
        if (scrapeUrls.includes('')) throw new Error(`${p.name} printed no agent metrics URL: ${f.banner}`);
        return { ...p, sdk, scrapeUrls, times: [] as number[] };
      }),
    );
    await Promise.all(
      fabrics.map(async (f) => {
        const admin = new FabricAdmin(f.sdk.http);
        const d = await admin.deploy({ model: MODEL });
        await waitForHot(admin, MODEL, d.replicaIds, {
          waitMs: 60_000,
          signal: new AbortController().signal,
          pollMs: 50,
        });
      }),
    );
    const request = (f: (typeof fabrics)[number]) => f.sdk.trace(MODEL, 'The Eiffel Tower is in', BLOCK);
    // Warm-up: each process's code paths compiled before anything is timed.
    for (let i = 0; i < 40; i++) for (const f of fabrics) await request(f);

    let scrapes = 0;
    let scrapeBytes = 0;
    const scrape = async () => {
      for (const f of fabrics) {
        for (const url of f.scrapeUrls) {
          const res = await fetch(url);
          scrapeBytes += (await res.text()).length;
          if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
        }
      }
      scrapes++;
    };
    await scrape();
    scraper = setInterval(
      () => void scrape().catch((e: unknown) => process.stderr.write(`scrape failed: ${(e as Error).message}\n`)),
      scrapeMs,
    );

    const tm = performance.now();
    let rounds = 0;
    while (performance.now() - tm < budgetMs) {
      for (let i = 0; i < fabrics.length; i++) {
        const f = fabrics[(rounds + i) % fabrics.length]!;
        const s = performance.now();
        await request(f);
        f.times.push(performance.now() - s);
      }
      rounds++;
    }
    clearInterval(scraper);
    scraper = undefined;
    const ofSetting = (setting: Setting) => fabrics.filter((f) => f.setting === setting);
    const byName = (name: string) => fabrics.find((f) => f.name === name)!;
    // Within each round, every (on, off) pair's latency ratio; the median of them all. A request that a busy
    // moment slowed weighs as one ratio among many, not as a mean.
    const perRound = (num: (typeof fabrics)[number][], den: (typeof fabrics)[number][]) => {
      const ratios: number[] = [];
      for (let r = 0; r < rounds; r++) for (const a of num) for (const b of den) ratios.push(a.times[r]! / b.times[r]!);
      return quantile(ratios, 0.5);
    };
    const pooled = (setting: Setting, q: number) =>
      quantile(
        ofSetting(setting).flatMap((f) => f.times),
        q,
      );
    return {
      bench: 'metrics',
      model: MODEL,
      fabrics_per_setting: perSetting,
      rounds,
      scrapes,
      scrape_every_ms: scrapeMs,
      scrape_kib: round(scrapeBytes / Math.max(1, scrapes) / 1024),
      medians_ms: Object.fromEntries(fabrics.map((f) => [f.name, round(quantile(f.times, 0.5))])),
      off_ms: round(pooled('off', 0.5)),
      on_ms: round(pooled('on', 0.5)),
      off_p90_ms: round(pooled('off', 0.9)),
      on_p90_ms: round(pooled('on', 0.9)),
      pooled_median_ratio: Number((pooled('on', 0.5) / pooled('off', 0.5)).toFixed(4)),
      same_setting_ratio: Number(perRound([byName('off-a')], [byName('off-b')]).toFixed(4)),
      total_s: round((performance.now() - t0) / 1000),
      metrics_overhead_ratio: Number(perRound(ofSetting('on'), ofSetting('off')).toFixed(4)),
    };
  } finally {
    if (scraper !== undefined) clearInterval(scraper);
    for (const c of clients) c.close();
    await Promise.all(
      started.map(async (f) => {
        if (f.child.exitCode !== null) return;
        const exited = once(f.child, 'exit');
        f.child.kill('SIGTERM');
        await exited;
      }),
    );
    rmSync(tmp, { recursive: true, force: true });
  }
}
