// `npm run bench -- poison [--good N] [--poison P]`: P poison requests (trusted blocks that abort their agent process)
// queued ahead of N good ones on the embedded fabric's real processes (one agent, gpt2-tiny). Each poison request
// kills the agent once; its retry runs isolated in a sandbox runner, kills only the runner, and fails with
// AGENT_CRASHED_BY_REQUEST. Reported: good requests completed, poison requests failed with that type, agent
// restarts (boot changes the control plane saw), and the good requests' delay (submit → completed, from the
// fabric's own timestamps) at p50/p99, against the same N good requests run first without poison (baseline).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { numberArg, quantile, round } from './_numbers.js';

const GOOD = 'async (m) => (await m.transformer.h[1].output).shape';
const POISON = 'async (m) => { await m.transformer.h[0].output; process.abort(); }';

/** The embedded fabric; the aborting agents print their native stack traces on stderr: kept, not shown. */
function startFabric(dataDir: string): Promise<EmbeddedFabric> {
  return startEmbeddedFabric(dataDir, {
    NDIF_AGENT_RESTART_MS: '100',
    NDIF_LOG_LEVEL: 'fatal',
    NDIF_AGENT_GPUS: '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
  });
}

async function json(url: string, init?: RequestInit): Promise<Record<string, unknown>> {
  const r = await fetch(url, init);
  const body = (await r.json()) as Record<string, unknown>;
  if (r.status >= 400) throw new Error(`${init?.method ?? 'GET'} ${url}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const goodN = numberArg(args, 'good', 20);
  const poisonN = numberArg(args, 'poison', 3);
  const t0 = performance.now();
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-poison-'));
  let fabric: Awaited<ReturnType<typeof startFabric>> | undefined;
  try {
    fabric = await startFabric(join(tmp, 'data'));
    const { url } = fabric;
    const submit = (requestId: string, block: string) =>
      json(`${url}/requests`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ requestId, model: 'gpt2-tiny', invokes: [{ input: 'The Eiffel Tower is in', block }] }),
      });
    const view = (id: string) => json(`${url}/requests/${id}`);
    const finished = async (ids: string[], timeoutMs: number) => {
      const end = Date.now() + timeoutMs;
      const done = new Map<string, Record<string, unknown>>();
      while (done.size < ids.length) {
        if (Date.now() > end)
          throw new Error(
            `${ids.length - done.size} request(s) not finished in ${timeoutMs} ms: ${ids
              .filter((i) => !done.has(i))
              .slice(0, 5)
              .join(', ')}`,
          );
        for (const id of ids) {
          if (done.has(id)) continue;
          const v = await view(id);
          if (['COMPLETED', 'ERROR', 'CANCELLED'].includes(String(v.status))) done.set(id, v);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return ids.map((id) => done.get(id)!);
    };
    const delayS = (v: Record<string, unknown>) => {
      const t = v.timestamps as { receivedAt: string; finishedAt: string };
      return (Date.parse(t.finishedAt) - Date.parse(t.receivedAt)) / 1000;
    };
    const restarts = async () =>
      ((await json(`${url}/agents`)).agents as Array<{ health?: { restarts?: number }; restarts?: number }>)[0]?.health
        ?.restarts ?? 0;

    // Warm-up: deploys gpt2-tiny on demand and compiles its segments.
    await submit('warm-up', GOOD);
    await finished(['warm-up'], 60_000);

    const baseIds = Array.from({ length: goodN }, (_, i) => `base-${i}`);
    for (const id of baseIds) await submit(id, GOOD);
    const base = await finished(baseIds, 60_000);
    const restartsBefore = await restarts();

    const poisonIds = Array.from({ length: poisonN }, (_, i) => `poison-${i}`);
    const goodIds = Array.from({ length: goodN }, (_, i) => `good-${i}`);
    for (const id of poisonIds) await submit(id, POISON);
    for (const id of goodIds) await submit(id, GOOD);
    const poison = await finished(poisonIds, 40_000);
    const good = await finished(goodIds, 40_000);
    const agentRestarts = (await restarts()) - restartsBefore;

    const goodDelays = good.filter((v) => v.status === 'COMPLETED').map(delayS);
    const baseDelays = base.map(delayS);
    return {
      good_completed: good.filter((v) => v.status === 'COMPLETED').length,
      poison_failed: poison.filter(
        (v) => v.status === 'ERROR' && (v.error as { type?: string } | null)?.type === 'AGENT_CRASHED_BY_REQUEST',
      ).length,
      agent_restarts: agentRestarts,
      good_p99_delay_s: round(quantile(goodDelays, 0.99)),
      good_p50_delay_s: round(quantile(goodDelays, 0.5)),
      baseline_p99_delay_s: round(quantile(baseDelays, 0.99)),
      poison_attempts: poison.map((v) => v.attempt),
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}
