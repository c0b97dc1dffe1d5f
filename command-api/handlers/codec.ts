// Domain events ↔ stored events: deterministic ids from the command id and the event's index (a retried or
// redelivered command stores its events once), the command's metadata on every event, the schema version of
// each type, and schema validation of every decided event before it is appended.
import { deterministicEventId } from '../../eventstore/event-id.js';
import type { EventCodec } from '../../eventstore/handle-command.js';
import type { EventMetadata, JsonValue } from '../../eventstore/port.js';
import { currentVersion, upcast, validateEvent } from '../../domain/events/registry.js';
import type { DomainEvent } from '../../domain/events/types.js';

export interface CommandMetadata {
  /** Unique per command; a retry or redelivery of the same command reuses it. */
  commandId: string;
  /** API key id of a user or operator, an agent (`agent:<id>`), or `system:<component>`. */
  actor: string;
  /** ISO-8601 UTC: when the command was accepted. */
  at: string;
  /** The request or operation this command belongs to. Default: the command id. */
  correlationId?: string;
  /** The event (or command) that caused this command. Default: the command id. */
  causationId?: string;
  /**
   * The fencing epoch of the scheduler leader issuing the command (docs/control-plane.md, "Several schedulers"):
   * recorded on its events as metadata `leaderEpoch`; an aggregate refuses an epoch older than its own.
   */
  leaderEpoch?: number;
  /** Extra metadata recorded on every event of the command. */
  extra?: Record<string, JsonValue>;
}

export function domainCodec(meta: CommandMetadata): EventCodec<DomainEvent> {
  const causationId = meta.causationId ?? meta.commandId;
  const metadata: EventMetadata = {
    ...meta.extra,
    correlationId: meta.correlationId ?? meta.commandId,
    causationId,
    actor: meta.actor,
    at: meta.at,
  };
  // The command id is recorded where the causation id does not already say it (a decision caused by an event);
  // extra metadata costs a JSON parse per event on every replay.
  if (causationId !== meta.commandId) metadata.commandId = meta.commandId;
  return {
    encode(event, index) {
      validateEvent(event);
      return {
        id: deterministicEventId(meta.commandId, index),
        type: event.type,
        version: currentVersion(event.type),
        data: event.data as JsonValue,
        metadata,
      };
    },
    decode(stored) {
      const e = upcast(stored.type, stored.version, stored.data);
      if (e === undefined)
        throw new TypeError(
          `stream ${stored.streamId} holds an event of unknown type ${stored.type} at revision ${stored.revision}`,
        );
      return e;
    },
  };
}
