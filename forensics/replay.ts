// `ndif replay --to <position|time>`: the control plane as it was at a point of the log. The events up to that point
// are copied into a throwaway SQLite store in a temporary folder, and the real projection runner folds every
// projection there from position 0 (the composite ControlPlaneView: cluster, queues, requests, agents, audit). The
// source store is only read. The folder is removed afterwards unless asked to keep it.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isIsoUtc, toMs } from '../domain/shared/time.js';
import type { EventStore, NewEvent, StoredEvent } from '../eventstore/port.js';
import { SqliteEventStore } from '../eventstore/sqlite/store.js';
import { clusterView } from '../projections/cluster/queries.js';
import { ControlPlaneView } from '../projections/control-plane/live.js';
import type { ControlPlaneState } from '../projections/control-plane/state.js';
import { queuedModels, queueLength, queueView } from '../projections/queue/queries.js';
import { SqliteCheckpoints } from '../projections/runner/sqlite-checkpoints.js';
import { forensicsError, ForensicsErrorCode as C } from './errors.js';
import { forEachPage } from './log.js';

export interface ReplayTarget {
  /** What was asked: a position, or an ISO-8601 UTC time. */
  requested: string;
  kind: 'position' | 'time';
  /** The last position included. */
  position: number;
  /** `at` of the event at `position` (null when the replay is empty). */
  at: string | null;
}

export interface ReplayOptions {
  /** Where the throwaway folder is made. Default os.tmpdir(). */
  tmpRoot?: string;
  /** Keep the throwaway store (its path is in the report). Default false. */
  keep?: boolean;
  /** Refuse replays of more events than this (REPLAY_TOO_LARGE). Default 2,000,000. */
  maxEvents?: number;
  /** Queue entries shown per model. Default 20. */
  queueLimit?: number;
}

export interface ReplayReport {
  target: ReplayTarget;
  headPosition: number;
  events: number;
  cluster: ReturnType<typeof clusterView>;
  queues: { modelKey: string; length: number; head: ReturnType<typeof queueView> }[];
  requests: {
    totals: ControlPlaneState['requests']['totals'];
    byStatus: Record<string, number>;
    inFlight: { replicaId: string; requestIds: string[] }[];
  };
  agents: {
    agentId: string;
    state: string;
    bootId: string;
    since: string;
    graceUntil: string | null;
    lapses: number;
    restarts: number;
  }[];
  /** Where the throwaway store was (removed unless `keep`). */
  store: { path: string; kept: boolean };
  timings: { copyMs: number; foldMs: number };
}

/** A position (a non-negative integer) or an ISO-8601 UTC time as given on the command line or in a query string. */
export function parseReplayTarget(
  to: unknown,
): { kind: 'position'; position: number } | { kind: 'time'; atMs: number; at: string } {
  if (typeof to === 'number' && Number.isSafeInteger(to) && to >= 0) return { kind: 'position', position: to };
  if (typeof to === 'string' && /^\d{1,15}$/.test(to)) return { kind: 'position', position: Number(to) };
  if (typeof to === 'string' && isIsoUtc(to)) return { kind: 'time', atMs: toMs(to), at: to };
  throw forensicsError(
    C.replayBadTarget,
    `replay to ${JSON.stringify(to)}: give a log position (an integer >= 0) or an ISO-8601 UTC time (2025-03-01T10:00:00.000Z)`,
    {
      hint: 'ndif replay --to 1200, or --to 2025-03-01T10:00:00Z',
    },
  );
}

/**
 * The last position of the log as of a target. A time T includes the log up to the first event recorded after T
 * (`at` > T), so the result is always a prefix of the log: the state as it was at T.
 */
export async function resolveReplayTarget(store: EventStore, to: unknown): Promise<ReplayTarget> {
  const t = parseReplayTarget(to);
  const head = await store.headPosition();
  const requested = String(to);
  let position: number;
  if (t.kind === 'position') {
    if (t.position > head) {
      throw forensicsError(C.replayBeyondHead, `position ${t.position} is past the end of the log (head ${head})`, {
        hint: `replay to a position from 0 to ${head}`,
        details: { position: t.position, head },
      });
    }
    position = t.position;
  } else {
    position = await lastPositionAtOrBefore(store, t.atMs, head);
  }
  let at: string | null = null;
  if (position > 0) {
    const [e] = await store.readAll({ afterPosition: position - 1, limit: 1 });
    at = e?.position === position ? e.metadata.at : null;
  }
  return { requested, kind: t.kind, position, at };
}

async function lastPositionAtOrBefore(store: EventStore, atMs: number, head: number): Promise<number> {
  // `at` has millisecond precision: the first event after T is the first with at >= T + 1 ms.
  if (store.capabilities.queryFilters.includes('fromAt')) {
    const [first] = await store.query({ fromAt: new Date(atMs + 1).toISOString(), limit: 1 });
    return first === undefined ? head : first.position - 1;
  }
  let last = 0;
  let done = false;
  await forEachPage(store, { toPosition: head }, (page) => {
    if (done) return;
    for (const e of page) {
      if (Date.parse(e.metadata.at) > atMs) {
        done = true;
        return;
      }
      last = e.position;
    }
  });
  return last;
}

