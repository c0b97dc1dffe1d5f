// Frame headers of the IPC transport (see frames.ts for the byte layout).
import type { Headers } from '../port.js';

export interface OutgoingMeta {
  key: string;
  headers?: Headers;
  /** Bytes of the value in the frame body. */
  n: number;
}

export interface DeliveredMeta {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  headers: Record<string, string>;
  timestamp: number;
  n: number;
}

export interface ErrorWire {
  code: string;
  httpStatus: number;
  message: string;
  hint?: string;
  details?: Record<string, unknown>;
}

/** Client → server. `id` pairs a request with its `ok`/`err`; `sub` names a subscription; `d` a delivery. */
export type ClientFrame =
  | { t: 'pub'; id: number; topic: string; msgs: OutgoingMeta[] }
  | {
      t: 'sub';
      id: number;
      sub: number;
      topic: string;
      group: string;
      batch: boolean;
      fromBeginning?: boolean;
      retryDelayMs?: number;
      maxRetryDelayMs?: number;
    }
  | { t: 'unsub'; id: number; sub: number }
  | { t: 'done'; d: number; ok: boolean; error?: string };

/** Server → client. */
export type ServerFrame =
  | { t: 'ok'; id: number }
  | { t: 'err'; id: number; error: ErrorWire }
  | { t: 'dlv'; d: number; sub: number; msgs: DeliveredMeta[] };
