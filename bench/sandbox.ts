// `npm run bench -- sandbox`: the cost of running a block untrusted (fresh sandbox runner per request) against
// trusted (in the agent), on the GPT-2-small-shaped bundled model, with the same one-layer-read block.
//   untrusted_over_trusted  median latency ratio, requests alternating trusted / untrusted, each started with
//                           the pool at its target
//   spawn_ms                a cold runner from spawn to READY (median, pool idle, normal priority)
//   runner_rss_mb           resident memory of an idle warm runner (median over the pool)
//   node_floor_ms           the same for a runner that is only Node answering READY: the part of spawn_ms
//                           that is Node's own start-up
//   back_to_back_*          the same without pausing between requests (refills compete, the pool may run dry)
//   runner_cpu_ms_to_ready  CPU a runner burns from spawn to READY and its warm-up: the throughput cost per request
//   timeout_kill_ms         a block that spins forever with an 800 ms timeout: from the request to its Timeout
//                           (the runner killed); then next_after_kill_ms, the next request's latency (median of 3)
// Options: --pairs N (default 20).
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FRAME_VERSION } from '../protocol/frames.js';
import { ensureModel } from '../catalog/bundled/generate-model.js';
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

/** User + system CPU time of a process so far (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * The floor under spawn_ms: a runner that is only Node itself, started the same way (spawner, isolation
 * command line, socket pair), answering INIT with READY at once. Written to a private temp directory.
 */
