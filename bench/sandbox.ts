// `npm run bench -- sandbox`: the cost of running a block untrusted (fresh sandbox runner per request) against
// trusted (in the agent), on the GPT-2-small-shaped bundled model, with the same one-layer-read block.
//   untrusted_over_trusted  median latency ratio, requests alternating trusted / untrusted back to back
//   spawn_ms                a cold runner from spawn to READY (median, pool idle, normal priority)
//   runner_rss_mb           resident memory of an idle warm runner (median over the pool)
// Options: --pairs N (default 15).
import { readFileSync } from 'node:fs';
import { ensureModel } from '../scripts/generate-model.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { sandboxConfigFromEnv } from '../sandbox/config.js';
import { RunnerLauncher } from '../sandbox/launcher.js';
import { Sandbox, modelAssets } from '../sandbox/sandbox.js';

const MODEL = 'gpt2-small-random';
const BLOCK = 'async (m) => await m.transformer.h[5].output';
/** "The quick brown fox jumps over the lazy" in GPT-2 ids. */
const TOKENS = [464, 2068, 7586, 21831, 18045, 625, 262, 16931];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? Number.NaN : n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

const round = (x: number, d = 1) => Number(x.toFixed(d));

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const pairsArg = args.indexOf('--pairs');
  const pairs = pairsArg >= 0 ? Number(args[pairsArg + 1]) : 15;
  const t0 = performance.now();
  const hm = await loadModel(ensureModel(MODEL), { key: MODEL });
  const config = sandboxConfigFromEnv();
  const sb = new Sandbox({ config });
  try {
    const pool = sb.register(modelAssets(hm));
    const req: RunRequest = { invokes: [{ tokens: TOKENS, block: BLOCK }] };
    const trusted = () => hm.run(req, () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }));
    const untrusted = () => hm.run(req, sb.opener(MODEL));

    // Warm-up: segment compilation, JIT in the agent, a first measured execute time for the pool's sizing.
    for (let i = 0; i < 3; i++) await trusted();
    await pool.whenReady(1);
    for (let i = 0; i < 3; i++) await untrusted();
    await pool.whenReady();

    const lat = { trusted: [] as number[], untrusted: [] as number[] };
    for (let i = 0; i < pairs; i++) {
      // Alternate which goes first so drift in the machine's load hits both alike.
      const order = i % 2 === 0 ? (['untrusted', 'trusted'] as const) : (['trusted', 'untrusted'] as const);
      for (const kind of order) {
        const s = performance.now();
        await (kind === 'trusted' ? trusted() : untrusted());
        lat[kind].push(performance.now() - s);
        if (process.env.NDIF_BENCH_DEBUG) console.error(kind, lat[kind].at(-1), JSON.stringify(pool.stats()));
      }
    }

    // Idle warm runners: let the pool settle, then read their resident memory.
    await pool.whenReady();
    await new Promise((r) => setTimeout(r, 300));
    const rss = pool.warmPids().map(rssMb);

    // Cold start to READY, one at a time, at normal priority, nothing else running.
    const launcher = new RunnerLauncher({ plan: sb.plan, limits: config.limits, warmupNice: 0 });
    const assets = modelAssets(hm);
    const spawn: number[] = [];
    const inner: number[] = [];
    try {
      for (let i = 0; i < 8; i++) {
        const r = await launcher.launch(assets);
        spawn.push(r.readyAt! - r.spawnedAt);
        inner.push(r.ready!.startupMs);
        r.kill('close');
        await r.exited;
      }
    } finally {
      await launcher.close();
    }

    const stats = pool.stats();
    const tMed = median(lat.trusted);
    const uMed = median(lat.untrusted);
    return {
      bench: 'sandbox',
      model: MODEL,
      block: BLOCK,
      untrusted_over_trusted: round(uMed / tMed, 3),
      spawn_ms: round(median(spawn)),
      runner_rss_mb: round(median(rss)),
      pool_size: stats.target,
      pool_size_source: config.poolSize === 'auto' ? 'auto: ceil(spawn/execute)+1' : 'NDIF_SANDBOX_POOL_SIZE',
      trusted_median_ms: round(tMed),
      untrusted_median_ms: round(uMed),
      trusted_p90_ms: round(lat.trusted.sort((a, b) => a - b)[Math.floor(0.9 * (pairs - 1))]!),
      untrusted_p90_ms: round(lat.untrusted.sort((a, b) => a - b)[Math.floor(0.9 * (pairs - 1))]!),
      pool_spawn_ewma_ms: stats.spawnMs === undefined ? null : round(stats.spawnMs),
      pool_execute_ewma_ms: stats.executeMs === undefined ? null : round(stats.executeMs),
      runner_startup_ms: round(median(inner)),
      pairs,
      isolation: sb.isolation,
      seconds: round((performance.now() - t0) / 1000, 1),
    };
  } finally {
    await sb.close();
    await hm.close();
  }
}
