// The soak: the embedded fabric's real processes in compressed time (tests/faults/fabric.ts COMPRESSED_TIME:
// heartbeats, timeouts, autoscale, minimum deployment time scaled down ~20×), with
//   - `clients` researchers (one API key and one status websocket each) submitting without pause: most requests
//     read a layer, some sleep in the forward pass, some throw (an ERROR with the user's reason is expected),
//     some are cancelled by their owner a moment after submitting; two clients are untrusted (the sandbox);
//   - an operator deploying, scaling (0–2) and evicting (a model or a replica), at random;
//   - kill -9 of the GPU agent process every `killEveryMs` (the fabric starts it again).
// Then the faults stop and the fabric drains. Every acknowledged request must end COMPLETED, ERROR with a reason,
// or CANCELLED by its owner; none lost (unknown to the log), none stuck (not finished), none finished twice.
// Shared by tests/soak/soak.e2e.test.ts and `npm run bench -- soak` (bench/soak.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoredEvent } from '../../eventstore/port.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { controlPlaneToSnapshot, foldControlPlane } from '../../projections/control-plane/state.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { TestSocket } from '../query-api/ws-client.js';
import { startEmbedded } from '../faults/embedded.js';
import { readLog, type FaultFabric } from '../faults/fabric.js';
import { call, cluster, deploy, evict, scale, slowBlock, QUICK_BLOCK, type Answer } from '../faults/http.js';

export interface SoakOptions {
  clients: number;
  /**
   * How long clients, operator and kills run; longer, up to 3 × activeMs, until the agent was killed `minKills` times
   * (a loaded machine restarts the agent slowly, and each kill waits for it to come back).
   */
  activeMs: number;
  minKills: number;
  /**
   * How long the drain waits, after that, without a request finishing: a request still open then is stuck. A slow
   * machine drains slowly but keeps finishing requests; the drain stops at 5 × drainMs in all.
   */
  drainMs: number;
  killEveryMs: number;
  operatorEveryMs: number;
  seed: number;
  log?: (line: string) => void;
  /** Keep the data folder (event log) here instead of removing it. */
  keepDir?: string;
}

export const DEFAULT_SOAK: SoakOptions = {
  clients: 20,
  activeMs: 25_000,
  minKills: 3,
  drainMs: 12_000,
  killEveryMs: 5_000,
  operatorEveryMs: 1_500,
  seed: 20_251_203,
};

export interface SoakReport {
  requests: number;
  completed: number;
  errored_with_reason: number;
  cancelled: number;
  lost: number;
  stuck: number;
  duplicates: number;
  /** ERROR without a type and message (must be 0), CANCELLED by someone else than the owner (must be 0). */
  errored_without_reason: number;
  cancelled_not_by_owner: number;
  /** ERRORs other than the ones the clients asked for (blocks that throw). */
  unexpected_errors: number;
  errors_by_type: Record<string, number>;
  /** Submissions refused by the API (4xx/5xx) and answered 5xx, by code. */
  refused_submits: Record<string, number>;
  requeues: Record<string, number>;
  agent_kills: number;
  agent_boots: number;
  operator_actions: Record<string, number>;
  /** The live projection saved at the end equals a fresh fold of the log. */
  projection_equals_rebuild: boolean;
  events: number;
  logged_errors: number;
  durations: { total_ms: number; startup_ms: number; active_ms: number; drain_ms: number; check_ms: number };
}

