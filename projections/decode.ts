// Stored events as current-version domain events for the projections (upcast, no re-validation: the log only
// holds events validated when they were decided).
import type { StoredEvent } from '../eventstore/port.js';
import { upcast } from '../domain/events/registry.js';
import type { DomainEvent } from '../domain/events/types.js';

export function decode(e: StoredEvent): DomainEvent | undefined {
  return upcast(e.type, e.version, e.data);
}

/** The part of a stored event a decision refers to (for causation ids and `ndif why`). */
export interface EventRef {
  id: string;
  position: number;
  type: string;
  correlationId: string;
}

export function refOf(e: StoredEvent): EventRef {
  return { id: e.id, position: e.position, type: e.type, correlationId: e.metadata.correlationId };
}
