// Audit queries over the index: events by actor, model, correlation id and time window. A filter the index
// does not hold is refused (never answered unfiltered).
import { FabricError } from '../../protocol/errors.js';
import { isIsoUtc, toMs } from '../../domain/shared/time.js';
import type { AuditState } from './projection.js';

export const AuditErrorCode = { unknownFilter: 'CP_AUDIT_UNKNOWN_FILTER', noFilter: 'CP_AUDIT_NO_FILTER', badFilter: 'CP_AUDIT_BAD_FILTER' } as const;

export interface AuditFilter {
  actor?: string;
  modelKey?: string;
  correlationId?: string;
  /** Inclusive, ISO-8601 UTC. */
  fromAt?: string;
  /** Exclusive, ISO-8601 UTC. */
  toAt?: string;
  limit?: number;
}

const KNOWN = new Set(['actor', 'modelKey', 'correlationId', 'fromAt', 'toAt', 'limit']);

/** Positions of the matching events, ascending. */
export function auditPositions(s: AuditState, filter: Record<string, unknown>): number[] {
  for (const k of Object.keys(filter)) {
    if (!KNOWN.has(k)) {
      throw new FabricError(AuditErrorCode.unknownFilter, 400, `the audit index has no filter ${JSON.stringify(k)}; it records actor, modelKey, correlationId and time (fromAt, toAt)`, {
        details: { filter: k },
        hint: 'filter on recorded metadata only',
      });
    }
  }
  const f = filter as AuditFilter;
  for (const k of ['fromAt', 'toAt'] as const) {
    if (f[k] !== undefined && (typeof f[k] !== 'string' || !isIsoUtc(f[k]!))) throw new FabricError(AuditErrorCode.badFilter, 400, `${k} must be ISO-8601 UTC, got ${JSON.stringify(f[k])}`);
  }
  const lists: number[][] = [];
  if (f.actor !== undefined) lists.push(s.byActor.get(f.actor) ?? []);
  if (f.modelKey !== undefined) lists.push(s.byModel.get(f.modelKey) ?? []);
  if (f.correlationId !== undefined) lists.push(s.byCorrelation.get(f.correlationId) ?? []);
  if (lists.length === 0 && f.fromAt === undefined && f.toAt === undefined) {
    throw new FabricError(AuditErrorCode.noFilter, 400, 'an audit query needs at least one filter (actor, modelKey, correlationId, fromAt or toAt)');
  }
  const from = f.fromAt === undefined ? Number.NEGATIVE_INFINITY : toMs(f.fromAt);
  const to = f.toAt === undefined ? Number.POSITIVE_INFINITY : toMs(f.toAt);
  const atOf = new Map<number, number>();
  const timeFiltered = f.fromAt !== undefined || f.toAt !== undefined;
  if (timeFiltered) for (let i = 0; i < s.positions.length; i++) if (s.atMs[i] >= from && s.atMs[i] < to) atOf.set(s.positions[i], s.atMs[i]);
  let result = lists.length === 0 ? [...atOf.keys()] : lists.reduce((acc, l) => { const set = new Set(l); return acc.filter((p) => set.has(p)); });
  if (timeFiltered && lists.length > 0) result = result.filter((p) => atOf.has(p));
  const limit = f.limit ?? 1000;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) throw new FabricError(AuditErrorCode.badFilter, 400, 'limit must be an integer from 1 to 10000');
  return result.slice(0, limit);
}
