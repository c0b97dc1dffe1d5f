// The in-process broker: topics, partitions and consumer groups shared by every InProcessTransport
// created on it (the embedded fabric's control plane and agents use one broker).
import { partitionsFor } from '../topic-partitions.js';
import { partitionFor } from '../partitioner.js';
import { ConsumerGroup } from './group.js';
import { TopicLog } from './log.js';
import type { OutgoingMessage } from '../port.js';

export interface InProcessBrokerOptions {
  /** Partitions of each topic, fixed when the topic is first used. Default 4. */
  partitions?: number;
  /** Per-topic partition counts that override `partitions`. */
  topicPartitions?: Readonly<Record<string, number>>;
  /** Clock for message timestamps. Default Date.now. */
  now?: () => number;
}

export class InProcessBroker {
  private readonly topics = new Map<string, TopicLog>();
  private readonly groups = new Map<string, ConsumerGroup>();
  private readonly partitions: number;
  private readonly now: () => number;

  constructor(private readonly options: InProcessBrokerOptions = {}) {
    this.partitions = options.partitions ?? 4;
    this.now = options.now ?? Date.now;
  }

  topic(name: string): TopicLog {
    let t = this.topics.get(name);
    if (!t) {
      t = new TopicLog(name, partitionsFor(name, this.options.topicPartitions, this.partitions));
      this.topics.set(name, t);
    }
    return t;
  }

  group(groupId: string, topic: string): ConsumerGroup {
    const id = `${groupId}\u0000${topic}`;
    let g = this.groups.get(id);
    if (!g) {
      g = new ConsumerGroup(groupId, this.topic(topic));
      this.groups.set(id, g);
    }
    return g;
  }

  append(topic: string, messages: readonly OutgoingMessage[]): void {
    const t = this.topic(topic);
    const timestamp = this.now();
    for (const m of messages) {
      t.partitions[partitionFor(m.key, t.partitions.length)].append({
        key: m.key,
        value: Buffer.from(m.value), // the publisher may reuse its buffer
        headers: { ...(m.headers ?? {}) },
        timestamp,
      });
    }
  }
}
