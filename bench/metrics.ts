// `npm run bench -- metrics [--budget-ms B] [--scrape-ms S]`: what the metrics cost a request. Four embedded
// fabrics (`npm start`'s real processes: API, SQLite event store, projection, scheduler, relay, IPC, GPU agent
// child) on gpt2-tiny, two with NDIF_METRICS=off and two with metrics on and scraped as Prometheus would (each
// one's API and its agent's health port every S ms, default 1000: 15× Prometheus' default rate). The same
// request — a block reading transformer.h[1].output, through the SDK — goes to each in turn, each round starting
// at the next fabric, until the budget (default 20 s); the ratio is of the medians (on / off, both fabrics of a
// setting pooled), and the two off fabrics' ratio is reported beside it as the machine's noise. gpt2-tiny's forward pass is ~0.3 ms, so nearly all of a
// request is the fabric's own path that metrics instrument: the ratio is the strict case.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric, type BenchFabric } from './embedded-fabric.js';

const MODEL = 'gpt2-tiny';
const BLOCK = 'async (m) => (await m.transformer.h[1].output).mean()';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo]! + (s[Math.ceil(i)]! - s[lo]!) * (i - lo);
};
const round2 = (x: number) => Number(x.toFixed(2));

type Setting = 'off' | 'on';

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const budgetMs = arg(args, 'budget-ms', 20_000);
  const scrapeMs = arg(args, 'scrape-ms', 1000);
  const t0 = performance.now();
  ensureBenchModel(MODEL);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-metrics-'));
  const started: BenchFabric[] = [];
  const clients: Fabric[] = [];
  let scraper: NodeJS.Timeout | undefined;
  try {
    // Two fabrics of each setting: the on/off ratio pools both, and off-a / off-b says how far two identical
    // fabrics differ on this machine (the noise the ratio is read against).
    const plan: { name: string; setting: Setting }[] = [
      { name: 'off-a', setting: 'off' },
      { name: 'on-a', setting: 'on' },
      { name: 'off-b', setting: 'off' },
      { name: 'on-b', setting: 'on' },
    ];
    const fabrics = await Promise.all(
      plan.map(async (p) => {
        const env = p.setting === 'on' ? { NDIF_METRICS: 'on', NDIF_HEALTH_PORT: '0', NDIF_HEALTH_HOST: '127.0.0.1' } : { NDIF_METRICS: 'off' };
        const f = await startEmbeddedFabric(join(tmp, p.name), MODEL, env);
        started.push(f);
        const sdk = new Fabric({ url: f.url, progress: false, onLog: null, cacheDir: false });
        clients.push(sdk);
        const scrapeUrls = p.setting === 'on' ? [`${f.url}/metrics`, /metrics (http:\/\/\S+\/metrics)\)/.exec(f.banner)?.[1] ?? ''] : [];
        if (scrapeUrls.includes('')) throw new Error(`${p.name} printed no agent metrics URL: ${f.banner}`);
        return { ...p, fabric: f, sdk, scrapeUrls, times: [] as number[] };
      }),
    );
    await Promise.all(
      fabrics.map(async (f) => {
        const admin = new FabricAdmin(f.sdk.http);
        const d = await admin.deploy({ model: MODEL });
        await waitForHot(admin, MODEL, d.replicaIds, { waitMs: 60_000, signal: new AbortController().signal, pollMs: 50 });
      }),
    );
    const request = (f: (typeof fabrics)[number]) => f.sdk.trace(MODEL, 'The Eiffel Tower is in', BLOCK);
    for (let i = 0; i < 30; i++) for (const f of fabrics) await request(f);

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
    scraper = setInterval(() => void scrape().catch((e: unknown) => process.stderr.write(`scrape failed: ${(e as Error).message}\n`)), scrapeMs);

    const tm = performance.now();
    let rounds = 0;
    while (performance.now() - tm < budgetMs) {
      // Each round starts at another fabric, so none is always first (or always right after another).
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
    const of = (setting: Setting) => fabrics.filter((f) => f.setting === setting).flatMap((f) => f.times);
    const median = (name: string) => quantile(fabrics.find((f) => f.name === name)!.times, 0.5);
    const offMs = quantile(of('off'), 0.5);
    const onMs = quantile(of('on'), 0.5);
    return {
      bench: 'metrics',
      model: MODEL,
      rounds,
      scrapes,
      scrape_every_ms: scrapeMs,
      scrape_kib: round2(scrapeBytes / Math.max(1, scrapes) / 1024),
      medians_ms: Object.fromEntries(fabrics.map((f) => [f.name, round2(median(f.name))])),
      off_ms: round2(offMs),
      on_ms: round2(onMs),
      off_p90_ms: round2(quantile(of('off'), 0.9)),
      on_p90_ms: round2(quantile(of('on'), 0.9)),
      // Two fabrics with the same setting: how much of the ratio this machine's noise could be.
      same_setting_ratio: Number((median('off-a') / median('off-b')).toFixed(4)),
      total_s: round2((performance.now() - t0) / 1000),
      metrics_overhead_ratio: Number((onMs / offMs).toFixed(4)),
    };
  } finally {
    if (scraper !== undefined) clearInterval(scraper);
    for (const c of clients) c.close();
    await Promise.all(started.map((f) => f.stop()));
    rmSync(tmp, { recursive: true, force: true });
  }
}
