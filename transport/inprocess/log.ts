// The in-process broker's storage: per topic a fixed number of partitions, each an append-only log
// that wakes the consumers waiting for its next offset.

export interface StoredMessage {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
  timestamp: number;
}

export class PartitionLog {
  readonly messages: StoredMessage[] = [];
  private waiters = new Set<() => void>();

  append(message: StoredMessage): void {
    this.messages.push(message);
    const waiting = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiting) wake();
  }

  get end(): number {
    return this.messages.length;
  }

  /** Resolves when the log holds more than `offset` messages, or when `cancel` is called. */
  waitBeyond(offset: number): { ready: Promise<void>; cancel: () => void } {
    if (this.messages.length > offset) return { ready: Promise.resolve(), cancel: () => {} };
    let wake!: () => void;
    const ready = new Promise<void>((resolve) => (wake = resolve));
    this.waiters.add(wake);
    return {
      ready,
      cancel: () => {
        this.waiters.delete(wake);
        wake();
      },
    };
  }
}

export class TopicLog {
  readonly partitions: PartitionLog[];
  constructor(
    readonly name: string,
    partitionCount: number,
  ) {
    this.partitions = Array.from({ length: partitionCount }, () => new PartitionLog());
  }
}
