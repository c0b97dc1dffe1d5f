// JSON payloads on the transport: values are bytes on the wire, these helpers are the one encoding.
import type { Headers, OutgoingMessage, TransportMessage } from './port.js';

export function encodeJson(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

export function jsonMessage(key: string, value: unknown, headers?: Headers): OutgoingMessage {
  return headers === undefined ? { key, value: encodeJson(value) } : { key, value: encodeJson(value), headers };
}

/** Parses a message's value as JSON; validate the result with the schema of what you expect. */
export function readJson(message: Pick<TransportMessage, 'value'>): unknown {
  return JSON.parse(message.value.toString('utf8'));
}
