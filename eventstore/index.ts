// The event store's public surface without any adapter (adapters are imported from their own modules, so that
// using the port does not load pg or the KurrentDB client).
export type * from './port.js';
export { EventStoreErrorCode, WrongExpectedRevisionError, isWrongExpectedRevision } from './errors.js';
export { deterministicEventId } from './event-id.js';
export { handleCommand, typeDataCodec, DEFAULT_COMMAND_ATTEMPTS } from './handle-command.js';
export type { CommandContext, Decider, EventCodec, HandleCommandOptions, HandledCommand } from './handle-command.js';
export { ALL_QUERY_FILTERS } from './query.js';
