// Audit query filters: every filter maps to an indexed column; anything else is refused, and so is no filter at all.
import { EventStoreErrorCode as C, invalid } from './errors.js';
import type { MetadataFilterName, MetadataQuery } from './port.js';
import { DEFAULT_PAGE, MAX_PAGE, parseIsoUtc } from './validate.js';

export const ALL_QUERY_FILTERS: readonly MetadataFilterName[] = [
  'actor',
  'correlationId',
  'causationId',
  'streamPrefix',
  'type',
  'fromAt',
  'toAt',
];
const PAGING = new Set(['afterPosition', 'limit']);

export interface NormalizedQuery {
  actor?: string;
  correlationId?: string;
  causationId?: string;
  streamPrefix?: string;
  type?: string;
  fromAtMs?: number;
  toAtMs?: number;
  afterPosition: number;
  limit: number;
}

export function normalizeQuery(
  filter: MetadataQuery,
  supported: readonly MetadataFilterName[],
  adapter: string,
): NormalizedQuery {
  if (filter === null || typeof filter !== 'object') {
    throw invalid(C.queryInvalid, 'a query is an object of filters', undefined, `filters: ${supported.join(', ')}`);
  }
  const raw = filter as Record<string, unknown>;
  const used: string[] = [];
  for (const key of Object.keys(raw)) {
    if (raw[key] === undefined || PAGING.has(key)) continue;
    if (!(supported as readonly string[]).includes(key)) {
      const known = (ALL_QUERY_FILTERS as readonly string[]).includes(key);
      throw invalid(
        C.queryFilterNotIndexed,
        known
          ? `the ${adapter} event store does not index ${JSON.stringify(key)}; it answers ${supported.length ? supported.join(', ') : 'no metadata queries'}`
          : `${JSON.stringify(key)} is not recorded in an index, so the store cannot filter on it; indexed filters: ${supported.join(', ') || 'none'}`,
        { filter: key, indexed: [...supported] },
        'filter on an indexed field, or query a read model that records this field',
      );
    }
    used.push(key);
  }
  if (used.length === 0) {
    throw invalid(
      C.queryUnfiltered,
      'an audit query needs at least one filter; the store never answers an unfiltered query',
      {
        indexed: [...supported],
      },
      `filters: ${supported.join(', ')}`,
    );
  }
  const q: NormalizedQuery = { afterPosition: 0, limit: DEFAULT_PAGE };
  for (const key of ['actor', 'correlationId', 'causationId', 'streamPrefix', 'type'] as const) {
    const v = raw[key];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v.length === 0 || v.length > 256) {
      throw invalid(C.queryInvalid, `filter ${key} must be a non-empty string of at most 256 characters`, {
        filter: key,
      });
    }
    q[key] = v;
  }
  for (const [key, target] of [
    ['fromAt', 'fromAtMs'],
    ['toAt', 'toAtMs'],
  ] as const) {
    const v = raw[key];
    if (v === undefined) continue;
    const ms = parseIsoUtc(v);
    if (ms === undefined)
      throw invalid(
        C.queryInvalid,
        `filter ${key} must be ISO-8601 UTC (e.g. 2025-01-02T03:04:05.000Z), got ${JSON.stringify(v)}`,
        { filter: key },
      );
    q[target] = ms;
  }
  if (raw.afterPosition !== undefined) {
    const v = raw.afterPosition;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      throw invalid(C.queryInvalid, 'afterPosition must be an integer >= 0', { afterPosition: v as never });
    q.afterPosition = v;
  }
  if (raw.limit !== undefined) {
    const v = raw.limit;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > MAX_PAGE)
      throw invalid(C.queryInvalid, `limit must be an integer from 1 to ${MAX_PAGE}`, { limit: v as never });
    q.limit = v;
  }
  return q;
}

/** Upper bound for a prefix range scan: stream ids are printable ASCII (0x21–0x7e), so prefix + 0x7f is above them all. */
export function prefixUpperBound(prefix: string): string {
  return `${prefix}\x7f`;
}
