// `ndif why <request-id|replica-id|agent-id>`: the subject's events from the log, each with who decided it, when,
// the rule and the numbers the decision recorded, the chain of events that caused it (following causation ids
// back until a command or an event of the subject), and what it caused elsewhere. Nothing is re-decided: every
// sentence and number comes from recorded events (or is derived from them by folding the log, marked `derived`).
import type { DomainEvent } from '../domain/events/types.js';
import { fmtBytes, fmtMs } from '../domain/shared/format.js';
import { agentStream, deploymentStream, ENTITY_ID, modelKeyOfReplica, requestStream } from '../domain/shared/ids.js';
import type { EventStore, StoredEvent } from '../eventstore/port.js';
import { decode } from '../projections/decode.js';
import { applyQueue } from '../projections/queue/apply.js';
import { positionOf, queueLength } from '../projections/queue/queries.js';
import { initialQueueState } from '../projections/queue/state.js';
import { actorKind, explainEvent, type EventExplanation, type Fact } from './describe.js';
import { forensicsError, ForensicsErrorCode as C } from './errors.js';
import { EventLookup, forEachPage } from './log.js';

export type WhySubjectKind = 'request' | 'replica' | 'agent';

export interface EventFacts extends EventExplanation {
  position: number;
  eventId: string;
  type: string;
  streamId: string;
  at: string;
  actor: string;
  decidedBy: ReturnType<typeof actorKind>;
  /** Numbers derived from the log around the event (queue position at enqueue, a victim's minimum deployment time). */
  derived: Record<string, Fact>;
}

export type CauseLink =
  | ({ kind: 'event' } & EventFacts)
  /** The chain reached an event that is itself a step of this answer. */
  | { kind: 'step'; position: number; eventId: string; type: string }
  /** The chain reached the command that started it (a user, operator or agent action). */
  | { kind: 'command'; commandId: string; actor: string; at: string }
  | { kind: 'unresolved'; eventId: string; note: string };

export interface WhyStep extends EventFacts {
  revision: number;
  correlationId: string;
  causationId: string;
  /** Consecutive events of the same kind folded into this step (log lines); 1 otherwise. */
  count: number;
  /** What caused it, nearest first. */
  causes: CauseLink[];
  /** Events it caused outside the subject (e.g. the requeues an eviction caused). */
  effects: EventFacts[];
}

export interface WhyReport {
  subject: { kind: WhySubjectKind; id: string; streamId: string };
  /** The log's head position when the answer was read. */
  headPosition: number;
  steps: WhyStep[];
}

export interface WhyOptions {
  /** Force the subject kind; by default a `<model>#<n>` id is a replica, else a request, else an agent. */
  kind?: WhySubjectKind;
  /** Longest causal chain followed per step. Default 8. */
  maxDepth?: number;
  /** Events listed per step as its effects. Default 20; 0 lists none. */
  maxEffects?: number;
  /** Derive the queue position after each enqueue by folding the log up to it. Default true. */
  queuePositions?: boolean;
}

function facts(e: StoredEvent, derived: Record<string, Fact> = {}, explanation = explainEvent(e)): EventFacts {
  return {
    position: e.position,
    eventId: e.id,
    type: e.type,
    streamId: e.streamId,
    at: e.metadata.at,
    actor: e.metadata.actor,
    decidedBy: actorKind(e.metadata.actor),
    ...explanation,
    derived,
  };
}

const replicaOf = (e: StoredEvent): string | undefined =>
  (e.data as { replicaId?: unknown } | null)?.replicaId as string | undefined;