const asNew = (e: StoredEvent): NewEvent => ({
  id: e.id,
  type: e.type,
  version: e.version,
  data: e.data,
  metadata: e.metadata,
});

/** Copies the source's events up to `toPosition` into `target`, keeping streams, revisions and order; returns the count. */
async function copyPrefix(source: EventStore, target: EventStore, toPosition: number): Promise<number> {
  let n = 0;
  await forEachPage(source, { toPosition }, async (page) => {
    const appends: Promise<unknown>[] = [];
    for (let i = 0; i < page.length; ) {
      let j = i + 1;
      while (j < page.length && page[j].streamId === page[i].streamId && page[j].revision === page[j - 1].revision + 1)
        j++;
      const first = page[i];
      // Issued in the same tick, the appends of a page commit as one transaction, in order.
      appends.push(
        target.append(first.streamId, page.slice(i, j).map(asNew), {
          expectedRevision: first.revision === 0 ? 'no_stream' : first.revision - 1,
        }),
      );
      i = j;
    }
    await Promise.all(appends);
    n += page.length;
  });
  return n;
}

function summarize(
  state: ControlPlaneState,
  queueLimit: number,
): Pick<ReplayReport, 'cluster' | 'queues' | 'requests' | 'agents'> {
  const byStatus: Record<string, number> = {};
  for (const v of state.requests.byId.values()) byStatus[v.status] = (byStatus[v.status] ?? 0) + 1;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    cluster: clusterView(state.cluster),
    queues: queuedModels(state.queue).map((modelKey) => ({
      modelKey,
      length: queueLength(state.queue, modelKey),
      head: queueView(state.queue, modelKey, queueLimit),
    })),
    requests: {
      totals: { ...state.requests.totals },
      byStatus,
      inFlight: [...state.requests.inFlightByReplica.entries()]
        .filter(([, ids]) => ids.size > 0)
        .map(([replicaId, ids]) => ({ replicaId, requestIds: [...ids].sort() }))
        .sort((a, b) => (a.replicaId < b.replicaId ? -1 : 1)),
    },
    agents: [...state.agents.byId.values()].map((a) => ({
      agentId: a.agentId,
      state: a.state,
      bootId: a.bootId,
      since: iso(a.sinceMs)!,
      graceUntil: iso(a.graceUntilMs),
      lapses: a.lapses,
      restarts: a.restarts,
    })),
  };
}

export interface ReplayedState {
  target: ReplayTarget;
  state: ControlPlaneState;
  events: number;
  headPosition: number;
  store: { path: string; kept: boolean };
  timings: { copyMs: number; foldMs: number };
}

/** Rebuilds the control plane's projections as of `to` in a throwaway store; returns the folded state. */
export async function replayState(
  source: EventStore,
  to: unknown,
  options: ReplayOptions = {},
): Promise<ReplayedState> {
  const target = await resolveReplayTarget(source, to);
  const headPosition = await source.headPosition();
  const maxEvents = options.maxEvents ?? 2_000_000;
  if (target.position > maxEvents) {
    throw forensicsError(
      C.replayTooLarge,
      `a replay to position ${target.position} copies more than ${maxEvents} events`,
      {
        hint: 'replay to an earlier point, or raise the limit where the replay runs',
        details: { position: target.position, maxEvents },
      },
    );
  }
  const root = options.tmpRoot ?? tmpdir();
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'ndif-replay-'));
  const path = join(dir, 'events.db');
  const throwaway = new SqliteEventStore({ path });
  // Nothing here needs to survive a crash: the copy is rebuilt from the source every time.
  throwaway.db.pragma('synchronous = OFF');
  let view: ControlPlaneView | undefined;
  try {
    const t0 = performance.now();
    const events = await copyPrefix(source, throwaway, target.position);
    const t1 = performance.now();
    view = new ControlPlaneView(throwaway, new SqliteCheckpoints(throwaway.db), {
      snapshotEveryEvents: Number.MAX_SAFE_INTEGER,
      snapshotEveryMs: 86_400_000,
      // A replay reports every request's status as of its position (its size is bounded by maxEvents).
      hot: { recentFinished: Number.MAX_SAFE_INTEGER },
    });
    await view.start();
    await view.catchUp();
    const t2 = performance.now();
    const state = view.state;
    return {
      target,
      state,
      events,
      headPosition,
      store: { path, kept: options.keep === true },
      timings: { copyMs: Math.round(t1 - t0), foldMs: Math.round(t2 - t1) },
    };
  } finally {
    await view?.stop();
    await throwaway.close();
    if (options.keep !== true) rmSync(dir, { recursive: true, force: true });
  }
}

/** The cluster, queues, requests and agents as they were at `to`. */
export async function replayTo(source: EventStore, to: unknown, options: ReplayOptions = {}): Promise<ReplayReport> {
  const r = await replayState(source, to, options);
  return {
    target: r.target,
    headPosition: r.headPosition,
    events: r.events,
    ...summarize(r.state, options.queueLimit ?? 20),
    store: r.store,
    timings: r.timings,
  };
}
