// Audit queries: events by actor, model, correlation id, causation id, type, stream prefix and time window, answered
// from indexes only — the event store's indexed metadata columns, or the audit projection (positions by model and
// by actor, time per position). A filter on something the log never records in an index (a data field such as
// requestId, an extra metadata key, a misspelt name) is refused with AUDIT_FILTER_NOT_RECORDED; a recorded field
// that this store cannot answer (KurrentDB indexes no metadata; modelKey without the audit projection) is refused
// with AUDIT_FILTER_NOT_INDEXED. An unfiltered answer is never given in place of a filtered one.
import { isIsoUtc, toMs } from '../domain/shared/time.js';
import type { EventStore, MetadataFilterName, MetadataQuery, StoredEvent } from '../eventstore/port.js';
import { isFabricError } from '../protocol/errors.js';
import type { AuditState } from '../projections/audit/projection.js';
import { modelPositions } from '../projections/audit/query.js';
import type { AuditIndexFilter } from '../projections/read-models/port.js';
import { explainEvent } from './describe.js';
import { forensicsError, ForensicsErrorCode as C } from './errors.js';

/** Every filter an audit query may use, and where the fabric records it. */
export const RECORDED_FILTERS = {
  actor:
    'metadata.actor: the API key id, agent:<id> or system:<component> that issued the command (store index, or the audit projection)',
  modelKey:
    'the model an event is about: deployment streams and every event of a request for that model (audit projection)',
  correlationId: 'metadata.correlationId: the operation an event belongs to (store index)',
  causationId: 'metadata.causationId: the event or command that caused it (store index)',
  type: 'the event type, e.g. RequestRequeued (store index)',
  streamPrefix: 'stream ids starting with this, e.g. request-, deployment-gpt2 (store index)',
  fromAt: 'metadata.at >= this ISO-8601 UTC time (store index, or the audit projection)',
  toAt: 'metadata.at < this ISO-8601 UTC time (store index, or the audit projection)',
} as const;
export type AuditFilterName = keyof typeof RECORDED_FILTERS;
const FILTERS = Object.keys(RECORDED_FILTERS) as AuditFilterName[];
const PAGING = ['afterPosition', 'limit'] as const;

/** Names people reach for that the log does not index, with what to use instead. */
const INSTEAD: Record<string, string> = {
  requestId: 'a request is its stream: streamPrefix=request-<id> (or ndif why <request-id>)',
  replicaId:
    'replica events are in their deployment stream: modelKey=<model> or streamPrefix=deployment-<model> (or ndif why <model>#<n>)',
  agentId: "what an agent reported: actor=agent:<id>; the agent's own stream: streamPrefix=agent-<id>",
  commandId: 'recorded on scheduler decisions only and not indexed: use causationId or correlationId',
  submitter: 'the submitter is the actor of RequestReceived: actor=<api key id>',
  model: 'the filter is modelKey',
  stream: 'streamPrefix',
  streamId: 'streamPrefix',
  at: 'fromAt and toAt',
  from: 'fromAt',
  to: 'toAt',
  since: 'fromAt',
  until: 'toAt',
};

export interface AuditFilter {
  actor?: string;
  modelKey?: string;
  correlationId?: string;
  causationId?: string;
  type?: string;
  streamPrefix?: string;
  fromAt?: string;
  toAt?: string;
  afterPosition?: number;
  /** Default 1000, at most 10000. */
  limit?: number;
}

export interface AuditRow {
  position: number;
  eventId: string;
  type: string;
  streamId: string;
  revision: number;
  at: string;
  actor: string;
  correlationId: string;
  causationId: string;
  summary: string;
  rule: string | null;
  data?: unknown;
}

export interface AuditAnswer {
  filter: AuditFilter;
  /** Which index answered: the event store's metadata columns, the audit projection's positions, or the audit read model. */
  source: 'event-store-index' | 'audit-projection' | 'audit-read-model';
  events: AuditRow[];
  /** Pass as afterPosition for the next page; null when this page is the last. */
  nextAfterPosition: number | null;
}

