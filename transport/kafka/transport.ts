// The distributed transport over Kafka (kafkajs): an idempotent producer (acks from all in-sync
// replicas) behind a batching sender, one consumer per subscription, topics created on first use.
import { partitionsFor } from '../topic-partitions.js';
import { setTimeout as sleep } from 'node:timers/promises';
import kafkajs from 'kafkajs';
import type { Admin, Kafka as KafkaClient, Producer } from 'kafkajs';
import { configInvalid, transportClosed, transportUnavailable } from '../errors.js';
import { checkGroup, checkMessages, checkTopic, DEFAULT_MAX_MESSAGE_BYTES } from '../validate.js';
import { defaultLog, kafkajsLevel, logCreator } from './logging.js';
import { KAFKA_DEFAULTS, type KafkaLog, type KafkaTransportOptions } from './options.js';
import { BatchingSender } from './sender.js';
import { noDelaySocketFactory } from './socket.js';
import { openSubscription, type SubscriptionSpec } from './subscription.js';
import type {
  BatchHandler,
  MessageHandler,
  OutgoingMessage,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportMessage,
} from '../port.js';

const { Kafka, Partitioners } = kafkajs;
/** How long a new topic's partitions may take to get leaders once the broker knows it (createTopic). */
const TOPIC_LEADERS_WAIT_MS = 30_000;

