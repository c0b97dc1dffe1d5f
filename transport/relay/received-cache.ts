// What a `run` assignment needs from a request's RequestReceived (trust, options, payload), remembered as the relay
// reads the log, so dispatching a request it saw arrive costs no read of the request's stream. Bounded by the
// payloads' approximate size (oldest dropped first); a request it does not hold (received before the relay's
// checkpoint, dropped, or dispatched again after a requeue) is read from the store as before.
import type { StoredEvent } from '../../eventstore/port.js';

export interface ReceivedFacts {
  trusted?: boolean;
  payload?: unknown;
  options?: { timeoutMs?: number | null; steps?: number };
}

/** Default bound on the remembered payloads' size (their block sources and inputs, as JSON). */
export const RECEIVED_CACHE_BYTES = 16 * 1024 * 1024;

export class ReceivedCache {
  private readonly entries = new Map<string, { facts: ReceivedFacts; bytes: number }>();
  private bytes = 0;

  constructor(private readonly maxBytes = RECEIVED_CACHE_BYTES) {}

  /** Remembers a RequestReceived; forgets a request once it is dispatched or finished. */
  observe(e: StoredEvent): void {
    const d = e.data as { requestId?: unknown } & ReceivedFacts;
    if (typeof d?.requestId !== 'string') return;
    if (e.type === 'RequestReceived') {
      const bytes = JSON.stringify(d.payload ?? null).length;
      if (bytes > this.maxBytes / 4) return;
      this.forget(d.requestId);
      this.entries.set(d.requestId, { facts: { trusted: d.trusted, payload: d.payload, options: d.options }, bytes });
      this.bytes += bytes;
      for (const [id, x] of this.entries) {
        if (this.bytes <= this.maxBytes) break;
        this.entries.delete(id);
        this.bytes -= x.bytes;
      }
    } else if (e.type === 'RequestCompleted' || e.type === 'RequestFailed' || e.type === 'RequestCancelled') {
      this.forget(d.requestId);
    }
  }

  /** The facts of a request received since the relay started, if still held; a dispatch takes them out. */
  take(requestId: string): ReceivedFacts | undefined {
    const x = this.entries.get(requestId);
    if (x !== undefined) this.forget(requestId);
    return x?.facts;
  }

  get size(): number {
    return this.entries.size;
  }

  private forget(requestId: string): void {
    const x = this.entries.get(requestId);
    if (x === undefined) return;
    this.entries.delete(requestId);
    this.bytes -= x.bytes;
  }
}