/** mulberry32: the soak's choices (not its timing) follow the seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const MODELS = ['gpt2-tiny', 'tiny-b'] as const;
const TERMINAL = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);
const THROWN = 'SoakUserError';

interface Sent {
  requestId: string;
  client: number;
  keyId: string;
  throws: boolean;
  cancels: boolean;
}

export async function runSoak(options: Partial<SoakOptions> = {}): Promise<SoakReport> {
  const o = { ...DEFAULT_SOAK, ...options };
  const say = o.log ?? (() => undefined);
  const t0 = Date.now();
  const random = rng(o.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const dir = o.keepDir ?? mkdtempSync(join(tmpdir(), 'ndif-soak-'));
  const labels = Array.from({ length: o.clients }, (_, c) => `client-${c}`);
  let f: FaultFabric | undefined;
  try {
    f = await startEmbedded({
      dataDir: dir,
      gpus: '2x1GiB',
      models: `tiny-b=${ensureModel('gpt2-tiny')}`,
      apiKeys: [{ label: 'operator', operator: true }, ...labels.map((label, c) => ({ label, trusted: c >= 2 }))],
      env: { NDIF_SANDBOX_POOL_SIZE: '1' },
    });
    const fabric = f;
    const keyIdOf = (key: string) => key.split('_')[1]!;
    const startupMs = Date.now() - t0;
    say(`fabric up in ${startupMs} ms`);
    await deploy(fabric, {
      model: 'gpt2-tiny',
      minDeploymentMs: 0,
      autoscale: { thresholdMs: 1500, backoffMs: 3000, maxReplicas: 2 },
    });

    const sent: Sent[] = [];
    const refused: Record<string, number> = {};
    const ops: Record<string, number> = {};
    let stopping = false;
    let kills = 0;
    const activeStart = Date.now();

    const client = async (c: number) => {
      const key = fabric.keys.get(labels[c]!)!;
      const headers = { authorization: `Bearer ${key}` };
      const ws = await TestSocket.open(fabric.queryUrl, headers);
      try {
        for (let i = 0; !stopping; i++) {
          const requestId = `soak-${c}-${i}`;
          const r = random();
          const throws = r < 0.1;
          const cancels = !throws && r < 0.2;
          const block = throws
            ? `async (m) => { await m.transformer.h[0].output; throw new Error('${THROWN}: client ${c} asked for this'); }`
            : cancels
              ? slowBlock(300 + Math.floor(random() * 300))
              : r < 0.45
                ? slowBlock(20 + Math.floor(random() * 120))
                : QUICK_BLOCK;
          const model = random() < 0.75 ? 'gpt2-tiny' : 'tiny-b';
          const cancelAfter = Math.floor(random() * 400);
          await ws.subscribe(requestId);
          const a = await call(fabric.commandUrl, '/requests', {
            body: { requestId, model, invokes: [{ input: `soak ${c} ${i}`, block }] },
            headers,
          });
          if (a.status !== 202) {
            const code = `${a.status} ${String(a.body.code)}`;
            refused[code] = (refused[code] ?? 0) + 1;
            continue;
          }
          sent.push({ requestId, client: c, keyId: keyIdOf(key), throws, cancels });
          if (cancels) {
            await sleep(cancelAfter);
            await call(fabric.commandUrl, `/requests/${requestId}/cancel`, { body: {}, headers });
          }
          // Wait for its end (or move on after a while; it is checked at the end either way).
          await ws
            .until((ms) => ms.some((m) => m.type === 'ended' && m.requestId === requestId), `end of ${requestId}`, 2500)
            .catch(() => undefined);
          await sleep(Math.floor(random() * 150));
        }
      } finally {
        await ws.close();
      }
    };

    const operator = async () => {
      while (!stopping) {
        await sleep(o.operatorEveryMs * (0.5 + random()));
        if (stopping) return;
        const model = pick(MODELS);
        const action = pick(['deploy', 'scale', 'scale', 'evict-model', 'evict-replica'] as const);
        let a: Answer;
        if (action === 'deploy')
          a = await deploy(fabric, {
            model,
            minDeploymentMs: 0,
            autoscale: { thresholdMs: 1500, backoffMs: 3000, maxReplicas: 2 },
          });
        else if (action === 'scale') a = await scale(fabric, model, Math.floor(random() * 3));
        else if (action === 'evict-model') a = await evict(fabric, { model });
        else {
          const replicas =
            (await cluster(fabric)).deployments
              .find((d) => d.modelKey === model)
              ?.replicas.filter((r) => r.level !== 'COLD') ?? [];
          if (replicas.length === 0) continue;
          a = await evict(fabric, { replica: pick(replicas).replicaId });
        }
        const outcome = `${action} ${a.status < 300 ? 'ok' : `${a.status} ${String(a.body.code)}`}`;
        ops[outcome] = (ops[outcome] ?? 0) + 1;
      }
    };

    const chaos = async () => {
      while (!stopping) {
        await sleep(o.killEveryMs * (0.75 + random() / 2));
        if (stopping) return;
        const killed = await fabric.killAgent();
        kills++;
        say(`kill -9 agent pid ${killed.pid} at ${Date.now() - activeStart} ms`);
        await fabric.agentBack(killed, 30_000);
      }
    };

    const running = [...labels.map((_, c) => client(c)), operator(), chaos()];
    await sleep(o.activeMs);
    while (kills < o.minKills && Date.now() - activeStart < 3 * o.activeMs) await sleep(200);
    stopping = true;
    await Promise.all(running);
    const activeMs = Date.now() - activeStart;
    say(`active phase over: ${sent.length} requests, ${kills} kills, operator ${JSON.stringify(ops)}`);

    // Drain: every request must end on its own now that the faults have stopped.
    const drainStart = Date.now();
    const statusOf = async (s: Sent) => {
      const r = await call(fabric.queryUrl, `/requests/${s.keyId}:${s.requestId}`, { headers: fabric.operatorHeaders });
      return r.status === 200 ? String(r.body.status) : `HTTP ${r.status}`;
    };
    let open = sent;
    let progressAt = drainStart;
    while (Date.now() - progressAt < o.drainMs && Date.now() - drainStart < 5 * o.drainMs) {
      const statuses = await Promise.all(open.map(statusOf));
      const still = open.filter((_, i) => !TERMINAL.has(statuses[i]!));
      if (still.length < open.length) progressAt = Date.now();
      open = still;
      if (open.length === 0) break;
      await sleep(250);
    }
    const drainMs = Date.now() - drainStart;
    say(`drained in ${drainMs} ms; ${open.length} open`);

    const checkStart = Date.now();
    const loggedErrors = fabric.loggedErrors().length;
    await fabric.stop();
    const { store, close } = await fabric.openStore();
    let all: StoredEvent[];
    let projectionEqualsRebuild: boolean;
    try {
      all = await readLog(store);
      const cp = await new SqliteCheckpoints((store as SqliteEventStore).db).load('control-plane');
      projectionEqualsRebuild =
        cp !== undefined &&
        cp.position === all.at(-1)!.position &&
        JSON.stringify(cp.snapshot) === JSON.stringify(controlPlaneToSnapshot(foldControlPlane(all)));
    } finally {
      await close();
    }
    const byStream = new Map<string, StoredEvent[]>();
    for (const e of all) {
      if (!e.streamId.startsWith('request-')) continue;
      const list = byStream.get(e.streamId) ?? [];
      list.push(e);
      byStream.set(e.streamId, list);
    }
    const report: SoakReport = {
      requests: sent.length,
      completed: 0,
      errored_with_reason: 0,
      cancelled: 0,
      lost: 0,
      stuck: 0,
      duplicates: 0,
      errored_without_reason: 0,
      cancelled_not_by_owner: 0,
      unexpected_errors: 0,
      errors_by_type: {},
      refused_submits: refused,
      requeues: {},
      agent_kills: kills,
      agent_boots: all.filter((e) => e.type === 'AgentRegistered').length,
      operator_actions: ops,
      projection_equals_rebuild: projectionEqualsRebuild,
      events: all.length,
      logged_errors: loggedErrors,
      durations: { total_ms: 0, startup_ms: startupMs, active_ms: activeMs, drain_ms: drainMs, check_ms: 0 },
    };
    const eventsById = new Map(all.map((e) => [e.id, e]));
    for (const s of sent) {
      // Recorded under the id scoped to the client's key (auth on).
      const stream = byStream.get(`request-${s.keyId}:${s.requestId}`);
      if (stream === undefined || !stream.some((e) => e.type === 'RequestReceived')) {
        report.lost++;
        continue;
      }
      for (const e of stream.filter((x) => x.type === 'RequestRequeued')) {
        const reason = (e.data as { reason: string }).reason;
        report.requeues[reason] = (report.requeues[reason] ?? 0) + 1;
      }
      const ends = stream.filter(
        (e) => e.type === 'RequestCompleted' || e.type === 'RequestFailed' || e.type === 'RequestCancelled',
      );
      if (ends.length === 0) {
        report.stuck++;
        continue;
      }
      const afterEnd = stream.filter(
        (e) => e.position > ends[0]!.position && (e.type === 'RequestDispatched' || e.type === 'RequestStarted'),
      );
      if (ends.length > 1 || afterEnd.length > 0 || stream.filter((e) => e.type === 'RequestReceived').length > 1)
        report.duplicates++;
      const end = ends[0]!;
      const d = end.data as { errorType?: string; message?: string; by?: string; actor?: string };
      if (end.type === 'RequestCompleted') report.completed++;
      else if (end.type === 'RequestCancelled') {
        report.cancelled++;
        if (d.by !== 'user' || d.actor !== `key:${s.keyId}` || !s.cancels) report.cancelled_not_by_owner++;
      } else {
        const type = d.errorType ?? '';
        report.errors_by_type[type] = (report.errors_by_type[type] ?? 0) + 1;
        if (type.length > 0 && (d.message ?? '').length > 0) report.errored_with_reason++;
        else report.errored_without_reason++;
        const asked = s.throws && type === 'BlockError' && (d.message ?? '').includes(THROWN);
        if (!asked && !refusedWhileAgentDown(end.data, eventsById) && !requeuedOutByChaos(end.data, stream))
          report.unexpected_errors++;
      }
    }
    report.durations.check_ms = Date.now() - checkStart;
    report.durations.total_ms = Date.now() - t0;
    return report;
  } finally {
    await f?.close();
    if (o.keepDir === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A request failed by a placement refused while no agent was ACTIVE (every candidate excluded as not ACTIVE, or
 * none): the agent was killed, or slow to come back under load, when an on-demand deploy ran, and the requests
 * queued before the refusal fail with it (docs/control-plane.md, "Deploy on demand"). An outcome of the soak's
 * kills, not a fault; a refusal with an ACTIVE agent among its candidates still counts as unexpected.
 */