async function subjectEvents(
  lookup: EventLookup,
  id: string,
  kind: WhySubjectKind | undefined,
): Promise<{ kind: WhySubjectKind; streamId: string; events: StoredEvent[] }> {
  const model = modelKeyOfReplica(id);
  if (kind === 'replica' || (kind === undefined && model !== undefined)) {
    if (model === undefined)
      throw forensicsError(C.whyBadId, `${JSON.stringify(id)} is not a replica id (<modelKey>#<n>)`, {
        hint: 'replica ids look like gpt2#1 (ndif status lists them)',
      });
    const streamId = deploymentStream(model);
    const all = await lookup.stream(streamId);
    const mine = all.filter((e) => replicaOf(e) === id || (e.data as { forReplicaId?: string }).forReplicaId === id);
    if (mine.length === 0) {
      throw forensicsError(
        C.whyNotFound,
        `replica ${id} was never requested (${streamId} holds ${all.length} event(s))`,
        { hint: 'list replicas with ndif status', details: { id, streamId } },
      );
    }
    // The deployment-level events decided together with the replica's (DeploymentRequested/Scaled/Evicted) explain it.
    const keep = new Set(mine.map((e) => e.revision));
    for (const e of mine) {
      for (let r = e.revision - 1; r >= 0; r--) {
        const prev = all[r];
        if (
          prev === undefined ||
          prev.metadata.causationId !== e.metadata.causationId ||
          prev.metadata.commandId !== e.metadata.commandId ||
          prev.metadata.at !== e.metadata.at
        )
          break;
        if (replicaOf(prev) === undefined) keep.add(r);
      }
    }
    return { kind: 'replica', streamId, events: all.filter((e) => keep.has(e.revision)) };
  }
  if (!ENTITY_ID.test(id))
    throw forensicsError(C.whyBadId, `${JSON.stringify(id)} is not a request, replica or agent id`, {
      hint: 'ids are 1–128 of [A-Za-z0-9._:-], replica ids <modelKey>#<n>',
    });
  for (const k of kind === undefined ? (['request', 'agent'] as const) : [kind]) {
    const streamId = k === 'request' ? requestStream(id) : agentStream(id);
    const events = await lookup.stream(streamId);
    if (events.length > 0) return { kind: k, streamId, events };
  }
  throw forensicsError(C.whyNotFound, `no ${kind ?? 'request or agent'} ${id} in the log`, {
    hint: 'check the id returned at submission (a replica id is <modelKey>#<n>)',
    details: { id },
  });
}

/** Queue position and length right after each of the request's enqueues, by folding the queues up to the last one. */
async function queuePositionsAt(
  store: EventStore,
  requestId: string,
  modelKey: string,
  positions: number[],
): Promise<Map<number, { position: number | null; length: number }>> {
  const out = new Map<number, { position: number | null; length: number }>();
  if (positions.length === 0) return out;
  const wanted = new Set(positions);
  const q = initialQueueState();
  await forEachPage(store, { toPosition: Math.max(...positions) }, (page) => {
    for (const e of page) {
      applyQueue(q, e, decode(e));
      if (wanted.has(e.position))
        out.set(e.position, { position: positionOf(q, requestId) ?? null, length: queueLength(q, modelKey) });
    }
  });
  return out;
}

/** For a make-room demotion or eviction: the victim's minimum deployment time and pin, from its deployment stream. */
async function makeRoomFacts(lookup: EventLookup, e: StoredEvent, d: DomainEvent): Promise<Record<string, Fact>> {
  if (d.type !== 'ReplicaDemotionRequested' && d.type !== 'ReplicaEvictionRequested') return {};
  if (!d.data.because.rule.startsWith('make-room')) return {};
  const stream = await lookup.stream(e.streamId);
  let minDeploymentMs: number | null = null;
  let weightsBytes: number | null = null;
  let pinned = false;
  for (const x of stream) {
    if (x.revision >= e.revision) break;
    const xd = decode(x);
    if (xd?.type === 'ReplicaRequested' && xd.data.replicaId === d.data.replicaId) {
      minDeploymentMs = xd.data.settings.minDeploymentMs;
      weightsBytes = xd.data.settings.weightsBytes;
    }
    if (xd?.type === 'DeploymentRequested') pinned = pinned || xd.data.pinned;
    if (xd?.type === 'DeploymentPinned') pinned = xd.data.pinned;
  }
  const age = d.data.because.numbers?.victimAgeMs;
  return {
    victimMinDeploymentMs: minDeploymentMs,
    victimWeightsBytes: weightsBytes,
    victimPinned: pinned,
    victimOlderThanMinimum: typeof age === 'number' && minDeploymentMs !== null ? age >= minDeploymentMs : null,
  };
}

