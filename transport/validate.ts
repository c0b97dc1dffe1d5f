// Checks shared by every adapter, so bad input fails the same way in-process and over Kafka.
import { groupInvalid, messageInvalid, messageTooLarge, topicInvalid } from './errors.js';
import type { OutgoingMessage } from './port.js';

/** Kafka's default message.max.bytes is 1 MiB; stay under it with room for the record overhead. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1_000_000;

const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

export function checkTopic(topic: unknown): asserts topic is string {
  if (typeof topic !== 'string' || !TOPIC.test(topic) || topic === '.' || topic === '..') throw topicInvalid(topic);
}

export function checkGroup(groupId: unknown): asserts groupId is string {
  if (typeof groupId !== 'string' || groupId.length === 0 || groupId.length > 255) throw groupInvalid(groupId);
}

/** Returns the messages as an array; throws on the first invalid one. */
export function checkMessages(
  messages: OutgoingMessage | readonly OutgoingMessage[],
  maxBytes: number,
): readonly OutgoingMessage[] {
  const list: readonly OutgoingMessage[] = Array.isArray(messages) ? messages : [messages as OutgoingMessage];
  list.forEach((m, i) => {
    if (m === null || typeof m !== 'object') throw messageInvalid(i, 'is not an object');
    if (typeof m.key !== 'string' || m.key.length === 0) throw messageInvalid(i, 'key must be a non-empty string');
    if (!(m.value instanceof Uint8Array))
      throw messageInvalid(i, 'value must be a Uint8Array (use encodeJson for objects)');
    let bytes = m.value.byteLength + Buffer.byteLength(m.key);
    if (m.headers !== undefined) {
      if (m.headers === null || typeof m.headers !== 'object')
        throw messageInvalid(i, 'headers must be an object of strings');
      for (const [k, v] of Object.entries(m.headers)) {
        if (typeof v !== 'string') throw messageInvalid(i, `header ${JSON.stringify(k)} must be a string`);
        bytes += Buffer.byteLength(k) + Buffer.byteLength(v);
      }
    }
    if (bytes > maxBytes) throw messageTooLarge(i, bytes, maxBytes);
  });
  return list;
}
