// The recorded scenarios: scripts run against the real domain, command handlers, projections and scheduler with
// scripted agents and an injected clock. Each one is deterministic (no randomness beyond a seeded generator, ids
// chosen by the script), so its log is the same on every run with the same code; tests/fixtures/golden holds
// what they wrote when last recorded (scripts/record-golden.ts).
import { GIB } from '../../domain/placement/size.js';
import type { OnDemandModel } from '../../scheduler/config.js';
import { GoldenHarness } from './harness.js';
import { runFor, ScriptedAgent, settle } from './scripted-agent.js';

export interface Scenario {
  name: string;
  /** One paragraph for the fixture's README. */
  description: string;
  run(path?: string): Promise<GoldenHarness>;
}

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

const MIN = 60_000;
const HOUR = 3_600_000;

function submit(
  h: GoldenHarness,
  requestId: string,
  modelKey: string,
  submitter: string,
  extra: { priority?: boolean; options?: Record<string, unknown> } = {},
) {
  return h.run(
    {
      type: 'SubmitRequest',
      requestId,
      modelKey,
      submitter,
      priority: extra.priority ?? false,
      trusted: true,
      payload: {
        invokes: [{ prompt: 'The Eiffel Tower is in the city of' }],
        block: 'async (m) => m.transformer.h[5].output.mean()',
      },
      options: extra.options as never,
    },
    submitter,
  );
}

/** A normal day, compressed: two agents, operator deploys, clients (some priority), cancels, a kill, an autoscale. */
const normalDay: Scenario = {
  name: 'normal-day',
  description:
    'Two agents (a1: 2×24 GiB, a2: 16 GiB). The operator deploys gpt2 and a pinned llama; four clients (bob with priority) submit ' +
    '45 requests over 20 minutes, to gpt2, llama and tiny (deployed on demand), one of them to a model that is not allowed ' +
    '(ModelNotDeployable); a user cancels a request, the operator kills one of a burst of six, and the burst makes gpt2 ' +
    'autoscale; the operator scales llama to 2 and later evicts tiny.',
  async run(path) {
    const onDemand: Record<string, OnDemandModel> = {
      gpt2: { settings: { concurrency: 1, weightsBytes: GIB } },
      llama: { settings: { concurrency: 1, weightsBytes: 8 * GIB } },
      tiny: { settings: { concurrency: 1, weightsBytes: GIB / 4, sizeBytes: GIB } },
    };
    const h = await GoldenHarness.start('normal-day', { onDemand, path });
    const a1 = new ScriptedAgent(h, 'a1', [24, 24], 64, 8000);
    const a2 = new ScriptedAgent(h, 'a2', [16], 32, 8000);
    const agents = [a1, a2];
    for (const a of agents) await a.register();
    await h.run(
      { type: 'RequestDeployment', modelKey: 'gpt2', settings: onDemand.gpt2.settings, replicas: 1, onDemand: false },
      'key:ops',
    );
    await h.run(
      {
        type: 'RequestDeployment',
        modelKey: 'llama',
        settings: onDemand.llama.settings,
        replicas: 1,
        onDemand: false,
        pinned: true,
      },
      'key:ops',
    );
    await settle(h, agents);
    const rnd = prng(11);
    const clients = ['key:alice', 'key:bob', 'key:carol', 'key:dave'];
    const models = ['gpt2', 'gpt2', 'llama', 'tiny'];
    let n = 0;
    for (let step = 0; step < 240; step++) {
      if (step < 200 && rnd() < 0.22) {
        const c = Math.floor(rnd() * clients.length);
        const id = `day-${++n}`;
        await submit(h, id, n === 17 ? 'secret-model' : models[Math.floor(rnd() * models.length)], clients[c], {
          priority: c === 1,
        });
        if (n === 9)
          await h.attempt({ type: 'CancelRequest', requestId: id, actor: clients[c], operator: false }, clients[c]);
      }
      if (step === 60) for (let i = 0; i < 6; i++) await submit(h, `burst-${i + 1}`, 'gpt2', clients[i % 4]);
      if (step === 61)
        await h.attempt({ type: 'CancelRequest', requestId: 'burst-1', actor: 'key:ops', operator: true }, 'key:ops');
      if (step === 120) await h.attempt({ type: 'ScaleDeployment', modelKey: 'llama', replicas: 2 }, 'key:ops');
      if (step === 200) await h.attempt({ type: 'EvictDeployment', modelKey: 'tiny', actor: 'key:ops' }, 'key:ops');
      await runFor(h, agents, 5000);
    }
    return h;
  },
};

