// `npm run bench -- local`: the SDK's local mode (client/sdk/local) against the bare model and against the fabric.
//   raw     a plain onnxruntime session of the whole model.onnx (the runtime's settings: CPU, 'basic', one thread),
//           one forward pass over the prompt: no blocks, no cuts
//   local   `LocalFabric.trace` of a block reading transformer.h[layer].output, in this process
//   fabric  the same trace through the embedded fabric's real processes (`Fabric`, HTTP + websocket)
// on gpt2-small-random (GPT-2-small shape), 32 prompt tokens, rounds interleaved after a warm-up; the ratios are
// medians of the per-round ratios, the times medians. local_over_raw compares this process's CPU time (all its
// threads) of a local trace and of a raw forward, run back to back — what local mode adds, independent of how busy
// the machine is; local_over_raw_wall is the same ratio in wall time. fabric_over_local is wall time (the fabric's
// work is in its own processes).
// local_first_trace_ms: a fresh LocalFabric's first trace, model load and segment compilation included.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import { LocalFabric } from '../client/sdk/local/index.js';
import type { Tensor } from '../client/sdk/tensor.js';
import { BUNDLED_MODELS } from '../catalog/bundled/generate-model.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric } from './_embedded-fabric.js';
import { interleavedRounds, median, numberArg, round } from './_numbers.js';

const MODEL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

const bytesOf = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const rounds = numberArg(args, 'rounds', 25);
  const layer = numberArg(args, 'layer', 6);
  const promptTokens = numberArg(args, 'tokens', 32);
  const budgetMs = numberArg(args, 'budget-ms', 8_000);
  const t0 = performance.now();
  const { dir } = ensureBenchModel(MODEL);
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-local-'));
  const fabricStarting = startEmbeddedFabric(join(tmp, 'data'), {
    NDIF_MODELS: MODEL,
    NDIF_AGENT_GPUS: '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
  });
  fabricStarting.catch(() => undefined);
  const local = new LocalFabric({ models: { [MODEL]: dir }, onLog: null });
  let ndif: Fabric | undefined;
  try {
    // The first local trace: load, compile the cut's segments, run.
    const block = `async (m) => await m.transformer.h[${layer}].output`;
    const tok = await local.tokenizer(MODEL);
    const tokens = tok.encode(TEXT).slice(0, promptTokens);
    if (tokens.length < promptTokens) throw new Error(`bench prompt has only ${tokens.length} tokens`);
    const tf = performance.now();
    const want = await local.trace<Tensor>(MODEL, tokens, block);
    const firstMs = performance.now() - tf;

    const session = await ort.InferenceSession.create(join(dir, 'model.onnx'), {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'basic',
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 3,
    });
    const { heads, layers, dModel } = BUNDLED_MODELS[MODEL];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, tokens.length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(tokens.length).fill(1n), [1, tokens.length]),
    };
    for (let i = 0; i < layers; i++)
      for (const kv of ['key', 'value'])
        feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [
          1,
          heads,
          0,
          dModel / heads,
        ]);
    const raw = () => session.run(feeds);

    const fabric = await fabricStarting;
    ndif = new Fabric({ url: fabric.url, progress: false, onLog: null });
    const admin = new FabricAdmin(ndif.http);
    const deployed = await admin.deploy({ model: MODEL });
    await Promise.all([
      waitForHot(admin, MODEL, deployed.replicaIds, {
        waitMs: 60_000,
        signal: new AbortController().signal,
        pollMs: 100,
      }),
      raw().then(raw),
      local.trace(MODEL, tokens, block),
    ]);
    const remote = ndif;
    const got = await remote.trace<Tensor>(MODEL, tokens, block);
    await remote.trace(MODEL, tokens, block);
    const bitexact = bytesOf(got).equals(bytesOf(want));

    // This process's CPU time (every thread: onnxruntime's included) of each raw and local run, beside the wall
    // time: on a machine shared with other work the wall time mostly measures the wait for a core.
    const cpu: Record<string, number[]> = { raw: [], local: [], fabric: [] };
    const { times, rounds: done } = await interleavedRounds(['raw', 'local', 'fabric'], rounds, budgetMs, async (n) => {
      const c0 = process.cpuUsage();
      await (n === 'raw'
        ? raw()
        : n === 'local'
          ? local.trace(MODEL, tokens, block)
          : remote.trace(MODEL, tokens, block));
      const c = process.cpuUsage(c0);
      cpu[n]!.push((c.user + c.system) / 1000);
    });
    const [rawMs, localMs, fabricMs] = [median(times.raw!), median(times.local!), median(times.fabric!)];
    // Ratios paired within each round (the three ran back to back), then their median: drift in the machine's load
    // between rounds cancels.
    const paired = (a: number[], b: number[]) => median(a.map((x, i) => x / b[i]!));
    const localOverRawWall = paired(times.local!, times.raw!);
    const localOverRaw = paired(cpu.local!, cpu.raw!);
    const fabricOverLocal = paired(times.fabric!, times.local!);
    fabric.child.kill('SIGTERM');
    process.stderr.write(
      `raw ${round(rawMs)} ms, local ${round(localMs)} ms, fabric ${round(fabricMs)} ms over ${done} rounds; total ${round((performance.now() - t0) / 1000, 1)} s\n`,
    );
    return {
      local_over_raw: round(localOverRaw, 4),
      fabric_over_local: round(fabricOverLocal, 4),
      local_first_trace_ms: round(firstMs, 1),
      local_over_raw_wall: round(localOverRawWall, 4),
      raw_cpu_ms: round(median(cpu.raw!)),
      local_cpu_ms: round(median(cpu.local!)),
      load: round(loadavg()[0]!, 1),
      raw_ms: round(rawMs),
      local_ms: round(localMs),
      fabric_ms: round(fabricMs),
      rounds: done,
      bitexact,
      total_s: round((performance.now() - t0) / 1000, 1),
    };
  } finally {
    ndif?.close();
    await local.close();
    await fabricStarting.then((f) => f.child.kill('SIGTERM')).catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  }
}
