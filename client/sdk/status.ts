// The statuses a request goes through, as the SDK hands them to callers (normalised from the wire).

export type RequestStatus = 'RECEIVED' | 'QUEUED' | 'PROVISIONING' | 'DEPLOYING' | 'DISPATCHED' | 'RUNNING' | 'COMPLETED' | 'ERROR' | 'CANCELLED';

export const FINAL_STATUSES: ReadonlySet<string> = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);

/** One status of a request (what the status websocket and `GET /requests/:id` report). */
export interface StatusUpdate {
  requestId: string;
  status: RequestStatus;
  /** 0-based place in the model's queue while waiting (0 = next); null otherwise. */
  position: number | null;
  queueLength: number | null;
  /** Attempt number (1 for the first dispatch). */
  attempt: number | null;
  /** For PROVISIONING/DEPLOYING: the deployment's latest refusal or load failure, if any. */
  deploymentNote: string | null;
  /** The raw view as the fabric sent it. */
  raw: Record<string, unknown>;
}

/** A console line of a block (`console.log` → stdout, `console.error` → stderr). */
export interface LogLine {
  requestId: string;
  invoke: number | null;
  stream: 'stdout' | 'stderr';
  line: string;
}
