// Error codes of the event store (listed in docs/errors.md, "Control plane" → "Event store").
import { FabricError } from '../protocol/errors.js';
import type { ExpectedRevision } from './port.js';

export const EventStoreErrorCode = {
  wrongExpectedRevision: 'ES_WRONG_EXPECTED_REVISION',
  eventIdConflict: 'ES_EVENT_ID_CONFLICT',
  duplicateEventId: 'ES_DUPLICATE_EVENT_ID',
  emptyAppend: 'ES_EMPTY_APPEND',
  invalidStreamId: 'ES_INVALID_STREAM_ID',
  invalidEvent: 'ES_INVALID_EVENT',
  invalidExpectedRevision: 'ES_INVALID_EXPECTED_REVISION',
  invalidReadOptions: 'ES_INVALID_READ_OPTIONS',
  queryUnfiltered: 'ES_QUERY_UNFILTERED',
  queryFilterNotIndexed: 'ES_QUERY_FILTER_NOT_INDEXED',
  queryInvalid: 'ES_QUERY_INVALID',
  storeClosed: 'ES_STORE_CLOSED',
  schemaUnsupported: 'ES_SCHEMA_UNSUPPORTED',
  positionUnsafe: 'ES_POSITION_UNSAFE',
  commandConflict: 'ES_COMMAND_CONFLICT',
} as const;

export class WrongExpectedRevisionError extends FabricError {
  readonly streamId: string;
  readonly expected: ExpectedRevision;
  /** Revision of the stream's last event, -1 when the stream has no events. */
  readonly actual: number;

  constructor(streamId: string, expected: ExpectedRevision, actual: number) {
    super(
      EventStoreErrorCode.wrongExpectedRevision,
      409,
      `stream ${JSON.stringify(streamId)} is at revision ${actual === -1 ? 'none (no events)' : actual}, the append expected ${describeExpected(expected)}`,
      {
        hint: 'another writer appended first: reload the stream, decide again, and append with the new revision',
        details: { streamId, expected, actual },
      },
    );
    this.name = 'WrongExpectedRevisionError';
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}

function describeExpected(expected: ExpectedRevision): string {
  if (expected === 'no_stream') return 'no stream';
  if (expected === 'exists') return 'an existing stream';
  if (expected === 'any') return 'any revision';
  return `revision ${expected}`;
}

export function isWrongExpectedRevision(e: unknown): e is WrongExpectedRevisionError {
  return e instanceof FabricError && e.code === EventStoreErrorCode.wrongExpectedRevision;
}

export function invalid(code: string, message: string, details?: Record<string, unknown>, hint?: string): FabricError {
  return new FabricError(code, 400, message, { details, hint });
}

export function storeClosed(adapter: string): FabricError {
  return new FabricError(EventStoreErrorCode.storeClosed, 503, `the ${adapter} event store is closed`, {
    hint: 'open a new store; close() was called on this one',
  });
}