/** The make-room sentence with every number: what needed room where, and why this replica was the one. */
function makeRoomSummary(d: DomainEvent, derived: Record<string, Fact>): string | undefined {
  if (d.type !== 'ReplicaDemotionRequested' && d.type !== 'ReplicaEvictionRequested') return undefined;
  const b = d.data.because;
  if (!b.rule.startsWith('make-room')) return undefined;
  const n = b.numbers ?? {};
  const r = b.refs ?? {};
  const num = (k: string) => (typeof n[k] === 'number' ? (n[k] as number) : Number.NaN);
  const demote = b.rule === 'make-room-demote';
  const age = num('victimAgeMs');
  const min = typeof derived.victimMinDeploymentMs === 'number' ? derived.victimMinDeploymentMs : Number.NaN;
  const protectedNote =
    derived.victimPinned === true || derived.victimOlderThanMinimum === false
      ? ` (forced: the replica was ${derived.victimPinned === true ? 'pinned' : 'younger than its minimum deployment time'})`
      : ' older than its minimum deployment time';
  const cacheFree = num('cacheBudgetBytes') - num('cacheUsedBytes');
  return (
    `${demote ? 'demoted' : 'evicted'} to make room: ${r.forModel ?? '?'} (${r.forReplicaId ?? '?'}) needed ${fmtBytes(num('bytesPerGpu'))} (${num('bytesPerGpu')} B) ` +
    `on GPU ${r.gpus ?? '?'} of agent ${r.agentId ?? '?'}, which had ${fmtBytes(num('gpuFreeBytes'))} free; ` +
    `${d.data.replicaId} (${fmtBytes(num('victimBytes'))}) was the smallest unpinned replica there${protectedNote} ` +
    `(age ${fmtMs(age)}${Number.isNaN(min) ? '' : ` ${age >= min ? '≥' : '<'} minimum ${fmtMs(min)}`})` +
    (demote
      ? `; kept WARM in the CPU cache (${fmtBytes(num('cacheUsedBytes'))} of ${fmtBytes(num('cacheBudgetBytes'))} in use)`
      : `; removed: the CPU cache had ${fmtBytes(cacheFree)} free, not enough to keep ${typeof derived.victimWeightsBytes === 'number' ? `its ${fmtBytes(derived.victimWeightsBytes)} of weights` : 'it'} WARM`)
  );
}

async function explainWithLog(
  lookup: EventLookup,
  e: StoredEvent,
  derived: Record<string, Fact> = {},
): Promise<EventFacts> {
  const d = decode(e);
  const x = explainEvent(e);
  if (d !== undefined) {
    Object.assign(derived, await makeRoomFacts(lookup, e, d));
    x.summary = makeRoomSummary(d, derived) ?? x.summary;
  }
  return facts(e, derived, x);
}

async function causesOf(
  lookup: EventLookup,
  e: StoredEvent,
  steps: ReadonlySet<string>,
  maxDepth: number,
): Promise<CauseLink[]> {
  const out: CauseLink[] = [];
  let cur = e;
  for (let depth = 0; depth < maxDepth; depth++) {
    const causationId = cur.metadata.causationId;
    // No commandId in the metadata: the causation id is the command's own id (a user, operator or agent action).
    if (cur.metadata.commandId === undefined) {
      out.push({ kind: 'command', commandId: causationId, actor: cur.metadata.actor, at: cur.metadata.at });
      return out;
    }
    const cause = await lookup.find(causationId, { correlationId: cur.metadata.correlationId, streamId: cur.streamId });
    if (cause === undefined) {
      out.push({
        kind: 'unresolved',
        eventId: causationId,
        note: `no event ${causationId} in correlation ${cur.metadata.correlationId} or stream ${cur.streamId}`,
      });
      return out;
    }
    if (steps.has(cause.id)) {
      out.push({ kind: 'step', position: cause.position, eventId: cause.id, type: cause.type });
      return out;
    }
    out.push({ kind: 'event', ...(await explainWithLog(lookup, cause)) });
    cur = cause;
  }
  return out;
}

