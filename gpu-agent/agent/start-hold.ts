// The run's start report (RUNNING), held back for a few milliseconds: a run that ends within the hold reports its
// start with its end (`startedMsBefore`), one report and one append instead of two. Any other report of the run
// (a log batch, tokens, a trace's progress, a result being written) sends the start first, so the control plane
// sees the run's reports in the order they happened.

export class StartHold {
  private startedAt: number | undefined;
  private settled = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly holdMs: number,
    private readonly send: () => void,
    private readonly now: () => number,
  ) {}

  /** The run started (a session's later traces call it again: only the first counts). */
  started(): void {
    if (this.startedAt !== undefined || this.settled) return;
    this.startedAt = this.now();
    if (this.holdMs <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), this.holdMs);
  }

  /** Sends the start report now if it is held. */
  flush(): void {
    if (this.startedAt === undefined || this.settled) return;
    this.settle();
    this.send();
  }

  /**
   * For the run's end: how many ms ago the run started when its start is still held (the end carries it, and the
   * start is never sent on its own), else undefined.
   */
  fold(): number | undefined {
    if (this.startedAt === undefined || this.settled) return undefined;
    this.settle();
    return Math.max(0, Math.round(this.now() - this.startedAt));
  }

  /** The run ended without a report of its own (aborted): the held start is dropped. */
  drop(): void {
    this.settle();
  }

  private settle(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
