// The statuses a request goes through, as the SDK hands them to callers (normalised from the websocket's
// status messages and from GET /requests/:id).
import type { RequestReply, StatusMessage } from './wire.js';

export type RequestStatus =
  | 'RECEIVED'
  | 'QUEUED'
  | 'PROVISIONING'
  | 'DEPLOYING'
  | 'DISPATCHED'
  | 'RUNNING'
  | 'COMPLETED'
  | 'ERROR'
  | 'CANCELLED';

export const FINAL_STATUSES: ReadonlySet<string> = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);

/** One status of a request. */
export interface StatusUpdate {
  requestId: string;
  status: RequestStatus;
  /** 0-based place in the model's queue while waiting (0 = next); null otherwise or when not known. */
  position: number | null;
  queueLength: number | null;
  /** Attempt number (1 for the first dispatch); null when not given. */
  attempt: number | null;
  /** For PROVISIONING/DEPLOYING: the deployment's latest refusal or load failure; for a requeue, why. */
  deploymentNote: string | null;
}

/** A console line of a block (`console.log` → stdout, `console.error` → stderr). */
export interface LogLine {
  requestId: string;
  attempt: number | null;
  stream: 'stdout' | 'stderr';
  line: string;
}

export function updateFromMessage(m: StatusMessage): StatusUpdate {
  return {
    requestId: m.requestId,
    status: m.status as RequestStatus,
    position: typeof m.position === 'number' ? m.position : null,
    queueLength: typeof m.queueLength === 'number' ? m.queueLength : null,
    attempt: typeof m.attempt === 'number' ? m.attempt : null,
    deploymentNote:
      m.deployment?.lastFailure ?? (m.requeued ? `requeued: ${m.requeued.text || m.requeued.reason}` : null),
  };
}

export function updateFromReply(r: RequestReply): StatusUpdate {
  return {
    requestId: r.requestId,
    status: r.status as RequestStatus,
    position: r.position,
    queueLength: r.queueLength ?? null,
    attempt: r.attempt ?? null,
    deploymentNote: r.deployment?.lastFailure ?? null,
  };
}
