// A scripted day of traffic on the control plane (seeded, so every run is the same): three agents, six models,
// a few hundred requests from a dozen clients (some priority), cancels and kills, operator deploys, scales, pins
// and evictions, a heartbeat lapse, an agent restart, an agent loss, a drain, timeouts and refused placements.
import { isDomainError } from '../../domain/shared/errors.js';
import { GIB } from '../../domain/placement/size.js';
import { SimAgent, settle, submit, type Harness } from '../scheduler/harness.js';

/** A command the domain refuses (a cancel of a finished request, a scale of an evicted model) is part of the day;
 * any other error fails it. */
function refusal(e: unknown): undefined {
  if (isDomainError(e)) return undefined;
  throw e;
}

export const DAY_MODELS = {
  gpt2: { settings: { concurrency: 1, weightsBytes: 1 * GIB } },
  llama: { settings: { concurrency: 1, weightsBytes: 8 * GIB } },
  wide: { settings: { concurrency: 1, weightsBytes: 20 * GIB, gpus: 2 } },
  huge: { settings: { concurrency: 1, weightsBytes: 60 * GIB } },
  big: { settings: { concurrency: 1, weightsBytes: 28 * GIB } },
  tiny: { settings: { concurrency: 1, weightsBytes: GIB / 4, sizeBytes: GIB } },
};

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface DayStats {
  requests: number;
  events: number;
}

export async function runScriptedDay(h: Harness, opts: { minutes?: number; seed?: number } = {}): Promise<DayStats> {
  const rnd = prng(opts.seed ?? 7);
  const a1 = new SimAgent(h, 'a1', [24, 24], 64);
  const a2 = new SimAgent(h, 'a2', [16, 16, 16], 32);
  const a3 = new SimAgent(h, 'a3', [40], 128);
  const agents = [a1, a2, a3];
  for (const a of agents) a.serviceMs = 25_000;
  const silentFor = new Map<SimAgent, { steps: number; restart: boolean }>();
  const silence = (a: SimAgent, steps: number, restart = false) => silentFor.set(a, { steps, restart });
  // Like the real agent: a heartbeat refused because the agent was declared lost makes it register again.
  const beat = async (a: SimAgent) => {
    try {
      await a.heartbeat();
    } catch (e) {
      if (!isDomainError(e) || (e.code !== 'CP_AGENT_LOST' && e.code !== 'CP_AGENT_BOOT_MISMATCH')) throw e;
      await a.restart();
    }
  };
  const tenSeconds = async () => {
    h.advance(10_000);
    const live: SimAgent[] = [];
    for (const a of agents) {
      const s = silentFor.get(a);
      if (s !== undefined) {
        if (--s.steps > 0) continue;
        silentFor.delete(a);
        if (s.restart) await a.restart();
      }
      await beat(a);
      live.push(a);
    }
    await settle(h, live);
  };
  for (const a of agents) await a.register();
  await h.run(
    {
      type: 'RequestDeployment',
      modelKey: 'llama',
      settings: DAY_MODELS.llama.settings,
      replicas: 1,
      onDemand: false,
      pinned: true,
    },
    'op',
  );
  await settle(h, agents);
  const keys = Object.keys(DAY_MODELS);
  let n = 0;
  const minutes = opts.minutes ?? 24 * 60;
  for (let minute = 0; minute < minutes; minute++) {
    // Quiet hours compress: one step per simulated minute; traffic every few minutes.
    const arrivals = rnd() < 0.35 ? 1 + Math.floor(rnd() * 3) : 0;
    for (let i = 0; i < arrivals; i++) {
      const client = Math.floor(rnd() * 12);
      const model = rnd() < 0.05 ? 'not-allowed' : keys[Math.floor(rnd() * keys.length)];
      const id = `req-${++n}`;
      const options = rnd() < 0.1 ? { timeoutMs: 1000 } : rnd() < 0.1 ? { queueTimeoutMs: 30_000 } : undefined;
      await submit(h, id, model, { priority: client < 3, submitter: `key:client${client}`, options });
      if (rnd() < 0.08)
        await h
          .run(
            { type: 'CancelRequest', requestId: id, actor: `key:client${client}`, operator: false },
            `key:client${client}`,
          )
          .catch(refusal);
    }
    const event = rnd();
    if (event < 0.01)
      await h
        .run({ type: 'EvictDeployment', modelKey: keys[Math.floor(rnd() * keys.length)], actor: 'op' }, 'op')
        .catch(refusal);
    else if (event < 0.02)
      await h
        .run({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 1 + Math.floor(rnd() * 3) }, 'op')
        .catch(refusal);
    else if (event < 0.025)
      await h.run({ type: 'PinDeployment', modelKey: 'gpt2', pinned: rnd() < 0.5, actor: 'op' }, 'op').catch(refusal);
    else if (event < 0.03)
      await h
        .run({ type: 'CancelRequest', requestId: `req-${Math.max(1, n - 1)}`, actor: 'op', operator: true }, 'op')
        .catch(refusal);
    const at = (share: number) => minute === Math.floor(minutes * share);
    // Before each fault, a burst of traffic so requests are in flight when it strikes.
    const target = at(0.25) ? 'a2' : at(0.4) ? 'a1' : at(0.6) ? 'a3' : at(0.8) ? 'a2' : undefined;
    if (target !== undefined || at(0.5)) {
      await h.view.catchUp();
      const on = [...h.state().cluster.replicas.values()]
        .filter((r) => r.state === 'HOT' && (target === undefined || r.agentId === target))
        .map((r) => r.modelKey);
      const burst = on.length > 0 ? on : target === 'a3' ? ['big'] : ['gpt2', 'llama'];
      for (let i = 0; i < 8; i++)
        await submit(h, `req-${++n}`, burst[i % burst.length], { submitter: `key:client${i}` });
      await settle(
        h,
        agents.filter((a) => !silentFor.has(a)),
      );
    }
    if (at(0.5)) await h.run({ type: 'EvictDeployment', modelKey: 'gpt2', actor: 'op' }, 'op').catch(refusal);
    if (at(0.25)) silence(a2, 2); // a2 lapses for 20 s and comes back on the same boot
    if (at(0.4)) silence(a1, 2, true); // a1 restarts within its grace period
    if (at(0.6)) silence(a3, 60); // a3 is silent for 10 minutes: lost, then it registers again as a new boot
    if (at(0.8)) await h.run({ type: 'DrainAgent', agentId: 'a2', actor: 'op' }, 'op');
    if (at(0.9)) await a2.restart(); // a drained agent comes back into service by registering again
    // A minute passes in 10-second steps (heartbeats every step from the live agents).
    for (let s = 0; s < 6; s++) await tenSeconds();
  }
  for (let s = 0; s < 30; s++) await tenSeconds();
  return { requests: n, events: await h.store.headPosition() };
}
