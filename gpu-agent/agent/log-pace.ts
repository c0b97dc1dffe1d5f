// A request's log batches leave the agent at most `linesPerSecond` lines a second: each batch gets the time it may
// be published, right after the lines before it have had their share of the second. A block printing in a tight
// loop fills its batches in milliseconds; sent as fast as they fill, they keep the control plane's process busy
// storing and fanning out lines with no gap for its HTTP answers (docs/control-plane.md, "Numbers").
export class LogPace {
  private next = 0;

  constructor(
    private readonly linesPerSecond: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The earliest time (clock ms) a batch of `lines` lines may be published; reserves its share. */
  slot(lines: number): number {
    const at = Math.max(this.clock(), this.next);
    this.next = at + (lines * 1000) / this.linesPerSecond;
    return at;
  }
}