export function refusedWhileAgentDown(failed: unknown, eventsById: Map<string, StoredEvent>): boolean {
  const f = failed as { errorType?: string; because?: { refs?: { eventId?: string } } | null };
  if (f.errorType !== 'DeploymentRefused') return false;
  const refusal = eventsById.get(f.because?.refs?.eventId ?? '');
  if (refusal?.type !== 'DeploymentRefused') return false;
  const candidates = (refusal.data as { candidates: Array<{ excluded: string | null }> }).candidates;
  return candidates.every((c) => c.excluded !== null && / not ACTIVE$/.test(c.excluded));
}

/**
 * A request failed TooManyAttempts after attempts that the soak's kills and the operator's evictions ended (every
 * requeue PREEMPTED, AGENT_RESTARTED or AGENT_LOST): the attempt limit doing its job under the soak's chaos.
 */
export function requeuedOutByChaos(failed: unknown, stream: readonly StoredEvent[]): boolean {
  if ((failed as { errorType?: string }).errorType !== 'TooManyAttempts') return false;
  const reasons = stream.filter((e) => e.type === 'RequestRequeued').map((e) => (e.data as { reason: string }).reason);
  return reasons.length > 0 && reasons.every((r) => r === 'PREEMPTED' || r === 'AGENT_RESTARTED' || r === 'AGENT_LOST');
}
