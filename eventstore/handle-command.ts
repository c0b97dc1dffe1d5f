// Generic command handler: load the stream, fold it, decide, append with the expected revision; on a concurrent
// append (WrongExpectedRevision) load and decide again, a bounded number of times. Event ids come from the codec
// (deterministic per command), so a command handled twice stores its events once.
import { FabricError } from '../protocol/errors.js';
import { deterministicEventId } from './event-id.js';
import { EventStoreErrorCode, isWrongExpectedRevision } from './errors.js';
import type { EventMetadata, EventStore, JsonValue, NewEvent, StoredEvent } from './port.js';

export interface Decider<Command, State, Event> {
  initialState(): State;
  evolve(state: State, event: Event): State;
  /** Pure: the events that the command produces in this state (none when there is nothing to do); throws to refuse. */
  decide(command: Command, state: State): readonly Event[];
}

/** Maps a decider's events to stored events and back. */
export interface EventCodec<Event> {
  /** The event at `index` of one decision, as stored: its id must be the same each time the command is handled. */
  encode(event: Event, index: number): NewEvent;
  decode(stored: StoredEvent): Event;
}

export interface HandleCommandOptions<Command, State, Event> {
  streamId: string;
  command: Command;
  decider: Decider<Command, State, Event>;
  codec: EventCodec<Event>;
  /** Attempts before giving up with ES_COMMAND_CONFLICT. Default 5. */
  maxAttempts?: number;
}

export interface HandledCommand<State, Event> {
  /** State after the command's events. */
  state: State;
  /** The events of the decision (empty when the decider decided nothing). */
  events: Event[];
  /** Revision of the stream's last event afterwards (-1: the stream has no events). */
  nextRevision: number;
  /** Global position of the command's last event; undefined when nothing was appended. */
  position: number | undefined;
  /** True when the decision's events were found in the stream on load (the command was handled before). */
  alreadyStored: boolean;
  attempts: number;
}

export const DEFAULT_COMMAND_ATTEMPTS = 5;

export async function handleCommand<Command, State, Event>(
  store: EventStore,
  options: HandleCommandOptions<Command, State, Event>,
): Promise<HandledCommand<State, Event>> {
  const { streamId, command, decider, codec } = options;
  const maxAttempts = options.maxAttempts ?? DEFAULT_COMMAND_ATTEMPTS;
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1) throw new TypeError('maxAttempts must be a positive integer');
  let lastConflict: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const history = await store.readStream(streamId);
    let state = decider.initialState();
    for (const stored of history) state = decider.evolve(state, codec.decode(stored));
    const revision = history.length === 0 ? -1 : history[history.length - 1].revision;
    const events = [...decider.decide(command, state)];
    if (events.length === 0) {
      return { state, events, nextRevision: revision, position: undefined, alreadyStored: false, attempts: attempt };
    }
    const encoded = events.map((e, i) => codec.encode(e, i));
    const stored = storedAlready(history, encoded);
    if (stored !== undefined) {
      // Handled before (e.g. a redelivered command whose first run won): its events are the ones in the stream.
      return { state, events, nextRevision: revision, position: stored.position, alreadyStored: true, attempts: attempt };
    }
    for (const e of events) state = decider.evolve(state, e);
    try {
      const r = await store.append(streamId, encoded, { expectedRevision: revision === -1 ? 'no_stream' : revision });
      return { state, events, nextRevision: r.nextRevision, position: r.position, alreadyStored: false, attempts: attempt };
    } catch (e) {
      if (!isWrongExpectedRevision(e)) throw e;
      lastConflict = e;
    }
  }
  throw new FabricError(
    EventStoreErrorCode.commandConflict,
    409,
    `the command on stream ${JSON.stringify(streamId)} lost the race to concurrent appends ${maxAttempts} times in a row`,
    {
      hint: 'the stream is under heavy concurrent writes: retry later, or raise maxAttempts for this command',
      details: { streamId, attempts: maxAttempts },
      cause: lastConflict,
    },
  );
}

/** The last of the decision's events when all of them are already in the loaded stream. */
function storedAlready(history: readonly StoredEvent[], encoded: readonly NewEvent[]): StoredEvent | undefined {
  if (history.length === 0) return undefined;
  const byId = new Map<string, StoredEvent>();
  for (const e of history) byId.set(e.id, e);
  const last = byId.get(encoded[encoded.length - 1].id);
  return last !== undefined && encoded.every((e) => byId.has(e.id)) ? last : undefined;
}

/** Context of one command: where its events' metadata and ids come from. */
export interface CommandContext {
  /** Unique per command; retries and redeliveries of the same command reuse it. */
  commandId: string;
  actor: string;
  /** ISO-8601 UTC time the command was accepted (passed in; never read from a clock here). */
  at: string;
  /** Defaults to commandId. */
  correlationId?: string;
  /** Defaults to commandId. */
  causationId?: string;
  /** Extra metadata recorded on every event of the command. */
  extra?: Record<string, JsonValue>;
}

/**
 * A codec for events shaped `{ type, data }`: ids from the command id and the event index, metadata from the
 * context, schema version per type from `versions` (default 1).
 */
export function typeDataCodec<Event extends { type: string; data: JsonValue }>(
  context: CommandContext,
  versions: Readonly<Record<string, number>> = {},
): EventCodec<Event> {
  const metadata: EventMetadata = {
    ...context.extra,
    correlationId: context.correlationId ?? context.commandId,
    causationId: context.causationId ?? context.commandId,
    actor: context.actor,
    at: context.at,
  };
  return {
    encode: (event, index) => ({ id: deterministicEventId(context.commandId, index), type: event.type, version: versions[event.type] ?? 1, data: event.data, metadata }),
    decode: (stored) => ({ type: stored.type, data: stored.data }) as Event,
  };
}
