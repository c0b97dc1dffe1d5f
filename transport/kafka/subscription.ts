// One subscription = one kafkajs consumer in the group. Handlers run through deliverWithRetry, so a
// failing message is retried in place (order kept) with heartbeats going out meanwhile. Offsets are
// committed by an OffsetCommitter after the handler resolved, never before; kafkajs's auto-commit is
// off. A message skipped because the subscription is closing is never committed.
import type { Consumer, EachBatchPayload, EachMessagePayload, Kafka, KafkaMessage } from 'kafkajs';
import { transportUnavailable } from '../errors.js';
import { deliverWithRetry } from '../retry.js';
import { OffsetCommitter } from './committer.js';
import { KAFKA_DEFAULTS, type KafkaConsumerTuning, type KafkaLog } from './options.js';
import type { SubscribeOptions, Subscription, TransportMessage } from '../port.js';

export interface SubscriptionSpec {
  topic: string;
  groupId: string;
  batch: boolean;
  deliver: (messages: readonly TransportMessage[]) => Promise<void>;
  options: SubscribeOptions;
  partitions: number;
}

/** How long subscribe() waits for the group to hand this member its partitions. */
const JOIN_TIMEOUT_MS = 60_000;

function toMessage(topic: string, partition: number, m: KafkaMessage): TransportMessage {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) headers[k] = first.toString();
  }
  return {
    topic,
    partition,
    offset: m.offset,
    key: m.key?.toString('utf8') ?? '',
    value: m.value ?? Buffer.alloc(0),
    headers,
    timestamp: Number(m.timestamp),
  };
}

export async function openSubscription(
  kafka: Kafka,
  brokers: readonly string[],
  spec: SubscriptionSpec,
  tuning: KafkaConsumerTuning,
  log: KafkaLog,
): Promise<Subscription> {
  const heartbeatInterval = tuning.heartbeatIntervalMs ?? KAFKA_DEFAULTS.heartbeatIntervalMs;
  const consumer: Consumer = kafka.consumer({
    groupId: spec.groupId,
    sessionTimeout: tuning.sessionTimeoutMs ?? KAFKA_DEFAULTS.sessionTimeoutMs,
    heartbeatInterval,
    maxWaitTimeInMs: tuning.maxWaitTimeInMs ?? KAFKA_DEFAULTS.maxWaitTimeInMs,
    minBytes: tuning.minBytes ?? KAFKA_DEFAULTS.minBytes,
    allowAutoTopicCreation: false,
  });
  const committer = new OffsetCommitter(consumer, spec.topic, log);
  let stopping = false;
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const sleepers = new Set<() => void>();
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      sleepers.add(wake);
    });

  const handle = async (messages: readonly TransportMessage[], heartbeat: () => Promise<void>) => {
    if (stopping) return; // closing: leave it uncommitted for the group's next subscriber
    inFlight++;
    // kafkajs has no heartbeat thread: keep the membership alive while a handler works.
    const beat = setInterval(() => heartbeat().catch(() => {}), heartbeatInterval);
    try {
      const ok = await deliverWithRetry(messages, () => spec.deliver(messages), spec.options, {
        stopped: () => stopping,
        sleep,
        heartbeat,
      });
      const last = messages[messages.length - 1];
      if (ok) committer.handled(last.partition, last.offset);
    } finally {
      clearInterval(beat);
      if (--inFlight === 0) idle?.();
    }
  };

  let joined = false;
  let ready!: () => void;
  let failed!: (e: unknown) => void;
  const assigned = new Promise<void>((resolve, reject) => {
    ready = resolve;
    failed = reject;
  });
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    committer.assign(event.payload.memberAssignment[spec.topic] ?? []);
    joined = true;
  });
  // Offsets of a group without commits are resolved in the first fetch after joining: once that
  // fetch returns, a message published after subscribe() resolved is sure to be delivered.
  consumer.on(consumer.events.FETCH, () => joined && ready());
  const lagByPartition = new Map<number, number>();
  consumer.on(consumer.events.END_BATCH_PROCESS, (event) => {
    if (event.payload.topic === spec.topic)
      lagByPartition.set(event.payload.partition, Number(event.payload.offsetLag));
  });
  consumer.on(consumer.events.GROUP_JOIN, () => lagByPartition.clear());
  consumer.on(consumer.events.CRASH, (event) => {
    const { error, restart } = event.payload;
    log(
      'error',
      `consumer of ${spec.topic} in group ${spec.groupId} crashed${restart ? ', restarting' : ''}: ${error.message}`,
      {},
    );
    if (!restart) failed(error);
  });

  try {
    await consumer.connect();
    await consumer.subscribe({ topic: spec.topic, fromBeginning: spec.options.fromBeginning ?? false });
    const concurrency = tuning.partitionsConsumedConcurrently ?? spec.partitions;
    await consumer.run(
      spec.batch
        ? {
            autoCommit: false,
            partitionsConsumedConcurrently: concurrency,
            eachBatchAutoResolve: true,
            eachBatch: async ({ batch, heartbeat }: EachBatchPayload) => {
              if (batch.messages.length === 0) return;
              await handle(
                batch.messages.map((m) => toMessage(batch.topic, batch.partition, m)),
                heartbeat,
              );
            },
          }
        : {
            autoCommit: false,
            partitionsConsumedConcurrently: concurrency,
            eachMessage: async ({ topic, partition, message, heartbeat }: EachMessagePayload) => {
              await handle([toMessage(topic, partition, message)], heartbeat);
            },
          },
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      assigned,
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no partitions assigned within ${JOIN_TIMEOUT_MS} ms`)),
          JOIN_TIMEOUT_MS,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  } catch (e) {
    stopping = true;
    await consumer.disconnect().catch(() => {});
    throw transportUnavailable(brokers, e);
  }

  let closing: Promise<void> | undefined;
  return {
    topic: spec.topic,
    groupId: spec.groupId,
    lag: () => [...lagByPartition].map(([partition, messages]) => ({ partition, messages })),
    close: () =>
      (closing ??= (async () => {
        stopping = true;
        consumer.pause([{ topic: spec.topic }]);
        for (const wake of [...sleepers]) wake();
        if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
        await committer.flush();
        await consumer.disconnect();
      })()),
  };
}
