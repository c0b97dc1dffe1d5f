// The transport between the control plane and the GPU agents: keyed, partitioned topics with
// consumer groups, in the shape of Kafka. Messages with the same key keep their order; delivery is
// at least once (a handler's message is committed only after the handler resolves, so a crash or a
// closed subscription means it is delivered again); consumers should be idempotent.

export type Headers = Readonly<Record<string, string>>;

export interface OutgoingMessage {
  /** Messages with the same key go to the same partition and are delivered in publish order. */
  key: string;
  value: Uint8Array;
  headers?: Headers;
}

export interface TransportMessage {
  topic: string;
  partition: number;
  /** Position in the partition, a decimal integer (Kafka offsets are 64-bit). */
  offset: string;
  key: string;
  value: Buffer;
  headers: Record<string, string>;
  /** Milliseconds since the epoch, set when the message was published. */
  timestamp: number;
}

export type MessageHandler = (message: TransportMessage) => Promise<void>;
/** Receives consecutive messages of one partition; all are committed when it resolves. */
export type BatchHandler = (messages: readonly TransportMessage[]) => Promise<void>;

export interface SubscribeOptions {
  /**
   * Where a group with no committed position starts: the oldest retained message (true) or the
   * next one published (false, the default). A group that has committed resumes after its last commit.
   */
  fromBeginning?: boolean;
  /**
   * Called with each handler failure. The same message (or batch) is then delivered again after a
   * backoff, and the messages behind it in its partition wait: order is kept.
   */
  onError?: (error: unknown, messages: readonly TransportMessage[]) => void;
  /** First retry delay after a handler failure; doubles up to maxRetryDelayMs. Default 100 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
}

export interface Subscription {
  readonly topic: string;
  readonly groupId: string;
  /**
   * Messages published but not yet handed to this subscriber, per partition it holds, as of its latest fetch
   * (Kafka: the high watermark − 1 − the last offset fetched). Absent where delivery is immediate (in-process).
   */
  lag?(): { partition: number; messages: number }[];
  /**
   * Leaves the group: waits for the handler in progress, commits what was handled. A message whose
   * handler has not succeeded by then is delivered again to the group's next subscriber.
   */
  close(): Promise<void>;
}

export interface Transport {
  readonly kind: 'inprocess' | 'kafka' | 'ipc';
  /**
   * Resolves when every message is durably accepted (for Kafka: acknowledged by all in-sync
   * replicas). Messages passed in one call, and calls made one after another, keep their order per key.
   * A rejected publish may have written some of its messages: publish again (consumers dedupe).
   */
  publish(topic: string, messages: OutgoingMessage | readonly OutgoingMessage[]): Promise<void>;
  /**
   * Joins consumer group `groupId` on `topic`: the group's subscribers share the topic's partitions,
   * each message goes to one of them. Resolves once this subscriber has its partitions.
   */
  subscribe(topic: string, groupId: string, handler: MessageHandler, options?: SubscribeOptions): Promise<Subscription>;
  /** As subscribe, with the consecutive messages of one partition that are available handed over together. */
  subscribeBatch(
    topic: string,
    groupId: string,
    handler: BatchHandler,
    options?: SubscribeOptions,
  ): Promise<Subscription>;
  /** Closes every subscription of this transport, then the connections. Idempotent. */
  close(): Promise<void>;
}