export interface AuditSources {
  store: EventStore;
  /**
   * The audit projection (positions by model and actor), read only when a filter needs it; without it modelKey
   * cannot be answered. A live source catches up with the store first, so the answer covers everything stored.
   */
  audit?: () => AuditState | Promise<AuditState>;
  /**
   * The audit read model (distributed mode, projections/read-models/audit.ts): indexes every recorded filter, so
   * when given it answers every query, whatever the event store indexes. Its positions must cover everything stored.
   */
  index?: { positions(filter: AuditIndexFilter): Promise<number[]> };
  /**
   * The audit index by model (embedded mode, projections/read-models/sqlite-audit-models.ts): the positions of a
   * model's events over the whole log, while the audit projection keeps only its recent window. Used for every
   * modelKey query when given; it must cover everything stored.
   */
  modelIndex?: { positions(modelKey: string, afterPosition: number, limit: number): Promise<number[]> };
}

/** Positions a model query reads from the model index before it answers a page that may be short (time bound). */
const MODEL_SCAN_LIMIT = 50_000;

function checkFilter(input: unknown): Required<Pick<AuditFilter, 'afterPosition' | 'limit'>> & AuditFilter {
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    throw forensicsError(C.auditBadFilter, 'an audit query is an object of filters', {
      details: { recorded: FILTERS },
    });
  const raw = input as Record<string, unknown>;
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined || (FILTERS as string[]).includes(k) || (PAGING as readonly string[]).includes(k)) continue;
    const instead = INSTEAD[k];
    throw forensicsError(
      C.auditFilterNotRecorded,
      `the log records no index for ${JSON.stringify(k)}, so events cannot be filtered on it; recorded filters: ${FILTERS.join(', ')}`,
      {
        hint: instead === undefined ? 'filter on one of the recorded filters' : `instead: ${instead}`,
        details: { filter: k, recorded: FILTERS },
      },
    );
  }
  const f: AuditFilter = {};
  for (const k of FILTERS) {
    const v = raw[k];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0 || v.length > 256)
      throw forensicsError(C.auditBadFilter, `${k} must be a non-empty string of at most 256 characters`, {
        details: { filter: k },
      });
    if ((k === 'fromAt' || k === 'toAt') && !isIsoUtc(v))
      throw forensicsError(
        C.auditBadFilter,
        `${k} must be ISO-8601 UTC (e.g. 2025-03-01T10:00:00.000Z), got ${JSON.stringify(v)}`,
        { details: { filter: k } },
      );
    f[k] = v;
  }
  if (f.fromAt !== undefined && f.toAt !== undefined && toMs(f.fromAt) >= toMs(f.toAt)) {
    throw forensicsError(C.auditBadFilter, `the window from ${f.fromAt} to ${f.toAt} is empty (toAt is exclusive)`, {
      details: { fromAt: f.fromAt, toAt: f.toAt },
    });
  }
  const limit = raw.limit ?? 1000;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > 10_000)
    throw forensicsError(C.auditBadFilter, 'limit must be an integer from 1 to 10000', { details: { limit } });
  const afterPosition = raw.afterPosition ?? 0;
  if (typeof afterPosition !== 'number' || !Number.isSafeInteger(afterPosition) || afterPosition < 0)
    throw forensicsError(C.auditBadFilter, 'afterPosition must be an integer >= 0', { details: { afterPosition } });
  if (Object.keys(f).length === 0) {
    throw forensicsError(
      C.auditNoFilter,
      `an audit query needs at least one filter (${FILTERS.join(', ')}); the whole log is never returned as an audit answer`,
      { details: { recorded: FILTERS } },
    );
  }
  return { ...f, limit, afterPosition };
}

function row(e: StoredEvent, withData: boolean): AuditRow {
  const x = explainEvent(e);
  const r: AuditRow = {
    position: e.position,
    eventId: e.id,
    type: e.type,
    streamId: e.streamId,
    revision: e.revision,
    at: e.metadata.at,
    actor: e.metadata.actor,
    correlationId: e.metadata.correlationId,
    causationId: e.metadata.causationId,
    summary: x.summary,
    rule: x.rule,
  };
  if (withData) r.data = e.data;
  return r;
}

/** The events at these ascending positions, reading runs of nearby positions in one page. */
async function eventsAt(store: EventStore, positions: number[]): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let i = 0; i < positions.length; ) {
    let j = i;
    while (
      j + 1 < positions.length &&
      positions[j + 1] - positions[j] <= 16 &&
      positions[j + 1] - positions[i] < 10_000
    )
      j++;
    const wanted = new Set(positions.slice(i, j + 1));
    for (const e of await store.readAll({ afterPosition: positions[i] - 1, limit: positions[j] - positions[i] + 1 }))
      if (wanted.has(e.position)) out.push(e);
    i = j + 1;
  }
  return out;
}

