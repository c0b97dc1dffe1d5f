// Audit queries: events by model, actor, correlation id and time window. Model (and actor) come from the audit
// index; correlation id, actor and time alone go to the event store's own indexed query. A filter that was never
// recorded is refused with a code, never answered unfiltered.
import { FabricError } from '../../protocol/errors.js';
import { isIsoUtc, toMs } from '../../domain/shared/time.js';
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import type { AuditState } from './projection.js';

export const AuditErrorCode = {
  unknownFilter: 'CP_AUDIT_UNKNOWN_FILTER',
  noFilter: 'CP_AUDIT_NO_FILTER',
  badFilter: 'CP_AUDIT_BAD_FILTER',
} as const;

export interface AuditFilter {
  modelKey?: string;
  actor?: string;
  correlationId?: string;
  /** Inclusive, ISO-8601 UTC. */
  fromAt?: string;
  /** Exclusive, ISO-8601 UTC. */
  toAt?: string;
  /** Only events after this position (paging). */
  afterPosition?: number;
  /** Default 1000, at most 10000. */
  limit?: number;
}

const KNOWN = new Set(['modelKey', 'actor', 'correlationId', 'fromAt', 'toAt', 'afterPosition', 'limit']);

function check(filter: Record<string, unknown>): Required<Pick<AuditFilter, 'limit' | 'afterPosition'>> & AuditFilter {
  for (const k of Object.keys(filter)) {
    if (!KNOWN.has(k)) {
      throw new FabricError(
        AuditErrorCode.unknownFilter,
        400,
        `the audit log records no filter ${JSON.stringify(k)}; filter on modelKey, actor, correlationId, fromAt, toAt`,
        {
          details: { filter: k },
          hint: 'filter on recorded metadata only',
        },
      );
    }
  }
  const f = filter as AuditFilter;
  for (const k of ['modelKey', 'actor', 'correlationId'] as const) {
    if (f[k] !== undefined && (typeof f[k] !== 'string' || f[k]!.length === 0 || f[k]!.length > 256))
      throw new FabricError(AuditErrorCode.badFilter, 400, `${k} must be a non-empty string of at most 256 characters`);
  }
  for (const k of ['fromAt', 'toAt'] as const) {
    if (f[k] !== undefined && (typeof f[k] !== 'string' || !isIsoUtc(f[k]!)))
      throw new FabricError(AuditErrorCode.badFilter, 400, `${k} must be ISO-8601 UTC, got ${JSON.stringify(f[k])}`);
  }
  const limit = f.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000)
    throw new FabricError(AuditErrorCode.badFilter, 400, 'limit must be an integer from 1 to 10000');
  const afterPosition = f.afterPosition ?? 0;
  if (!Number.isSafeInteger(afterPosition) || afterPosition < 0)
    throw new FabricError(AuditErrorCode.badFilter, 400, 'afterPosition must be an integer >= 0');
  if (
    f.modelKey === undefined &&
    f.actor === undefined &&
    f.correlationId === undefined &&
    f.fromAt === undefined &&
    f.toAt === undefined
  ) {
    throw new FabricError(
      AuditErrorCode.noFilter,
      400,
      'an audit query needs at least one filter (modelKey, actor, correlationId, fromAt or toAt)',
    );
  }
  return { ...f, limit, afterPosition };
}

/** Positions of a model's events (optionally of one actor, in a time window), ascending. */
export function modelPositions(
  s: AuditState,
  modelKey: string,
  opts: { actor?: string; fromMs?: number; toMs?: number; afterPosition?: number } = {},
): number[] {
  let list = s.byModel.get(modelKey) ?? [];
  if (opts.afterPosition !== undefined) list = list.filter((p) => p > opts.afterPosition!);
  if (opts.actor !== undefined) {
    const mine = new Set(s.byActor.get(opts.actor) ?? []);
    list = list.filter((p) => mine.has(p));
  }
  if (opts.fromMs !== undefined || opts.toMs !== undefined) {
    const from = opts.fromMs ?? Number.NEGATIVE_INFINITY;
    const to = opts.toMs ?? Number.POSITIVE_INFINITY;
    list = list.filter((p) => {
      const t = s.atMs[p - s.firstPosition];
      return t >= from && t < to;
    });
  }
  return list;
}

async function eventsAt(store: EventStore, positions: number[]): Promise<StoredEvent[]> {
  const out: StoredEvent[] = [];
  for (let i = 0; i < positions.length; ) {
    let j = i;
    while (j + 1 < positions.length && positions[j + 1] === positions[j] + 1 && j - i < 999) j++;
    out.push(...(await store.readAll({ afterPosition: positions[i] - 1, limit: j - i + 1 })));
    i = j + 1;
  }
  return out;
}

/** The events matching the filter, in position order (at most `limit`). */
export async function auditQuery(
  store: EventStore,
  s: AuditState,
  filter: Record<string, unknown>,
): Promise<StoredEvent[]> {
  const f = check(filter);
  if (f.modelKey === undefined) {
    return store.query({
      actor: f.actor,
      correlationId: f.correlationId,
      fromAt: f.fromAt,
      toAt: f.toAt,
      afterPosition: f.afterPosition,
      limit: f.limit,
    });
  }
  const positions = modelPositions(s, f.modelKey, {
    actor: f.actor,
    fromMs: f.fromAt === undefined ? undefined : toMs(f.fromAt),
    toMs: f.toAt === undefined ? undefined : toMs(f.toAt),
    afterPosition: f.afterPosition,
  });
  const out: StoredEvent[] = [];
  for (let i = 0; i < positions.length && out.length < f.limit; i += 1000) {
    for (const e of await eventsAt(store, positions.slice(i, i + 1000))) {
      if (f.correlationId !== undefined && e.metadata.correlationId !== f.correlationId) continue;
      out.push(e);
      if (out.length >= f.limit) break;
    }
  }
  return out;
}
