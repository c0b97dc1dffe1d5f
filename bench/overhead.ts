import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import type { StatusMessage } from '../client/sdk/wire.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel } from '../gpu-agent/runtime/index.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { interleavedRounds, median, numberArg, quantile, round } from './_numbers.js';

const TINY = 'gpt2-tiny';
const SMALL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';
const READ_ALL = `async (m) => { const out = []; for (let i = 0; i < 12; i++) out.push(await m.transformer.h[i].output); return out; }`;

/** GC time over CPU time while `work` runs in this process. */
async function gcShare(work: () => Promise<void>): Promise<{ share: number; gcMs: number; cpuMs: number }> {
  let gcMs = 0;
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcMs += e.duration;
  });
  obs.observe({ entryTypes: ['gc'] });
  const c0 = process.cpuUsage();
  await work();
  const c = process.cpuUsage(c0);
  await new Promise((r) => setImmediate(r));
  obs.disconnect();
  const cpuMs = (c.user + c.system) / 1000;
  return { share: gcMs / cpuMs, gcMs, cpuMs };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const budgetMs = numberArg(args, 'budget-ms', 5_000);
  const perClient = numberArg(args, 'per-client', 2);
  const clients = 8;
  const t0 = performance.now();
  const { dir } = ensureBenchModel(SMALL);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-overhead-'));
  let fabric: EmbeddedFabric | undefined;
  let hm: HostedModel | undefined;
  const sdks: Fabric[] = [];
  try {
    const [started, loaded] = await Promise.all([
      startEmbeddedFabric(join(tmp, 'data'), {
        NDIF_MODELS: SMALL,
        NDIF_AGENT_GPUS: '1x16GiB',
        NDIF_AGENT_RAM: '8GiB',
      }),
      loadModel(dir, { key: SMALL }),
    ]);
    fabric = started;
    hm = loaded;
    const encoded = hm.tokenizer!.encode(`${TEXT} ${TEXT} ${TEXT} ${TEXT}`);
    const t32 = encoded.slice(0, 32);
    const t128 = encoded.slice(0, 128);
    if (t128.length < 128) throw new Error(`bench prompt has only ${encoded.length} tokens`);

    const ndif = new Fabric({ url: fabric.url, progress: false, onLog: null });
    sdks.push(ndif);
    const admin = new FabricAdmin(ndif.http);
    const deployed = await Promise.all([admin.deploy({ model: TINY }), admin.deploy({ model: SMALL })]);
    await Promise.all(
      deployed.map((d) =>
        waitForHot(admin, d.model, d.replicaIds, {
          waitMs: 120_000,
          signal: new AbortController().signal,
          pollMs: 100,
        }),
      ),
    );
    const startS = (performance.now() - t0) / 1000;

    // Warm-up: every request shape once (segments compiled on the agent).
    const trivial = (onMessage?: (m: StatusMessage) => void) =>
      ndif.execute(TINY, 'The Eiffel Tower is in', 'async (m) => 1', onMessage ? { onMessage } : {});
    const small = (tokens: number[], block?: string, c: Fabric = ndif) => c.execute(SMALL, tokens, block);
    await trivial();
    await small(t128, READ_ALL);
    await small(t128);
    await small(t32, 'async (m) => await m.transformer.h[6].output');

    // Trivial requests: latency and the agent's own time.
    // Where a trivial request spends its time, from the statuses' `at` (the fabric's clock, this machine's).
    const phases: Record<string, number[]> = { submit: [], schedule: [], start: [], run: [], notify: [], result: [] };
    const latency: number[] = [];
    const over: number[] = [];
    // Latency as a plain `execute` sees it (nothing reads progress: the SDK asks only for the final status).
    const tt = performance.now();
    while (performance.now() - tt < budgetMs || latency.length < 20) {
      const s = performance.now();
      const r = await trivial();
      const ms = performance.now() - s;
      latency.push(ms);
      over.push(ms - Number((r.meta.timings as { totalMs: number }).totalMs));
      if (latency.length >= 400) break;
    }
    // The phases, on requests that read every status (onMessage): they are sent, so these run a little slower.
    for (let i = 0; i < 20; i++) {
      const at: Record<string, number> = {};
      const s0 = Date.now();
      await trivial((m) => {
        at[m.status] = Date.parse(m.at);
        if (m.status === 'COMPLETED') at.arrived = Date.now();
      });
      const end = Date.now();
      phases.submit!.push(at.RECEIVED! - s0);
      phases.schedule!.push(at.DISPATCHED! - at.RECEIVED!);
      phases.start!.push(at.RUNNING! - at.DISPATCHED!);
      phases.run!.push(at.COMPLETED! - at.RUNNING!);
      phases.notify!.push(at.arrived! - at.COMPLETED!);
      phases.result!.push(end - at.arrived!);
    }

    // Reading every layer at 128 tokens, over the plain request.
    // Each request's time beyond its agent's own (timings.totalMs): what the fabric adds, the result's transport
    // included, apart from the pass itself.
    const beyond: Record<string, number[]> = { plain: [], read: [] };
    const rounds = await interleavedRounds(['plain', 'read'], 40, budgetMs, async (n) => {
      const s = performance.now();
      const r = await (n === 'plain' ? small(t128) : small(t128, READ_ALL));
      beyond[n]!.push(performance.now() - s - Number((r.meta.timings as { totalMs: number }).totalMs));
    });

    // The notify phase (COMPLETED recorded → on the client's websocket) of plain requests at 32 and 128 tokens.
    const notify = async (tokens: number[]): Promise<number> => {
      const got: number[] = [];
      for (let i = 0; i < 5; i++) {
        let at = 0;
        let arrived = 0;
        await ndif.execute(SMALL, tokens, undefined, {
          onMessage: (m) => {
            if (m.status !== 'COMPLETED') return;
            at = Date.parse(m.at);
            arrived = Date.now();
          },
        });
        got.push(arrived - at);
      }
      return median(got);
    };
    const notify32 = await notify(t32);
    const notify128 = await notify(t128);

    // 8 clients at once against one after the other, the same requests.
    const block32 = 'async (m) => await m.transformer.h[6].output';
    for (let i = 0; i < clients; i++) sdks.push(new Fabric({ url: fabric.url, progress: false, onLog: null }));
    const many = sdks.slice(1);
    await Promise.all(many.map((c) => c.version()));
    const ts = performance.now();
    for (let k = 0; k < clients * perClient; k++) await small(t32, block32);
    const sequentialMs = performance.now() - ts;
    const tc = performance.now();
    // How many requests shared each concurrent request's forward pass (the agent's batches across requests).
    const batchedWith: number[] = [];
    await Promise.all(
      many.map(async (c) => {
        for (let k = 0; k < perClient; k++) {
          const r = await small(t32, block32, c);
          batchedWith.push(Number((r.meta.batch as { requests?: number } | undefined)?.requests ?? 1));
        }
      }),
    );
    const concurrentMs = performance.now() - tc;

    // GC on the runtime's path, in this process: the read-all request, a few times.
    const open = () => createInProcessBlocks({ manifest: hm!.manifest(), tokenizer: hm!.tokenizer });
    await hm.run({ invokes: [{ tokens: t128, block: READ_ALL }] }, open);
    const gc = await gcShare(async () => {
      for (let i = 0; i < 5; i++) await hm!.run({ invokes: [{ tokens: t128, block: READ_ALL }] }, open);
    });

    const plainMs = median(rounds.times.plain!);
    const readMs = median(rounds.times.read!);
    return {
      bench: 'overhead',
      trivial_p50_over_agent_ms: round(median(over)),
      trivial_p99_ms: round(quantile(latency, 0.99)),
      read_all_over_plain_128: round(readMs / plainMs, 4),
      batch_throughput_8_clients_over_sequential: round(sequentialMs / concurrentMs, 3),
      agent_gc_share: round(gc.share, 4),
      trivial_p50_ms: round(median(latency)),
      trivial_requests: latency.length,
      // Medians: submit = call → RECEIVED recorded; schedule → DISPATCHED; start → RUNNING (relay, IPC, agent);
      // run → COMPLETED recorded; notify → COMPLETED on the client's websocket; result → decoded value returned.
      trivial_phases_ms: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, round(median(v))])),
      // The read-all request's time beyond its agent's, over the plain one's: what its 4.7 MB result costs to carry.
      read_all_transport_ms: round(median(beyond.read!) - median(beyond.plain!)),
      notify_32_ms: notify32,
      notify_128_ms: notify128,
      plain_128_ms: round(plainMs),
      read_all_128_ms: round(readMs),
      read_rounds: rounds.rounds,
      sequential_ms: round(sequentialMs),
      concurrent_ms: round(concurrentMs),
      concurrent_mean_batch_requests: round(batchedWith.reduce((a, b) => a + b, 0) / batchedWith.length, 2),
      gc_ms: round(gc.gcMs),
      gc_cpu_ms: round(gc.cpuMs),
      start_s: round(startS),
      total_s: round((performance.now() - t0) / 1000),
      load_avg_1m: round(loadavg()[0]!),
    };
  } finally {
    for (const s of sdks) s.close();
    await hm?.close();
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}
