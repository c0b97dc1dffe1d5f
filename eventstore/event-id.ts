// Deterministic event ids: a retried command yields the same ids, so its re-append is recognised as a repeat.
import { createHash } from 'node:crypto';

/**
 * A name-based UUID (RFC 9562 version 5 layout, SHA-1) of `commandId` and the event's index in the decision.
 * Same inputs, same id; different command ids or indexes give different ids.
 */
export function deterministicEventId(commandId: string, index: number): string {
  const h = createHash('sha1').update('ndif-event\u0000').update(commandId).update('\u0000').update(String(index)).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}
