// `npm run bench -- results`: large results downloaded while the agent writes them (RESULT_WRITING) against waiting
// for COMPLETED, on the embedded fabric's real processes, interleaved in one run: a block on the bundled model returns
// a tensor of 16 or 60 MiB; the agent's result files unsynced (the embedded default) and fsynced (NDIF_BLOB_SYNC=on,
// a distributed agent's default). Ratios are streamed over waited wall time of the whole trace (under 1: faster).
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import type { StatusMessage } from '../client/sdk/wire.js';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { interleavedRounds, median, numberArg, round } from './_numbers.js';

const TINY = 'gpt2-tiny';
const MIB = 1024 * 1024;
/** Result sizes measured (`--sizes 4,16,60`). */
const DEFAULT_SIZES_MIB = [16, 60];

interface Measured {
  streamed_ms: number;
  waited_ms: number;
  streamed_over_waited: number;
  /** RESULT_WRITING → COMPLETED on the client: how long the download ran before the result was recorded. */
  overlap_ms: number;
}

async function measure(
  sync: boolean,
  sizes: number[],
  budgetMs: number,
  rounds: number,
): Promise<Record<string, Measured>> {
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-results-'));
  let fabric: EmbeddedFabric | undefined;
  const clients: Fabric[] = [];
  try {
    fabric = await startEmbeddedFabric(join(tmp, 'data'), {
      NDIF_MODELS: TINY,
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_BLOB_SYNC: sync ? 'on' : 'off',
    });
    const streamed = new Fabric({ url: fabric.url, progress: false, onLog: null });
    const waited = new Fabric({ url: fabric.url, progress: false, onLog: null, resultStream: false });
    clients.push(streamed, waited);
    const admin = new FabricAdmin(streamed.http);
    const d = await admin.deploy({ model: TINY });
    await waitForHot(admin, d.model, d.replicaIds, {
      waitMs: 120_000,
      signal: new AbortController().signal,
      pollMs: 100,
    });
    const out: Record<string, Measured> = {};
    for (const mib of sizes) {
      const block = `async (m, ctx) => ctx.Tensor.full([${(mib * MIB) / 4}], 0.5)`;
      const overlap: number[] = [];
      const run = async (c: Fabric) => {
        let writingAt = 0;
        const r = await c.execute(TINY, 'The Eiffel Tower is in', block, {
          onMessage: (m: StatusMessage) => {
            if (m.status === 'RESULT_WRITING') writingAt = performance.now();
            if (m.status === 'COMPLETED' && writingAt > 0) overlap.push(performance.now() - writingAt);
          },
        });
        const t = r.values[0] as { shape: number[] };
        if (t.shape[0] !== (mib * MIB) / 4) throw new Error(`a ${mib} MiB result came back as ${t.shape}`);
      };
      await run(streamed);
      await run(waited);
      overlap.length = 0;
      const r = await interleavedRounds(['streamed', 'waited'], rounds, budgetMs, (n) =>
        run(n === 'streamed' ? streamed : waited),
      );
      const s = median(r.times.streamed!);
      const w = median(r.times.waited!);
      out[`${mib}mib`] = {
        streamed_ms: round(s),
        waited_ms: round(w),
        streamed_over_waited: round(s / w, 3),
        overlap_ms: round(median(overlap)),
      };
    }
    return out;
  } finally {
    for (const c of clients) c.close();
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const budgetMs = numberArg(args, 'budget-ms', 5_000);
  const rounds = numberArg(args, 'rounds', 8);
  const t0 = performance.now();
  const i = args.indexOf('--sizes');
  const sizes = i >= 0 ? args[i + 1]!.split(',').map(Number) : DEFAULT_SIZES_MIB;
  const unsynced = await measure(false, sizes, budgetMs, rounds);
  const synced = await measure(true, sizes, budgetMs, rounds);
  return {
    bench: 'results',
    streamed_over_waited_60mib: unsynced['60mib']?.streamed_over_waited ?? null,
    streamed_over_waited_60mib_fsync: synced['60mib']?.streamed_over_waited ?? null,
    unsynced,
    fsync: synced,
    total_s: round((performance.now() - t0) / 1000),
    load_avg_1m: round(loadavg()[0]!),
  };
}
