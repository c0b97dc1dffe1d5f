// Errors of the transport layer; codes are listed in docs/errors.md ("Transport and distributed mode").
import { FabricError } from '../protocol/errors.js';

export const TransportErrorCode = {
  ConfigInvalid: 'TRANSPORT_CONFIG_INVALID',
  TopicInvalid: 'TRANSPORT_TOPIC_INVALID',
  GroupInvalid: 'TRANSPORT_GROUP_INVALID',
  MessageInvalid: 'TRANSPORT_MESSAGE_INVALID',
  MessageTooLarge: 'TRANSPORT_MESSAGE_TOO_LARGE',
  Closed: 'TRANSPORT_CLOSED',
  Unavailable: 'TRANSPORT_UNAVAILABLE',
  PublishFailed: 'TRANSPORT_PUBLISH_FAILED',
} as const;

export function configInvalid(message: string, hint: string, details?: Record<string, unknown>): FabricError {
  return new FabricError(TransportErrorCode.ConfigInvalid, 500, message, { hint, ...(details ? { details } : {}) });
}

export function topicInvalid(topic: unknown): FabricError {
  return new FabricError(TransportErrorCode.TopicInvalid, 400, `topic name ${JSON.stringify(topic)} is not valid`, {
    hint: 'use 1 to 249 characters of a-z, A-Z, 0-9, ".", "_" and "-"',
    details: { topic },
  });
}

export function groupInvalid(groupId: unknown): FabricError {
  return new FabricError(
    TransportErrorCode.GroupInvalid,
    400,
    `consumer group id ${JSON.stringify(groupId)} is not valid`,
    {
      hint: 'use a non-empty string of at most 255 characters',
      details: { groupId },
    },
  );
}

export function messageInvalid(index: number, what: string): FabricError {
  return new FabricError(TransportErrorCode.MessageInvalid, 400, `message ${index}: ${what}`, {
    hint: 'a message needs a non-empty string key, a Uint8Array value and string header values',
    details: { index },
  });
}

export function messageTooLarge(index: number, bytes: number, limit: number): FabricError {
  return new FabricError(
    TransportErrorCode.MessageTooLarge,
    413,
    `message ${index} is ${bytes} bytes; the limit is ${limit}`,
    {
      hint: 'put large payloads in the blob store and send its reference, size and sha256 instead',
      details: { index, bytes, limit },
    },
  );
}

export function transportClosed(what: string): FabricError {
  return new FabricError(TransportErrorCode.Closed, 503, `cannot ${what}: the transport is closed`, {
    hint: 'open a new transport; a closed one stays closed',
  });
}

export function transportUnavailable(brokers: readonly string[], cause: unknown): FabricError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new FabricError(
    TransportErrorCode.Unavailable,
    503,
    `cannot reach the Kafka brokers ${brokers.join(',')}: ${reason}`,
    {
      hint: 'check KAFKA_BROKERS and that the brokers are up and reachable from this host',
      details: { brokers },
      cause,
    },
  );
}

export function publishFailed(topic: string, count: number, cause: unknown): FabricError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new FabricError(
    TransportErrorCode.PublishFailed,
    503,
    `publishing ${count} message(s) to ${topic} failed: ${reason}`,
    {
      hint: 'some of these messages may have been written; publish them again (consumers deduplicate)',
      details: { topic, count },
      cause,
    },
  );
}
