import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import type { StatusMessage } from '../client/sdk/wire.js';
import { Tensor } from '../client/sdk/tensor.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel } from '../gpu-agent/runtime/index.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { median, numberArg, round } from './_numbers.js';

const MODEL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

function sameBits(a: Tensor, b: Tensor): boolean {
  return (
    a.shape.join() === b.shape.join() &&
    Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).equals(
      Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength),
    )
  );
}

/** The embedded fabric serving gpt2-small-random. */
function startFabric(dataDir: string): Promise<EmbeddedFabric> {
  return startEmbeddedFabric(dataDir, { NDIF_MODELS: MODEL, NDIF_AGENT_GPUS: '1x16GiB', NDIF_AGENT_RAM: '8GiB' });
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const rounds = numberArg(args, 'rounds', 25);
  const clients = numberArg(args, 'clients', 8);
  const perClient = numberArg(args, 'per-client', 2);
  const layer = numberArg(args, 'layer', 6);
  const promptTokens = numberArg(args, 'tokens', 32);
  const budgetMs = numberArg(args, 'budget-ms', 9_000);
  /** Requests in flight per replica (the deployment's `concurrency`; 1 is the default of a deploy). */
  const concurrency = numberArg(args, 'concurrency', 1);

  const { dir, cached, generateS } = ensureBenchModel(MODEL);
  process.stderr.write(`${MODEL}: ${cached ? 'cached' : `generated in ${generateS.toFixed(1)} s`}\n`);

  const t0 = performance.now();
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-e2e-'));
  let fabric: Awaited<ReturnType<typeof startFabric>> | undefined;
  let hm: HostedModel | undefined;
  const sdks: Fabric[] = [];
  try {
    const ts = performance.now();
    const [started, loaded] = await Promise.all([startFabric(join(tmp, 'data')), loadModel(dir, { key: MODEL })]);
    fabric = started;
    hm = loaded;
    const startS = (performance.now() - ts) / 1000;
    const tokens = hm.tokenizer!.encode(TEXT).slice(0, promptTokens);
    if (tokens.length < promptTokens) throw new Error(`bench prompt has only ${tokens.length} tokens`);

    const ndif = new Fabric({ url: fabric.url, progress: false, onLog: null });
    sdks.push(ndif);
    const admin = new FabricAdmin(ndif.http);
    const block = `async (m) => await m.transformer.h[${layer}].output`;
    const open = () => createInProcessBlocks({ manifest: hm!.manifest(), tokenizer: hm!.tokenizer });
    const raw = async () =>
      Tensor.fromPayload((await hm!.run({ invokes: [{ tokens, block }] }, open)).invokes[0]!.result.tensors[0]!);
    const e2e = (client: Fabric = ndif, onMessage?: (m: StatusMessage) => void) =>
      client.trace<Tensor>(MODEL, tokens, block, onMessage ? { onMessage } : {});

    // While the agent loads the model, the runtime here compiles the segments of this cut (warm-up, untimed).
    const td = performance.now();
    const deployed = await admin.deploy({ model: MODEL, ...(concurrency !== 1 ? { concurrency } : {}) });
    const [, want] = await Promise.all([
      waitForHot(admin, MODEL, deployed.replicaIds, {
        waitMs: 60_000,
        signal: new AbortController().signal,
        pollMs: 100,
      }),
      raw().then(() => raw()),
    ]);
    const deployS = (performance.now() - td) / 1000;
    process.stderr.write(
      `fabric at ${fabric.url} up in ${startS.toFixed(1)} s (direct model loaded alongside), ${MODEL} HOT in ${deployS.toFixed(1)} s\n`,
    );

    // The agent compiles the same segments on its first two requests; its answer must be the runtime's bits.
    const tw = performance.now();
    const got = await e2e();
    await e2e();
    const bitexact = sameBits(got, want);
    const warmS = (performance.now() - tw) / 1000;

    const times = { e2e: [] as number[], raw: [] as number[] };
    // Where an end-to-end request spends its time, from the statuses' `at` (the fabric's clock, this machine's).
    const phases: Record<string, number[]> = { submit: [], schedule: [], start: [], run: [], notify: [], result: [] };
    const tm = performance.now();
    let done = 0;
    for (let r = 0; r < rounds; r++) {
      for (const which of r % 2 ? (['e2e', 'raw'] as const) : (['raw', 'e2e'] as const)) {
        const at: Record<string, number> = {};
        const s = performance.now();
        const s0 = Date.now();
        await (which === 'raw'
          ? raw()
          : e2e(ndif, (m) => {
              at[m.status] = Date.parse(m.at);
              if (m.status === 'COMPLETED') at.arrived = Date.now();
            }));
        times[which].push(performance.now() - s);
        if (which === 'e2e') {
          const end = Date.now();
          phases.submit!.push(at.RECEIVED! - s0);
          phases.schedule!.push(at.DISPATCHED! - at.RECEIVED!);
          phases.start!.push(at.RUNNING! - at.DISPATCHED!);
          phases.run!.push(at.COMPLETED! - at.RUNNING!);
          phases.notify!.push(at.arrived! - at.COMPLETED!);
          phases.result!.push(end - at.arrived!);
        }
      }
      done++;
      if (performance.now() - tm > budgetMs) break;
    }
    const e2eMs = median(times.e2e);
    const rawMs = median(times.raw);

    // Throughput: C clients, K requests each, all at once, on the one HOT replica.
    for (let i = 0; i < clients; i++) sdks.push(new Fabric({ url: fabric.url, progress: false, onLog: null }));
    const many = sdks.slice(1);
    await Promise.all(many.map((c) => c.version()));
    const latencies: number[] = [];
    const tt = performance.now();
    await Promise.all(
      many.map(async (c) => {
        for (let k = 0; k < perClient; k++) {
          const s = performance.now();
          await e2e(c);
          latencies.push(performance.now() - s);
        }
      }),
    );
    const wallS = (performance.now() - tt) / 1000;
    const throughput = (clients * perClient) / wallS;

    return {
      bench: 'e2e',
      model: MODEL,
      prompt_tokens: tokens.length,
      layer,
      rounds: done,
      e2e_ms: round(e2eMs),
      raw_ms: round(rawMs),
      e2e_over_raw: Number((e2eMs / rawMs).toFixed(4)),
      overhead_ms: round(e2eMs - rawMs),
      e2e_min_ms: round(Math.min(...times.e2e)),
      raw_min_ms: round(Math.min(...times.raw)),
      bitexact,
      // submit: call → RECEIVED recorded; schedule: → DISPATCHED; start: → RUNNING (relay, IPC, agent);
      // run: → COMPLETED recorded (forward pass, result container, blob, report); notify: → COMPLETED on the
      // client's websocket; result: → decoded value returned.
      phases_ms: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, round(median(v))])),
      clients,
      concurrency,
      requests: clients * perClient,
      throughput_rps: round(throughput),
      raw_rps: round(1000 / rawMs),
      concurrent_median_ms: round(median(latencies)),
      start_s: round(startS),
      deploy_s: round(deployS),
      warmup_s: round(warmS),
      generate_s: round(generateS),
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    for (const s of sdks) s.close();
    await hm?.close();
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}
