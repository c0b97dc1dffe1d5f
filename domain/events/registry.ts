// One table of every event type: its current schema version, its schema, and the upcasters that bring stored
// older versions up to the current one. Writers validate against the schema; readers (aggregates and
// projections) upcast and trust the log (it only holds validated events).
import type { z } from 'zod';
import { agentEventSchemas } from './agent.js';
import { deploymentEventSchemas } from './deployment.js';
import { modelEventSchemas } from './model.js';
import { requestEventSchemas } from './request.js';
import type { DomainEvent, DomainEventType } from './types.js';

export const eventSchemas: { readonly [K in DomainEventType]: z.ZodType } = {
  ...requestEventSchemas,
  ...deploymentEventSchemas,
  ...agentEventSchemas,
  ...modelEventSchemas,
};

/** An upcaster turns the data of version `from` into the data of version `from + 1`. */
export type Upcaster = (data: Record<string, unknown>) => Record<string, unknown>;

interface TypeEntry {
  version: number;
  /** upcasters[v] turns version v into v + 1 (index 0 unused). */
  upcasters: Upcaster[];
}

// Types are at version 1 unless listed here. To change a schema: bump its version here, keep the old shape's
// reader as an upcaster `upcasters[oldVersion] = (old) => new`, and add a golden-log test (docs/events.md,
// "Schema versions and upcasting").
const changed: Partial<Record<DomainEventType, TypeEntry>> = {
  // v2 batches lines: one event per batch instead of one per line.
  RequestLogged: {
    version: 2,
    upcasters: [(d) => d, ({ stream, line, ...rest }) => ({ ...rest, lines: [{ stream, line }] })],
  },
};

const table = Object.fromEntries(
  Object.keys(eventSchemas).map((t) => [
    t,
    changed[t as DomainEventType] ?? { version: 1, upcasters: [] as Upcaster[] },
  ]),
) as unknown as Record<DomainEventType, TypeEntry>;

export function currentVersion(type: DomainEventType): number {
  return table[type].version;
}

export const eventVersions: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(table).map(([t, e]) => [t, e.version]),
);

const known: ReadonlySet<string> = new Set(Object.keys(table));

export function isDomainEventType(type: string): type is DomainEventType {
  return known.has(type);
}

/** Stored (type, version, data) as a current-version domain event; undefined for a type the control plane does not know. */
export function upcast(type: string, version: number, data: unknown): DomainEvent | undefined {
  if (!isDomainEventType(type)) return undefined;
  const entry = table[type];
  if (version === entry.version) return { type, data } as DomainEvent;
  if (!Number.isSafeInteger(version) || version < 1 || version > entry.version) {
    throw new RangeError(
      `event ${type} has schema version ${version}; this build reads versions 1 to ${entry.version}`,
    );
  }
  let d = data as Record<string, unknown>;
  for (let v = version; v < entry.version; v++) d = entry.upcasters[v](d);
  return { type, data: d } as DomainEvent;
}

/** Throws when an event's data does not match its schema (a decider bug: nothing is appended). */
export function validateEvent(event: DomainEvent): DomainEvent {
  const r = eventSchemas[event.type].safeParse(event.data);
  if (!r.success) {
    throw new TypeError(
      `decided event ${event.type} does not match its schema: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return event;
}
