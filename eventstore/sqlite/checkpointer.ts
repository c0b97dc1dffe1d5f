// Background WAL checkpoints for the embedded store. A checkpoint copies the WAL into the database file and syncs
// both; run by the appending connection (SQLite's autocheckpoint) it stalls the event loop for the whole sync —
// 250–500 ms per 16000 pages on this machine's disk while other work writes, a third of the time of a sustained
// append burst. Once a store has written enough to need checkpoints, a worker thread with its own connection runs
// them instead (PASSIVE: appends and reads go on meanwhile), and the appending connection's autocheckpoint is
// raised to a safety bound that only applies if the worker falls behind.
import { Worker } from 'node:worker_threads';

export const CheckpointSlot = { written: 0, stop: 1 } as const;

export interface CheckpointerData {
  path: string;
  /** Int32 slots (CheckpointSlot): events written by the main connection (wrapping), and the stop flag. */
  state: Int32Array;
  intervalMs: number;
  lingerMs: number;
  everyEvents: number;
}

export interface CheckpointerOptions {
  path: string;
  /** The store's WAL size between checkpoints, in pages (its `walAutocheckpointPages`). */
  walPages: number;
  /** Called with the message of a checkpoint that failed (the next one is tried as usual). */
  onError(message: string): void;
}

/** How many pages a written event is counted as when deciding that a store needs checkpoints (about 3: its row,
 * the stream index and the event id index; a large group commit shares pages, a single append does not). */
const PAGES_PER_EVENT = 4;

export class BackgroundCheckpointer {
  private readonly state = new Int32Array(new SharedArrayBuffer(8));
  private readonly everyEvents: number;
  private written = 0;
  private worker: Worker | undefined;
  private exited: Promise<void> | undefined;

  constructor(private readonly options: CheckpointerOptions) {
    this.everyEvents = Math.max(1, Math.floor(options.walPages / PAGES_PER_EVENT));
  }

  /** True once the worker runs: the appending connection's autocheckpoint is then only a safety bound. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Counts events committed by the store; starts the worker when they reach one checkpoint's worth. */
  committed(events: number): boolean {
    this.written = (this.written + events) | 0;
    Atomics.store(this.state, CheckpointSlot.written, this.written);
    if (this.worker !== undefined || this.exited !== undefined || this.written < this.everyEvents) return false;
    const data: CheckpointerData = {
      path: this.options.path,
      state: this.state,
      intervalMs: 100,
      lingerMs: 1000,
      everyEvents: this.everyEvents,
    };
    const worker = new Worker(new URL('./checkpoint-worker.js', import.meta.url), { workerData: data });
    worker.on('message', (m: { error?: string }) => {
      if (typeof m?.error === 'string') this.options.onError(m.error);
    });
    worker.on('error', (e) => this.options.onError(e.message));
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()));
    worker.unref();
    this.worker = worker;
    return true;
  }

  /** Stops the worker after its checkpoint in progress (if any) and closes its connection. */
  async stop(): Promise<void> {
    Atomics.store(this.state, CheckpointSlot.stop, 1);
    Atomics.notify(this.state, CheckpointSlot.stop);
    // Referenced again while it winds down, or a process with nothing else to do would exit before it has.
    this.worker?.ref();
    this.worker = undefined;
    await this.exited;
  }
}