function notIndexed(filter: string, why: string): never {
  throw forensicsError(C.auditFilterNotIndexed, `${filter} is recorded, but ${why}`, {
    hint: 'drop the filter, or query a fabric whose event store indexes it (SQLite, PostgreSQL)',
    details: { filter },
  });
}

/** Answers an audit query from indexes, or refuses it (see the file comment). */
export async function auditEvents(
  sources: AuditSources,
  input: unknown,
  options: { data?: boolean } = {},
): Promise<AuditAnswer> {
  const asked = checkFilter(input);
  // A pin and an unpin are one event type (DeploymentPinned, `pinned` true or false): `type` DeploymentPinned means
  // pins only, DeploymentUnpinned (no event of its own) unpins only.
  const pinned = asked.type === 'DeploymentPinned' ? true : asked.type === 'DeploymentUnpinned' ? false : undefined;
  const f = pinned === false ? { ...asked, type: 'DeploymentPinned' } : asked;
  const pinKept = (e: StoredEvent) =>
    pinned === undefined || e.type !== 'DeploymentPinned' || (e.data as { pinned?: unknown }).pinned === pinned;
  const answer = await auditAnswer(sources, f, options, pinKept);
  return pinned === false ? { ...answer, filter: asked } : answer;
}

async function auditAnswer(
  sources: AuditSources,
  f: ReturnType<typeof checkFilter>,
  options: { data?: boolean },
  pinKept: (e: StoredEvent) => boolean,
): Promise<AuditAnswer> {
  const { store } = sources;
  const indexed = new Set<MetadataFilterName>(store.capabilities.queryFilters);
  const withData = options.data === true;
  const { afterPosition, limit, ...filter } = f;
  const storeCan = (k: AuditFilterName) => k !== 'modelKey' && indexed.has(k as MetadataFilterName);
  const useProjection = f.modelKey !== undefined || (f.actor !== undefined && !storeCan('actor'));

  if (sources.index !== undefined) {
    // One position past the page tells whether there is a next one.
    const positions = await sources.index.positions({ ...filter, afterPosition, limit: limit + 1 });
    return fromPositions(store, positions, f, 'audit-read-model', withData, pinKept);
  }

  if (!useProjection) {
    for (const k of Object.keys(filter) as AuditFilterName[])
      if (!storeCan(k))
        notIndexed(
          k,
          `the ${store.adapter} event store does not index it (it indexes ${[...indexed].join(', ') || 'no metadata'})`,
        );
    let events: StoredEvent[];
    try {
      events = await store.query({ ...(filter as MetadataQuery), afterPosition, limit });
    } catch (e) {
      if (isFabricError(e) && e.code === 'ES_QUERY_FILTER_NOT_INDEXED')
        notIndexed(String(e.details?.filter ?? 'a filter'), e.message);
      throw e;
    }
    return {
      filter: f,
      source: 'event-store-index',
      events: events.filter(pinKept).map((e) => row(e, withData)),
      nextAfterPosition: events.length === limit ? events[events.length - 1].position : null,
    };
  }

  if (f.modelKey !== undefined && sources.modelIndex !== undefined)
    return fromModelIndex(store, sources.modelIndex, f, withData, pinKept);

  if (sources.audit === undefined) {
    if (f.modelKey !== undefined)
      notIndexed('modelKey', 'it is answered by the audit projection, which this service does not run');
    notIndexed(
      'actor',
      `the ${store.adapter} event store does not index it and the audit projection, which also answers it, does not run here`,
    );
  }
  const state = await sources.audit();
  // The projection keeps only its recent window (bounded hot state): older events need a read model.
  if (state.trimmed && afterPosition + 1 < state.firstPosition)
    notIndexed(
      f.modelKey !== undefined ? 'modelKey' : 'actor',
      `the audit projection keeps only the latest ${state.recentEvents} events in memory (from position ${state.firstPosition}), and no audit read model runs here for older ones`,
    );
  const window = {
    fromMs: f.fromAt === undefined ? undefined : toMs(f.fromAt),
    toMs: f.toAt === undefined ? undefined : toMs(f.toAt),
    afterPosition,
  };
  let positions: number[];
  if (f.modelKey !== undefined) positions = modelPositions(state, f.modelKey, { actor: f.actor, ...window });
  else {
    positions = (state.byActor.get(f.actor!) ?? []).filter((p) => {
      if (p <= afterPosition) return false;
      const t = state.atMs[p - state.firstPosition];
      return (window.fromMs === undefined || t >= window.fromMs) && (window.toMs === undefined || t < window.toMs);
    });
  }
  return fromPositions(store, positions, f, 'audit-projection', withData, pinKept);
}

