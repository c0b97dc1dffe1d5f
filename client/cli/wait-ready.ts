// Waits for replicas a deploy or scale asked for to become HOT, by reading GET /cluster: done when all are HOT;
// refused or failed as soon as one is (the cluster view keeps only live replicas, and the deployment's
// lastFailure names the replica and gives the refusal's numbers); NotReadyError when the wait runs out.
import type { FabricAdmin } from '../sdk/admin.js';
import type { ClusterReply, ClusterReplicaView } from '../sdk/wire.js';
import { InterruptedError, NotReadyError } from './failures.js';

export interface ReplicaOutcome {
  replicaId: string;
  state: string;
  agentId: string | null;
  gpus: number[];
  bytesPerGpu: number;
}

export interface WaitOptions {
  waitMs: number;
  pollMs?: number;
  signal: AbortSignal;
  /** Called when a replica's state changes (for progress lines). */
  onChange?: (replicaId: string, state: string, r: ClusterReplicaView | null) => void;
  now?: () => number;
}

/** What the cluster says about each replica: live (with its state), or gone with the deployment's failure. */
export function replicaStates(cluster: ClusterReply, model: string, replicaIds: string[]) {
  const dep = cluster.deployments.find((d) => d.modelKey === model);
  return replicaIds.map((id) => {
    const live = dep?.replicas.find((r) => r.replicaId === id) ?? null;
    const failure = dep?.lastFailure && dep.lastFailure.replicaId === id ? dep.lastFailure : null;
    return { id, live, failure };
  });
}

export async function waitForHot(
  admin: FabricAdmin,
  model: string,
  replicaIds: string[],
  opts: WaitOptions,
): Promise<ReplicaOutcome[]> {
  const now = opts.now ?? Date.now;
  const start = now();
  const seen = new Map<string, string>();
  let last: ReturnType<typeof replicaStates> = [];
  for (;;) {
    if (opts.signal.aborted) throw new InterruptedError();
    last = replicaStates(await admin.cluster(opts.signal), model, replicaIds);
    for (const s of last) {
      const state = s.live?.state ?? (s.failure ? s.failure.kind : 'REMOVED');
      if (seen.get(s.id) !== state) opts.onChange?.(s.id, state, s.live);
      seen.set(s.id, state);
    }
    const bad = last.find((s) => s.live === null);
    if (bad) {
      const what = bad.failure
        ? bad.failure.kind === 'REFUSED'
          ? 'was refused'
          : 'failed to load'
        : 'was removed before it became HOT';
      throw new NotReadyError(`${bad.id} ${what}${bad.failure ? `: ${bad.failure.text}` : ''}`, {
        model,
        replicaId: bad.id,
        kind: bad.failure?.kind ?? 'REMOVED',
        text: bad.failure?.text ?? null,
        waitedMs: now() - start,
      });
    }
    if (last.every((s) => s.live!.state === 'HOT')) {
      return last.map((s) => ({
        replicaId: s.id,
        state: 'HOT',
        agentId: s.live!.agentId,
        gpus: s.live!.gpus,
        bytesPerGpu: s.live!.bytesPerGpu,
      }));
    }
    if (now() - start >= opts.waitMs) {
      const states = last.map((s) => `${s.id} ${s.live!.state}`).join(', ');
      throw new NotReadyError(`not READY within ${Math.round(opts.waitMs / 1000)} s: ${states}`, {
        model,
        states: Object.fromEntries(last.map((s) => [s.id, s.live!.state])),
        waitedMs: now() - start,
      });
    }
    await sleep(opts.pollMs ?? 250, opts.signal);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
