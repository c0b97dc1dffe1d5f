// A consumer group on one topic of the in-process broker, with Kafka's behaviour: the members share
// the partitions (partition p goes to member p mod n, in join order), each partition is handled by
// one member at a time, in order, and the group's committed offsets outlive its members, so a
// subscriber that closes and subscribes again resumes after the last message it handled. A change of
// membership stops every member's partitions (each finishes the handler it is in), then reassigns.
import { deliverWithRetry } from '../retry.js';
import type { SubscribeOptions, TransportMessage } from '../port.js';
import type { PartitionLog, StoredMessage, TopicLog } from './log.js';

/** The most messages one batch handler call receives. */
const MAX_BATCH = 1000;

export interface MemberSpec {
  /** Handles messages[0..n) of one partition; n is 1 for a per-message subscriber. */
  deliver(messages: readonly TransportMessage[]): Promise<void>;
  batch: boolean;
  options: SubscribeOptions;
}

class PartitionWorker {
  private stopping = false;
  private waiting: { cancel: () => void } | undefined;
  private sleeping: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor(
    private readonly topic: string,
    private readonly partition: number,
    private readonly log: PartitionLog,
    private readonly group: ConsumerGroup,
    private readonly member: MemberSpec,
    private next: number,
  ) {
    this.done = this.loop();
  }

  stop(): Promise<void> {
    this.stopping = true;
    this.waiting?.cancel();
    this.sleeping?.();
    return this.done;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      if (this.next >= this.log.end) {
        const wait = this.log.waitBeyond(this.next);
        this.waiting = wait;
        await wait.ready;
        this.waiting = undefined;
        continue;
      }
      const count = this.member.batch ? Math.min(MAX_BATCH, this.log.end - this.next) : 1;
      const batch = this.log.messages.slice(this.next, this.next + count).map((m, i) => this.view(m, this.next + i));
      const handled = await deliverWithRetry(batch, () => this.member.deliver(batch), this.member.options, {
        stopped: () => this.stopping,
        sleep: (ms) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, ms);
            this.sleeping = () => {
              clearTimeout(timer);
              resolve();
            };
          }),
      });
      if (!handled) return;
      this.next += count;
      this.group.commit(this.partition, this.next);
    }
  }

  /** Each delivery gets its own copy, as each Kafka consumer gets its own bytes. */
  private view(m: StoredMessage, offset: number): TransportMessage {
    return {
      topic: this.topic,
      partition: this.partition,
      offset: String(offset),
      key: m.key,
      value: Buffer.from(m.value),
      headers: { ...m.headers },
      timestamp: m.timestamp,
    };
  }
}

export class ConsumerGroup {
  private readonly committed: (number | undefined)[];
  private members: MemberSpec[] = [];
  private workers: PartitionWorker[] = [];
  private changes: Promise<void> = Promise.resolve();

  constructor(
    readonly groupId: string,
    private readonly topic: TopicLog,
  ) {
    this.committed = topic.partitions.map(() => undefined);
  }

  commit(partition: number, next: number): void {
    this.committed[partition] = next;
  }

  committedOffset(partition: number): number | undefined {
    return this.committed[partition];
  }

  /** Resolves when the member has its partitions. */
  join(member: MemberSpec): Promise<void> {
    return this.change(() => this.members.push(member));
  }

  /** Resolves when the member's partitions have stopped (its handlers finished) and moved on. */
  leave(member: MemberSpec): Promise<void> {
    return this.change(() => {
      this.members = this.members.filter((m) => m !== member);
    });
  }

  private change(mutate: () => void): Promise<void> {
    const next = this.changes.then(async () => {
      await Promise.all(this.workers.map((w) => w.stop()));
      mutate();
      this.workers = this.assign();
    });
    this.changes = next.catch(() => {});
    return next;
  }

  private assign(): PartitionWorker[] {
    if (this.members.length === 0) return [];
    return this.topic.partitions.map((log, p) => {
      const member = this.members[p % this.members.length];
      const start = this.committed[p] ?? (member.options.fromBeginning ? 0 : log.end);
      return new PartitionWorker(this.topic.name, p, log, this, member, start);
    });
  }
}
