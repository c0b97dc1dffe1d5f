// Sends what publish() queues, one produce request at a time: the idempotent producer keeps order
// per partition across retries only when requests do not overtake each other, and a request sent
// while another is in flight carries every message queued meanwhile, so bursts become large batches
// and a lone message leaves at once.
import type { Message, Producer, TopicMessages } from 'kafkajs';
import { publishFailed } from '../errors.js';
import type { OutgoingMessage } from '../port.js';

interface Chunk {
  topic: string;
  messages: readonly Message[];
  bytes: number;
  entry: Entry;
}

interface Entry {
  topic: string;
  count: number;
  pending: number;
  failed: boolean;
  resolve: () => void;
  reject: (e: unknown) => void;
}

function size(m: OutgoingMessage): number {
  let n = m.value.byteLength + m.key.length + 70; // a record's framing, roughly
  if (m.headers) for (const [k, v] of Object.entries(m.headers)) n += k.length + v.length + 4;
  return n;
}

export class BatchingSender {
  private queue: Chunk[] = [];
  private pumping: Promise<void> | undefined;

  constructor(
    private readonly producer: Producer,
    private readonly maxBatchBytes: number,
    private readonly lingerMs: number,
  ) {}

  send(topic: string, messages: readonly OutgoingMessage[]): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const entry: Entry = { topic, count: messages.length, pending: 0, failed: false, resolve, reject };
      let start = 0;
      let bytes = 0;
      const cut = (end: number) => {
        // copied now: the caller may reuse its buffers once publish() has returned
        const copies = messages.slice(start, end).map(
          (m): Message => ({
            key: m.key,
            value: Buffer.from(m.value),
            headers: m.headers ? { ...m.headers } : undefined,
          }),
        );
        this.queue.push({ topic, messages: copies, bytes, entry });
        entry.pending++;
        start = end;
        bytes = 0;
      };
      messages.forEach((m, i) => {
        const b = size(m);
        if (bytes > 0 && bytes + b > this.maxBatchBytes) cut(i);
        bytes += b;
      });
      cut(messages.length);
      this.pumping ??= this.pump().finally(() => (this.pumping = undefined));
    });
  }

  /** Resolves when everything queued so far has been sent or has failed. */
  async flush(): Promise<void> {
    while (this.pumping) await this.pumping;
  }

  private async pump(): Promise<void> {
    await new Promise((r) => (this.lingerMs > 0 ? setTimeout(r, this.lingerMs) : setImmediate(r)));
    while (this.queue.length > 0) {
      const batch: Chunk[] = [];
      let bytes = 0;
      while (this.queue.length > 0 && (batch.length === 0 || bytes + this.queue[0].bytes <= this.maxBatchBytes)) {
        const chunk = this.queue.shift()!;
        if (chunk.entry.failed) continue;
        batch.push(chunk);
        bytes += chunk.bytes;
      }
      if (batch.length === 0) continue;
      try {
        await this.producer.sendBatch({ acks: -1, topicMessages: byTopic(batch) });
        for (const c of batch) if (--c.entry.pending === 0 && !c.entry.failed) c.entry.resolve();
      } catch (e) {
        for (const c of batch) {
          if (c.entry.failed) continue;
          c.entry.failed = true;
          c.entry.reject(publishFailed(c.entry.topic, c.entry.count, e));
        }
      }
    }
  }
}

/** Groups consecutive chunks per topic, keeping each topic's message order. */
function byTopic(batch: readonly Chunk[]): TopicMessages[] {
  const topics = new Map<string, Message[]>();
  for (const c of batch) {
    let list = topics.get(c.topic);
    if (!list) {
      list = [];
      topics.set(c.topic, list);
    }
    for (const m of c.messages) list.push(m);
  }
  return [...topics].map(([topic, messages]) => ({ topic, messages }));
}