export class KafkaTransport implements Transport {
  readonly kind = 'kafka' as const;
  private readonly subscriptions = new Set<Subscription>();
  private readonly topics = new Map<string, Promise<void>>();
  private readonly maxMessageBytes: number;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: KafkaTransportOptions,
    private readonly kafka: KafkaClient,
    private readonly admin: Admin,
    private readonly producer: Producer,
    private readonly sender: BatchingSender,
    private readonly log: KafkaLog,
  ) {
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** Connects to the brokers and creates `options.topics`; fails with TRANSPORT_UNAVAILABLE. */
  static async connect(options: KafkaTransportOptions): Promise<KafkaTransport> {
    checkOptions(options);
    const log = options.log ?? defaultLog;
    const kafka = new Kafka({
      clientId: options.clientId ?? KAFKA_DEFAULTS.clientId,
      brokers: [...options.brokers],
      connectionTimeout: options.connectionTimeoutMs ?? KAFKA_DEFAULTS.connectionTimeoutMs,
      requestTimeout: options.requestTimeoutMs ?? KAFKA_DEFAULTS.requestTimeoutMs,
      retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: options.retries ?? 8 },
      logLevel: kafkajsLevel(options.log !== undefined),
      logCreator: logCreator(log),
      socketFactory: noDelaySocketFactory,
    });
    const admin = kafka.admin();
    // Idempotence makes the broker drop a retried batch it already has; kafkajs then needs an
    // unlimited retry count (it warns otherwise), which is its default for idempotent producers.
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
      retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: Number.MAX_SAFE_INTEGER },
    });
    try {
      await admin.connect();
      await producer.connect();
    } catch (e) {
      await producer.disconnect().catch(() => {});
      await admin.disconnect().catch(() => {});
      throw transportUnavailable(options.brokers, e);
    }
    const sender = new BatchingSender(
      producer,
      options.maxBatchBytes ?? KAFKA_DEFAULTS.maxBatchBytes,
      options.lingerMs ?? KAFKA_DEFAULTS.lingerMs,
    );
    const transport = new KafkaTransport(options, kafka, admin, producer, sender, log);
    try {
      await Promise.all((options.topics ?? []).map((t) => transport.ensureTopic(t)));
    } catch (e) {
      await transport.close();
      throw e;
    }
    return transport;
  }

  partitionsOf(topic: string): number {
    return partitionsFor(topic, this.options.topicPartitions, this.options.partitions ?? KAFKA_DEFAULTS.partitions);
  }

  /** Creates the topic with its configured partition count unless it exists. */
  ensureTopic(topic: string): Promise<void> {
    checkTopic(topic);
    let p = this.topics.get(topic);
    if (!p) {
      p = this.createTopic(topic).catch((e: unknown) => {
        this.topics.delete(topic);
        throw transportUnavailable(this.options.brokers, e);
      });
      this.topics.set(topic, p);
    }
    return p;
  }

  /**
   * Creates the topic (if missing) and waits for its partitions' leaders. Right after the create, the broker can
   * answer the leaders query with UNKNOWN_TOPIC_OR_PARTITION (its metadata has not caught up; seen with several
   * fabrics starting at once on a loaded machine), which kafkajs does not retry: the query is asked again until
   * every partition has a leader, within TOPIC_LEADERS_WAIT_MS.
   */
  private async createTopic(topic: string): Promise<void> {
    try {
      await this.admin.createTopics({
        topics: [{ topic, numPartitions: this.partitionsOf(topic) }],
        waitForLeaders: true,
      });
      return;
    } catch (e) {
      if ((e as { type?: unknown }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw e;
    }
    const deadline = Date.now() + TOPIC_LEADERS_WAIT_MS;
    for (;;) {
      try {
        const { topics } = await this.admin.fetchTopicMetadata({ topics: [topic] });
        const partitions = topics.find((t) => t.name === topic)?.partitions ?? [];
        if (partitions.length > 0 && partitions.every((q) => q.leader >= 0)) return;
        if (Date.now() > deadline) throw new Error(`topic ${topic} has no leader after ${TOPIC_LEADERS_WAIT_MS} ms`);
      } catch (e) {
        if (Date.now() > deadline) throw e;
      }
      await sleep(100);
    }
  }

  async publish(topic: string, messages: OutgoingMessage | readonly OutgoingMessage[]): Promise<void> {
    if (this.closing) throw transportClosed('publish');
    checkTopic(topic);
    const list = checkMessages(messages, this.maxMessageBytes);
    await this.ensureTopic(topic);
    await this.sender.send(topic, list);
  }

  subscribe(
    topic: string,
    groupId: string,
    handler: MessageHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join({
      topic,
      groupId,
      batch: false,
      options,
      deliver: (m: readonly TransportMessage[]) => handler(m[0]),
      partitions: 0,
    });
  }

  subscribeBatch(
    topic: string,
    groupId: string,
    handler: BatchHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join({ topic, groupId, batch: true, options, deliver: handler, partitions: 0 });
  }

  private async join(spec: SubscriptionSpec): Promise<Subscription> {
    if (this.closing) throw transportClosed('subscribe');
    checkTopic(spec.topic);
    checkGroup(spec.groupId);
    await this.ensureTopic(spec.topic);
    const inner = await openSubscription(
      this.kafka,
      this.options.brokers,
      { ...spec, partitions: this.partitionsOf(spec.topic) },
      this.options.consumer ?? {},
      this.log,
    );
    const subscription: Subscription = {
      topic: inner.topic,
      groupId: inner.groupId,
      lag: inner.lag,
      close: () => inner.close().finally(() => this.subscriptions.delete(subscription)),
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([...this.subscriptions].map((s) => s.close()));
      await this.sender.flush();
      await this.producer.disconnect().catch(() => {});
      await this.admin.disconnect().catch(() => {});
    })();
    return this.closing;
  }
}

function checkOptions(o: KafkaTransportOptions): void {
  if (
    !Array.isArray(o.brokers) ||
    o.brokers.length === 0 ||
    o.brokers.some((b) => typeof b !== 'string' || !/^[^\s:]+:\d+$/.test(b))
  ) {
    throw configInvalid(
      `Kafka brokers ${JSON.stringify(o.brokers)} are not a list of host:port`,
      'set KAFKA_BROKERS to host:port[,host:port...]',
      {
        brokers: o.brokers,
      },
    );
  }
  const counts = [o.partitions, ...Object.values(o.topicPartitions ?? {})];
  if (counts.some((n) => n !== undefined && (!Number.isInteger(n) || n < 1 || n > 10_000))) {
    throw configInvalid(
      'partition counts must be integers from 1 to 10000',
      'fix NDIF_KAFKA_PARTITIONS or the topicPartitions option',
      { partitions: o.partitions },
    );
  }
}
