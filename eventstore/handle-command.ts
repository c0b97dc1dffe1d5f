// Generic command handler: load the stream (or take its folded state from the aggregate cache), decide, append
// with the expected revision; on a concurrent append (WrongExpectedRevision) read the newer events and decide
// again, a bounded number of times. Event ids come from the codec (deterministic per command), so a command
// handled twice stores its events once.
import { FabricError } from '../protocol/errors.js';
import { deterministicEventId } from './event-id.js';
import { EventStoreErrorCode, isWrongExpectedRevision } from './errors.js';
import type { EventMetadata, EventStore, JsonValue, NewEvent, StoredEvent } from './port.js';
import type { AggregateCache } from './aggregate-cache.js';

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
  /**
   * Folded states kept between commands (docs/event-store.md, "Aggregate cache"): with it a command reads only the
   * events appended since the cached revision, so its cost does not grow with the stream. Without it every command
   * folds the whole stream.
   */
  cache?: AggregateCache<State>;
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

interface Loaded<State> {
  state: State;
  revision: number;
  /** The events read by this call (the whole stream, or the ones after a cached revision): where a repeat is looked for. */
  read: readonly StoredEvent[];
  /** The state came from the cache and no read has confirmed it yet. */
  unconfirmed: boolean;
}

export async function handleCommand<Command, State, Event>(
  store: EventStore,
  options: HandleCommandOptions<Command, State, Event>,
): Promise<HandledCommand<State, Event>> {
  const { streamId, command, decider, codec, cache } = options;
  const maxAttempts = options.maxAttempts ?? DEFAULT_COMMAND_ATTEMPTS;
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1)
    throw new TypeError('maxAttempts must be a positive integer');
  const fold = (state: State, events: readonly StoredEvent[]): State => {
    let s = state;
    for (const stored of events) s = decider.evolve(s, codec.decode(stored));
    return s;
  };
  const loadAll = async (): Promise<Loaded<State>> => {
    const history = await store.readStream(streamId);
    if (cache !== undefined) cache.stats.fullReads++;
    const state = fold(decider.initialState(), history);
    const revision = history.length === 0 ? -1 : history[history.length - 1].revision;
    if (revision >= 0) cache?.set(streamId, state, revision);
    return { state, revision, read: history, unconfirmed: false };
  };
  // The events after `l.revision`, folded in; undefined when there are none.
  const loadNewer = async (l: Loaded<State>): Promise<Loaded<State> | undefined> => {
    const newer = await store.readStream(streamId, { fromRevision: l.revision + 1 });
    if (newer.length === 0) return undefined;
    if (cache !== undefined) cache.stats.deltaEvents += newer.length;
    const state = fold(l.state, newer);
    const revision = newer[newer.length - 1].revision;
    cache?.set(streamId, state, revision);
    return { state, revision, read: newer, unconfirmed: false };
  };

  const cached = cache?.get(streamId);
  if (cached !== undefined) cache!.stats.hits++;
  let loaded: Loaded<State> =
    cached === undefined
      ? await loadAll()
      : { state: cached.state, revision: cached.revision, read: [], unconfirmed: true };
  let lastConflict: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    let events: Event[];
    try {
      events = [...decider.decide(command, loaded.state)];
    } catch (refusal) {
      // A refusal is always decided on the latest state: a cached one is confirmed first.
      const newer = loaded.unconfirmed ? await loadNewer(loaded) : undefined;
      if (newer === undefined) throw refusal;
      loaded = newer;
      attempt--;
      continue;
    }
    const { state, revision } = loaded;
    if (events.length === 0) {
      // So is "nothing to do".
      const newer = loaded.unconfirmed ? await loadNewer(loaded) : undefined;
      if (newer !== undefined) {
        loaded = newer;
        attempt--;
        continue;
      }
      return { state, events, nextRevision: revision, position: undefined, alreadyStored: false, attempts: attempt };
    }
    const encoded = events.map((e, i) => codec.encode(e, i));
    const stored = storedAlready(loaded.read, encoded);
    if (stored !== undefined) {
      // Handled before (e.g. a redelivered command whose first run won): its events are the ones in the stream.
      return {
        state,
        events,
        nextRevision: revision,
        position: stored.position,
        alreadyStored: true,
        attempts: attempt,
      };
    }
    let next = state;
    for (const e of events) next = decider.evolve(next, e);
    try {
      const r = await store.append(streamId, encoded, { expectedRevision: revision === -1 ? 'no_stream' : revision });
      cache?.set(streamId, next, r.nextRevision);
      return {
        state: next,
        events,
        nextRevision: r.nextRevision,
        position: r.position,
        alreadyStored: false,
        attempts: attempt,
      };
    } catch (e) {
      if (!isWrongExpectedRevision(e)) throw e;
      lastConflict = e;
    }
    // Another writer appended after `revision` (fold its events and decide again), or nothing is newer and the
    // decision's events sit at earlier revisions (a redelivery: the whole stream shows where).
    loaded = (await loadNewer(loaded)) ?? (await loadAll());
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
    encode: (event, index) => ({
      id: deterministicEventId(context.commandId, index),
      type: event.type,
      version: versions[event.type] ?? 1,
      data: event.data,
      metadata,
    }),
    decode: (stored) => ({ type: stored.type, data: stored.data }) as Event,
  };
}
