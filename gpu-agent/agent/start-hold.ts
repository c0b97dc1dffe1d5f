// The run's start report (RUNNING), held back for a few milliseconds: a run that ends within the hold reports its
// start with its end (`startedMsBefore`), one report and one append instead of two. Any other report of the run
// (a log batch, tokens, a trace's progress, a result being written) sends the start first, so the control plane
// sees the run's reports in the order they happened. A start sent on its own says how long it was held, so the
// recorded start time is the run's, not the report's.

export class StartHold {
  private startedAt: number | undefined;
  private settled = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly holdMs: number,
    private readonly send: (heldMs: number) => void,
    private readonly now: () => number,
  ) {}

  /** The run started (a session's later traces call it again: only the first counts). */
  started(): void {
    if (this.startedAt !== undefined || this.settled) return;
    this.startedAt = this.now();
    if (this.holdMs <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), this.holdMs);
  }

  /** Sends the start report now if it is held, with how long it was held. */
  flush(): void {
    if (this.startedAt === undefined || this.settled) return;
    this.settle();
    this.send(this.elapsed(this.startedAt));
  }

  /**
   * For the run's end: how many ms ago the run started when its start is still held (the end carries it, and the
   * start is never sent on its own), else undefined.
   */
  fold(): number | undefined {
    if (this.startedAt === undefined || this.settled) return undefined;
    this.settle();
    return this.elapsed(this.startedAt);
  }

  /** The run ended without a report of its own (aborted): the held start is dropped. */
  drop(): void {
    this.settle();
  }

  private elapsed(since: number): number {
    return Math.max(0, Math.round(this.now() - since));
  }

  private settle(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