const FOLDED_RUNS = new Set(['RequestLogged', 'RequestTokensGenerated']);

/** Folds runs of consecutive log lines (or token batches) of one attempt into their first event (with a count). */
function foldLogLines(events: StoredEvent[]): { event: StoredEvent; count: number }[] {
  const out: { event: StoredEvent; count: number }[] = [];
  for (const e of events) {
    const last = out[out.length - 1];
    if (
      FOLDED_RUNS.has(e.type) &&
      last?.event.type === e.type &&
      (last.event.data as { attempt: number }).attempt === (e.data as { attempt: number }).attempt
    )
      last.count++;
    else out.push({ event: e, count: 1 });
  }
  return out;
}

export async function explainWhy(store: EventStore, id: string, options: WhyOptions = {}): Promise<WhyReport> {
  if (typeof id !== 'string' || id.length === 0 || id.length > 200)
    throw forensicsError(C.whyBadId, 'give a request id, a replica id (<modelKey>#<n>) or an agent id');
  const maxDepth = options.maxDepth ?? 8;
  const maxEffects = options.maxEffects ?? 20;
  const headPosition = await store.headPosition();
  const lookup = new EventLookup(store);
  const subject = await subjectEvents(lookup, id, options.kind);
  const stepIds = new Set(subject.events.map((e) => e.id));
  const derivedAt = new Map<number, Record<string, Fact>>();
  if (subject.kind === 'request' && options.queuePositions !== false) {
    const enqueues = subject.events.filter((e) => e.type === 'RequestQueued' || e.type === 'RequestRequeued');
    const modelKey = (subject.events[0].data as { modelKey: string }).modelKey;
    for (const [p, at] of await queuePositionsAt(
      store,
      id,
      modelKey,
      enqueues.map((e) => e.position),
    ))
      derivedAt.set(p, { queuePosition: at.position, queueLength: at.length });
  }
  const steps: WhyStep[] = [];
  for (const { event: e, count } of foldLogLines(subject.events)) {
    const f = await explainWithLog(lookup, e, derivedAt.get(e.position) ?? {});
    if (count > 1 && e.type === 'RequestTokensGenerated')
      f.summary = `${count} token batches of attempt ${(e.data as { attempt: number }).attempt}, the first: ${f.summary.replace(/^attempt \d+ /, '')}`;
    else if (count > 1)
      f.summary = `${count} ${(e.data as { stream: string }).stream === 'stderr' ? 'stderr' : 'output'} lines of attempt ${(e.data as { attempt: number }).attempt}, the first: ${f.summary.replace(/^attempt \d+ \w+: /, '')}`;
    if (typeof f.derived.queuePosition === 'number')
      f.summary += `; position ${f.derived.queuePosition} of ${f.derived.queueLength} in the queue`;
    const effects =
      maxEffects === 0
        ? []
        : (await lookup.effectsOf(e, Math.min(10_000, maxEffects + stepIds.size)))
            .filter((x) => !stepIds.has(x.id))
            .slice(0, maxEffects);
    steps.push({
      ...f,
      revision: e.revision,
      correlationId: e.metadata.correlationId,
      causationId: e.metadata.causationId,
      count,
      causes: await causesOf(lookup, e, stepIds, maxDepth),
      effects: await Promise.all(effects.map((x) => explainWithLog(lookup, x))),
    });
  }
  return { subject: { kind: subject.kind, id, streamId: subject.streamId }, headPosition, steps };
}