/** The events at the candidate positions that pass every filter, one page of them. */
async function fromPositions(
  store: EventStore,
  positions: number[],
  f: ReturnType<typeof checkFilter>,
  source: AuditAnswer['source'],
  withData: boolean,
  pinKept: (e: StoredEvent) => boolean,
): Promise<AuditAnswer> {
  const { limit } = f;
  // The rest narrows the indexed candidates; it never widens the answer.
  const keep = (e: StoredEvent) =>
    (f.correlationId === undefined || e.metadata.correlationId === f.correlationId) &&
    (f.causationId === undefined || e.metadata.causationId === f.causationId) &&
    (f.type === undefined || e.type === f.type) &&
    pinKept(e) &&
    (f.streamPrefix === undefined || e.streamId.startsWith(f.streamPrefix));
  const out: StoredEvent[] = [];
  let scanned = 0;
  for (let i = 0; i < positions.length && out.length < limit; i += 1000) {
    const chunk = positions.slice(i, i + 1000);
    for (const e of await eventsAt(store, chunk)) {
      scanned = e.position;
      if (!keep(e)) continue;
      out.push(e);
      if (out.length >= limit) break;
    }
  }
  const more = out.length >= limit && positions[positions.length - 1] > scanned;
  return {
    filter: f,
    source,
    events: out.map((e) => row(e, withData)),
    nextAfterPosition: more ? out[out.length - 1].position : null,
  };
}

/**
 * A modelKey query from the model index: its positions a page at a time, every other filter checked on the events.
 * At most MODEL_SCAN_LIMIT positions are read per answer; a page cut short there says where to go on.
 */
async function fromModelIndex(
  store: EventStore,
  index: NonNullable<AuditSources['modelIndex']>,
  f: ReturnType<typeof checkFilter>,
  withData: boolean,
  pinKept: (e: StoredEvent) => boolean,
): Promise<AuditAnswer> {
  const { limit } = f;
  const fromMs = f.fromAt === undefined ? undefined : toMs(f.fromAt);
  const toMsExclusive = f.toAt === undefined ? undefined : toMs(f.toAt);
  const keep = (e: StoredEvent) => {
    if (f.actor !== undefined && e.metadata.actor !== f.actor) return false;
    if (fromMs !== undefined || toMsExclusive !== undefined) {
      const t = toMs(e.metadata.at);
      if ((fromMs !== undefined && t < fromMs) || (toMsExclusive !== undefined && t >= toMsExclusive)) return false;
    }
    return (
      (f.correlationId === undefined || e.metadata.correlationId === f.correlationId) &&
      (f.causationId === undefined || e.metadata.causationId === f.causationId) &&
      (f.type === undefined || e.type === f.type) &&
      pinKept(e) &&
      (f.streamPrefix === undefined || e.streamId.startsWith(f.streamPrefix))
    );
  };
  const out: StoredEvent[] = [];
  let after = f.afterPosition;
  let scanned = 0;
  let exhausted = false;
  while (out.length < limit && scanned < MODEL_SCAN_LIMIT) {
    const positions = await index.positions(f.modelKey!, after, 1000);
    if (positions.length === 0) {
      exhausted = true;
      break;
    }
    for (const e of await eventsAt(store, positions)) {
      after = e.position;
      scanned++;
      if (!keep(e)) continue;
      out.push(e);
      if (out.length >= limit) break;
    }
    if (out.length < limit) after = positions[positions.length - 1]!;
    if (positions.length < 1000 && out.length < limit) {
      exhausted = true;
      break;
    }
  }
  return {
    filter: f,
    source: 'audit-read-model',
    events: out.map((e) => row(e, withData)),
    nextAfterPosition: exhausted ? null : after,
  };
}
