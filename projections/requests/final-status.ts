// A request's final status (COMPLETED, ERROR, CANCELLED) as its status message says it, from the event that ended it:
// what the status websocket sends and what a submission that waits answers with (docs/http-api.md).
import type { DomainEvent } from '../../domain/events/types.js';

export type FinalStatusName = 'COMPLETED' | 'ERROR' | 'CANCELLED';

export interface FinalStatus {
  requestId: string;
  status: FinalStatusName;
  /** The message's fields besides requestId, status, cursor, at and replay. */
  fields: Record<string, unknown>;
  /** COMPLETED: the blob to show inline, as a binary frame or by URL. */
  result?: { ref: string; bytes: number; sha256: string; weightsFingerprint?: string };
}

/** The final status an event records, or undefined for an event that does not end its request. */
export function finalStatusOf(d: DomainEvent): FinalStatus | undefined {
  switch (d.type) {
    case 'RequestCompleted': {
      const weights = d.data.weightsFingerprint === undefined ? {} : { weightsFingerprint: d.data.weightsFingerprint };
      return {
        requestId: d.data.requestId,
        status: 'COMPLETED',
        fields: { attempt: d.data.attempt, bytes: d.data.bytes, sha256: d.data.sha256, ...weights },
        result: { ref: d.data.resultRef, bytes: d.data.bytes, sha256: d.data.sha256, ...weights },
      };
    }
    case 'RequestFailed':
      return {
        requestId: d.data.requestId,
        status: 'ERROR',
        fields: {
          attempt: d.data.attempt,
          error: { phase: d.data.phase, type: d.data.errorType, message: d.data.message, stack: d.data.stack },
        },
      };
    case 'RequestCancelled':
      return {
        requestId: d.data.requestId,
        status: 'CANCELLED',
        fields: { by: d.data.by, actor: d.data.actor, attempt: d.data.attempt },
      };
    default:
      return undefined;
  }
}
