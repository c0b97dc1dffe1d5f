// The decision every adapter makes inside its write lock before inserting: write, answer an idempotent
// re-append with the original result, or refuse (wrong expected revision, event ids stored elsewhere).
import { EventStoreErrorCode as C, WrongExpectedRevisionError } from './errors.js';
import { FabricError } from '../protocol/errors.js';
import type { AppendResult, ExpectedRevision } from './port.js';

export interface StoredIdentity {
  eventId: string;
  streamId: string;
  revision: number;
  position: number;
}

export function checkExpected(streamId: string, expected: ExpectedRevision, current: number): void {
  const ok =
    expected === 'any' ||
    (expected === 'no_stream' && current === -1) ||
    (expected === 'exists' && current >= 0) ||
    expected === current;
  if (!ok) throw new WrongExpectedRevisionError(streamId, expected, current);
}

/**
 * `existing` holds the already stored events among `ids` (any order). Returns 'write' when none is stored,
 * the original result when all are stored in this stream at consecutive revisions in the same order (and, for
 * a numeric or 'no_stream' expectation, at the revisions that expectation implies); throws otherwise.
 */
export function planAppend(
  streamId: string,
  ids: readonly string[],
  expected: ExpectedRevision,
  existing: readonly StoredIdentity[],
  currentRevision: number,
): 'write' | AppendResult {
  if (existing.length === 0) {
    checkExpected(streamId, expected, currentRevision);
    return 'write';
  }
  const byId = new Map(existing.map((e) => [e.eventId, e]));
  const first = byId.get(ids[0]);
  const inOrder =
    existing.length === ids.length &&
    first !== undefined &&
    ids.every((id, i) => {
      const e = byId.get(id);
      return e !== undefined && e.streamId === streamId && e.revision === first.revision + i;
    });
  if (!inOrder) {
    const stored = existing.map((e) => ({ id: e.eventId, streamId: e.streamId, revision: e.revision }));
    throw new FabricError(
      C.eventIdConflict,
      409,
      existing.length < ids.length
        ? `${existing.length} of the ${ids.length} events of this append are already stored (ids ${stored.map((s) => s.id).join(', ')}); an append is all new or an exact repeat`
        : `the event ids of this append are already stored, but not as this append to stream ${JSON.stringify(streamId)} in this order`,
      {
        details: { streamId, stored },
        hint: 'event ids are unique across the store: derive them from the command id and the event index, and repeat an append only with the same events in the same order',
      },
    );
  }
  const last = byId.get(ids[ids.length - 1])!;
  const impliedOk =
    (typeof expected === 'number' && first.revision === expected + 1) ||
    (expected === 'no_stream' && first.revision === 0) ||
    expected === 'any' ||
    expected === 'exists';
  if (!impliedOk) throw new WrongExpectedRevisionError(streamId, expected, currentRevision);
  return { nextRevision: last.revision, position: last.position };
}
