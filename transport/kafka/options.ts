// Settings of the Kafka adapter, with the defaults tuned for the control plane ↔ agent traffic:
// small messages where latency matters, bursts where throughput does.

export type KafkaLogLevel = 'error' | 'warn' | 'info' | 'debug';
export type KafkaLog = (level: KafkaLogLevel, message: string, extra: Record<string, unknown>) => void;

export interface KafkaConsumerTuning {
  /** A member that misses heartbeats this long is dropped and its partitions move. Default 10000. */
  sessionTimeoutMs?: number;
  /** Default 1000. Heartbeats also go out while a handler runs. */
  heartbeatIntervalMs?: number;
  /** How long the broker holds a fetch that has no data yet; bounds close() time. Default 100 (10 idle fetches/s). */
  maxWaitTimeInMs?: number;
  /** The broker answers a fetch as soon as this many bytes are there. Default 1: lowest latency. */
  minBytes?: number;
  /** Partitions of one subscription handled at the same time (each in order). Default: the topic's partition count. */
  partitionsConsumedConcurrently?: number;
}

export interface KafkaTransportOptions {
  brokers: readonly string[];
  /** Shows in the broker's logs and quotas. Default "ndif". */
  clientId?: string;
  /** Partitions of the topics this transport creates. Default 4. */
  partitions?: number;
  /** Per-topic partition counts that override `partitions`. */
  topicPartitions?: Readonly<Record<string, number>>;
  /** Topics created (if missing) when connecting; any other topic is created on first use. */
  topics?: readonly string[];
  maxMessageBytes?: number;
  /** Wait this long after the first queued message before sending, to fill larger batches. Default 0. */
  lingerMs?: number;
  /** Bytes of messages per produce request. Default 512 KiB (brokers refuse batches over 1 MiB by default). */
  maxBatchBytes?: number;
  consumer?: KafkaConsumerTuning;
  /** Connection attempt timeout. Default 3000 ms. */
  connectionTimeoutMs?: number;
  /** Default 30000 ms. */
  requestTimeoutMs?: number;
  /** Retries of a failed connection or request (not of produce, which retries until it succeeds). Default 8. */
  retries?: number;
  /** Where the client's own log lines go. Default: errors to stderr, retried broker responses left out. */
  log?: KafkaLog;
}

export const KAFKA_DEFAULTS = {
  clientId: 'ndif',
  partitions: 4,
  lingerMs: 0,
  maxBatchBytes: 512 * 1024,
  sessionTimeoutMs: 10_000,
  heartbeatIntervalMs: 1000,
  maxWaitTimeInMs: 100,
  minBytes: 1,
  connectionTimeoutMs: 3000,
  requestTimeoutMs: 30_000,
} as const;
