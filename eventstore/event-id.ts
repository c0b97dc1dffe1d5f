// Deterministic event ids: a retried command yields the same ids, so its re-append is recognised as a repeat.
import * as crypto from 'node:crypto';

// One-shot hashing (Node >= 20.12) costs a fraction of a Hash object per event; the bytes hashed are the same.
const sha1Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha1', text, 'hex')
    : (text) => crypto.createHash('sha1').update(text).digest('hex');

const VARIANT = '89ab';

/**
 * A name-based UUID (RFC 9562 version 5 layout, SHA-1) of `commandId` and the event's index in the decision.
 * Same inputs, same id; different command ids or indexes give different ids.
 */
export function deterministicEventId(commandId: string, index: number): string {
  const x = sha1Hex(`ndif-event\u0000${commandId}\u0000${index}`);
  // Version 5 in the high nibble of byte 6, variant 10xx in the high bits of byte 8.
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-5${x.slice(13, 16)}-${VARIANT[parseInt(x[16], 16) & 3]}${x.slice(17, 20)}-${x.slice(20, 32)}`;
}