const FLOOR_RUNNER = `'use strict';
const { Socket } = require('node:net');
const s = new Socket({ fd: 3, readable: true, writable: true });
s.once('data', () => {
  // READY frame (protocol/frames.ts): u32 length, u8 tag 0x22, u32 version, u32 pid, f64 startupMs, f64 rssBytes.
  const b = Buffer.alloc(29);
  b.writeUInt32LE(25, 0); b[4] = 0x22; b.writeUInt32LE(${FRAME_VERSION}, 5); b.writeUInt32LE(process.pid, 9);
  b.writeDoubleLE(performance.now(), 13); b.writeDoubleLE(process.memoryUsage.rss(), 21);
  s.write(b);
});
`;

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const pairsArg = args.indexOf('--pairs');
  const pairs = pairsArg >= 0 ? Number(args[pairsArg + 1]) : 20;
  const burstPairs = 12;
  const t0 = performance.now();
  const hm = await loadModel(ensureModel(MODEL), { key: MODEL });
  const config = sandboxConfigFromEnv();
  const sb = new Sandbox({ config });
  try {
    const pool = sb.register(modelAssets(hm));
    const req: RunRequest = { invokes: [{ tokens: TOKENS, block: BLOCK }] };
    const trusted = () =>
      hm.run(req, () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }));
    const untrusted = () => hm.run(req, sb.opener(MODEL));

    // Warm-up: segment compilation, JIT in the agent, a first measured execute time for the pool's sizing.
    for (let i = 0; i < 3; i++) await trusted();
    await pool.whenReady(1);
    for (let i = 0; i < 3; i++) await untrusted();
    await pool.whenReady();

    // Paced: each request starts with the pool back at its target, the state a pool exists to keep (the
    // request rate is below what refills sustain). Back to back: no pause, refills compete with requests
    // and the pool may run dry; reported beside it.
    const measure = async (n: number, paced: boolean) => {
      const lat = { trusted: [] as number[], untrusted: [] as number[] };
      const waited0 = pool.stats().waited;
      for (let i = 0; i < n; i++) {
        // Alternate which goes first so drift in the machine's load hits both alike.
        const order = i % 2 === 0 ? (['untrusted', 'trusted'] as const) : (['trusted', 'untrusted'] as const);
        for (const kind of order) {
          if (paced) await pool.whenReady();
          const s = performance.now();
          await (kind === 'trusted' ? trusted() : untrusted());
          lat[kind].push(performance.now() - s);
        }
      }
      return { ...lat, waited: pool.stats().waited - waited0 };
    };
    const paced = await measure(pairs, true);
    const burst = await measure(burstPairs, false);

    // A spinning block is killed at its timeout, and the agent serves the next request at once.
    const killed: number[] = [];
    const nextAfterKill: number[] = [];
    for (let i = 0; i < 3; i++) {
      await pool.whenReady();
      const s = performance.now();
      const outcome = await hm
        .run({ invokes: [{ tokens: TOKENS, block: 'async () => { for (;;) {} }' }], timeoutMs: 800 }, sb.opener(MODEL))
        .then(
          () => 'completed',
          (e: unknown) => (e as { blockError?: { type?: string } }).blockError?.type ?? String(e),
        );
      if (outcome !== 'Timeout') throw new Error(`a spinning block ended with ${outcome}, not Timeout`);
      killed.push(performance.now() - s);
      const n = performance.now();
      await untrusted();
      nextAfterKill.push(performance.now() - n);
    }

    // Idle warm runners: let the pool settle, then read their resident memory.
    await pool.whenReady();
    await new Promise((r) => setTimeout(r, 300));
    const rss = pool.warmPids().map(rssMb);
    const cpu = pool.warmPids().map(cpuMs);

    // Cold start to READY, one at a time, at normal priority, nothing else running.
    const launcher = new RunnerLauncher({ plan: sb.plan, limits: config.limits, warmupNice: 0 });
    const assets = modelAssets(hm);
    const floorDir = mkdtempSync(join(tmpdir(), 'ndif-bench-floor-'));
    chmodSync(floorDir, 0o755);
    writeFileSync(join(floorDir, 'floor.cjs'), FLOOR_RUNNER, { mode: 0o644 });
    const floorLauncher = new RunnerLauncher({
      plan: sb.plan,
      limits: config.limits,
      warmupNice: 0,
      script: join(floorDir, 'floor.cjs'),
      readPaths: [`${floorDir}/`],
    });
    const spawn: number[] = [];
    const inner: number[] = [];
    const floor: number[] = [];
    try {
      for (let i = 0; i < 8; i++) {
        for (const [l, out] of [
          [launcher, spawn],
          [floorLauncher, floor],
        ] as const) {
          const r = await l.launch(assets);
          out.push(r.readyAt! - r.spawnedAt);
          if (l === launcher) inner.push(r.ready!.startupMs);
          r.kill('close');
          await r.exited;
        }
      }
    } finally {
      await launcher.close();
      await floorLauncher.close();
      rmSync(floorDir, { recursive: true, force: true });
    }

    const stats = pool.stats();
    const tMed = median(paced.trusted);
    const uMed = median(paced.untrusted);
    const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(0.9 * (xs.length - 1))]!;
    return {
      bench: 'sandbox',
      model: MODEL,
      block: BLOCK,
      untrusted_over_trusted: round(uMed / tMed, 3),
      timeout_kill_ms: round(median(killed)),
      next_after_kill_ms: round(median(nextAfterKill)),
      spawn_ms: round(median(spawn)),
      runner_rss_mb: round(median(rss)),
      pool_size: stats.target,
      pool_size_source: config.poolSize === 'auto' ? 'auto: ceil(spawn/execute)+1' : 'NDIF_SANDBOX_POOL_SIZE',
      trusted_median_ms: round(tMed),
      untrusted_median_ms: round(uMed),
      trusted_p90_ms: round(p90(paced.trusted)),
      untrusted_p90_ms: round(p90(paced.untrusted)),
      back_to_back_untrusted_over_trusted: round(median(burst.untrusted) / median(burst.trusted), 3),
      back_to_back_trusted_median_ms: round(median(burst.trusted)),
      back_to_back_untrusted_median_ms: round(median(burst.untrusted)),
      back_to_back_waits_for_a_runner: burst.waited,
      runner_cpu_ms_to_ready: round(median(cpu)),
      pool_spawn_ewma_ms: stats.spawnMs === undefined ? null : round(stats.spawnMs),
      pool_execute_ewma_ms: stats.executeMs === undefined ? null : round(stats.executeMs),
      runner_startup_ms: round(median(inner)),
      node_floor_ms: round(median(floor)),
      pairs,
      back_to_back_pairs: burstPairs,
      runner_entry: sb.runnerEntry.mode,
      load_average_1m: round(loadavg()[0]!, 2),
      isolation: sb.isolation,
      seconds: round((performance.now() - t0) / 1000, 1),
    };
  } finally {
    await sb.close();
    await hm.close();
  }
}
