// Turns on a model: requests run at the same time on one hosted model (a replica's `concurrency`), and take its
// forward work in turn. A request holds the turn while the host computes for it (segments, backward passes, module
// calls) and gives it back whenever it waits for its blocks — a block parked on its own promise, or slow in its own
// code, keeps no one else from the model. Turns are granted first come, first served.
import type { BlockChannel } from '../../../protocol/interleave.js';

export class ModelTurns {
  private holder: Turn | undefined;
  private readonly waiting: Turn[] = [];
  private readonly running = new Set<Promise<void>>();

  /**
   * Runs a request now: `f` gets an opener for the channel to its blocks that takes the turn once open and gives it
   * back while the host waits for the blocks; the turn is given up for good when `f` settles.
   */
  serve<T>(
    open: () => BlockChannel | Promise<BlockChannel>,
    f: (opener: () => Promise<BlockChannel>) => Promise<T>,
  ): Promise<T> {
    return this.serveTurn((turn) => f(() => turn.around(open())));
  }

  /**
   * Runs `f` with a turn of its own, which it takes and gives as it needs (a batch of requests decides its members
   * when first granted the turn: serving/batcher.ts); the turn is given up for good when `f` settles.
   */
  serveTurn<T>(f: (turn: Turn) => Promise<T>): Promise<T> {
    const turn = this.turn();
    const run = (async () => f(turn))().finally(() => turn.done());
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.running.add(settled);
    void settled.then(() => this.running.delete(settled));
    return run;
  }

  /** Settles once every request running now has. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }

  /** A request's place in the turns; `done()` it when the request ends. */
  turn(): Turn {
    return new Turn(this);
  }

  /** @internal */
  take(t: Turn): Promise<void> {
    if (this.holder === undefined) {
      this.holder = t;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      t.granted = resolve;
      this.waiting.push(t);
    });
  }

  /** @internal */
  give(t: Turn): void {
    const i = this.waiting.indexOf(t);
    if (i >= 0) this.waiting.splice(i, 1);
    if (this.holder !== t) return;
    this.holder = this.waiting.shift();
    const next = this.holder?.granted;
    if (this.holder) this.holder.granted = undefined;
    next?.();
  }

  /** Requests holding or waiting for a turn. */
  get queued(): number {
    return this.waiting.length + (this.holder === undefined ? 0 : 1);
  }
}

export class Turn {
  granted: (() => void) | undefined;
  private ended = false;

  constructor(private readonly turns: ModelTurns) {}

  async take(): Promise<void> {
    if (this.ended) return;
    await this.turns.take(this);
    // Ended while waiting: the turn passes on at once.
    if (this.ended) this.turns.give(this);
  }

  give(): void {
    this.turns.give(this);
  }

  /** The request ended: never holds or waits for a turn again. */
  done(): void {
    this.ended = true;
    this.granted?.();
    this.granted = undefined;
    this.turns.give(this);
  }

  /**
   * The channel to a request's blocks, taking the turn once open and giving it back while the host waits for the
   * blocks' next message.
   */
  async around(channel: BlockChannel | Promise<BlockChannel>): Promise<BlockChannel> {
    const c = await channel;
    await this.take();
    return {
      send: (msg) => c.send(msg),
      receive: async () => {
        this.give();
        try {
          return await c.receive();
        } finally {
          await this.take();
        }
      },
      close: () => c.close(),
    };
  }
}