/** Room made over and over on one full GPU: demotions to the CPU cache, removals, requeues, restores, a refusal. */
const evictionStorm: Scenario = {
  name: 'eviction-storm',
  description:
    'One agent with one 24 GiB GPU and 8 GiB of RAM (a 7.2 GiB CPU cache). Five models of 8 GiB (4 GiB weights, minimum deployment ' +
    'time 2 minutes); m1–m3 fill the GPU and age two hours. Requests then rotate over all five models, so each on-demand deployment ' +
    'makes room by demoting the smallest old replica (kept WARM while the cache has room, else removed), requeueing what ran on it ' +
    'before it unloads; WARM copies are restored; a request for a 30 GiB model is refused; a user cancels a request while room is being made for it ' +
    'and the operator evicts a replica with a request running.',
  async run(path) {
    const model = { settings: { concurrency: 1, weightsBytes: 4 * GIB, sizeBytes: 8 * GIB, minDeploymentMs: 2 * MIN } };
    const onDemand: Record<string, OnDemandModel> = {
      m1: model,
      m2: model,
      m3: model,
      m4: model,
      m5: model,
      giant: { settings: { concurrency: 1, weightsBytes: 26 * GIB } },
    };
    const h = await GoldenHarness.start('eviction-storm', { onDemand, path });
    const a1 = new ScriptedAgent(h, 'a1', [24], 8, 12_000);
    await a1.register();
    for (const m of ['m1', 'm2', 'm3'])
      await h.run(
        { type: 'RequestDeployment', modelKey: m, settings: model.settings, replicas: 1, onDemand: false },
        'key:ops',
      );
    await settle(h, [a1]);
    h.advance(2 * HOUR);
    await a1.heartbeat();
    // Each round: a request for a model that is HOT (it starts at once), then one for a model that is not (its
    // on-demand deployment has to make room, often by demoting the replica that is running the first request).
    const rounds: [string, string][] = [
      ['m1', 'm4'],
      ['m2', 'm5'],
      ['m4', 'm1'],
      ['m3', 'm2'],
      ['m5', 'm3'],
      ['m1', 'm4'],
      ['m2', 'm5'],
      ['m4', 'm1'],
    ];
    let n = 0;
    for (let round = 0; round < rounds.length; round++) {
      const [hot, cold] = rounds[round];
      await submit(h, `storm-${++n}`, hot, round % 2 === 0 ? 'key:alice' : 'key:bob');
      await settle(h, [a1]);
      await submit(h, `storm-${++n}`, cold, 'key:carol');
      await submit(h, `storm-${++n}`, cold, 'key:dave', { priority: round % 3 === 0 });
      if (round === 3)
        await h.attempt(
          { type: 'CancelRequest', requestId: `storm-${n}`, actor: 'key:dave', operator: false },
          'key:dave',
        );
      if (round === 5) await submit(h, `storm-${++n}`, 'giant', 'key:dave');
      if (round === 6) {
        await settle(h, [a1]);
        const s = h.state();
        const running = [...s.cluster.replicas.values()].find(
          (r) => r.state === 'HOT' && (s.requests.inFlightByReplica.get(r.replicaId)?.size ?? 0) > 0,
        );
        if (running !== undefined) {
          await h.run(
            {
              type: 'EvictReplica',
              replicaId: running.replicaId,
              reason: 'OPERATOR',
              force: true,
              replace: false,
              because: { rule: 'operator-evict', text: `operator evicted ${running.replicaId}` },
            },
            'key:ops',
          );
        }
      }
      await runFor(h, [a1], round % 2 === 0 ? 30_000 : 3 * MIN, 5000);
    }
    await runFor(h, [a1], 10 * MIN, 10_000);
    return h;
  },
};

/** An agent lost with work on it: unresponsive, waited for, lost; its requests requeued and completed elsewhere; it comes back. */
const agentLoss: Scenario = {
  name: 'agent-loss',
  description:
    'Two agents with one 24 GiB GPU each; gpt2 deployed with two replicas (one per agent). Twelve requests run; a1 falls silent: ' +
    'UNRESPONSIVE after 6 s, waited for through its 30 s grace, then LOST; what ran on it is requeued (AGENT_LOST) and completes on ' +
    'a2, its replica is removed, more requests arrive meanwhile. a1 registers again as a new boot and takes work; later a2 restarts ' +
    'within its grace (AGENT_RESTARTED: its running request is requeued, its replica loads again).',
  async run(path) {
    const onDemand: Record<string, OnDemandModel> = { gpt2: { settings: { concurrency: 1, weightsBytes: GIB } } };
    const h = await GoldenHarness.start('agent-loss', { onDemand, path });
    const a1 = new ScriptedAgent(h, 'a1', [24], 64, 20_000);
    const a2 = new ScriptedAgent(h, 'a2', [24], 64, 20_000);
    const agents = [a1, a2];
    for (const a of agents) await a.register();
    await h.run(
      { type: 'RequestDeployment', modelKey: 'gpt2', settings: onDemand.gpt2.settings, replicas: 2, onDemand: false },
      'key:ops',
    );
    await settle(h, agents);
    let n = 0;
    for (let i = 0; i < 12; i++) await submit(h, `loss-${++n}`, 'gpt2', ['key:alice', 'key:bob', 'key:carol'][i % 3]);
    await settle(h, agents);
    await runFor(h, agents, 10_000, 1000);
    a1.silent = true;
    await runFor(h, agents, 45_000, 1000);
    for (let i = 0; i < 4; i++) await submit(h, `loss-${++n}`, 'gpt2', 'key:dave');
    await runFor(h, agents, 60_000, 2000);
    a1.serviceMs = 5000;
    await a1.restart();
    await runFor(h, agents, 60_000, 2000);
    for (let i = 0; i < 4; i++) await submit(h, `loss-${++n}`, 'gpt2', 'key:alice');
    await runFor(h, agents, 4000, 1000);
    a2.silent = true;
    await runFor(h, agents, 10_000, 1000);
    await a2.restart();
    await runFor(h, agents, 3 * MIN, 2000);
    return h;
  },
};

export const SCENARIOS: readonly Scenario[] = [normalDay, evictionStorm, agentLoss];
