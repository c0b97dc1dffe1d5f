// When a run starts, RequestStarted is reported a moment later rather than at once: a run that ends within that
// moment (a trivial block, a short forward) is reported started with its completion, as one command on the control
// plane's path instead of two (`ReportRequestCompleted { started: true }`). Any other report of the attempt (a log
// line, tokens, a trace's progress, a failure) sends a pending start first, so the order the control plane sees is
// unchanged. A trusted block that holds the event loop from its first line delays the report until it yields; the
// attempt shows DISPATCHED meanwhile (its time limit counts from the dispatch either way).

/** How long after its start a run is reported RUNNING, unless it ended or reported something else first. */
export const STARTED_REPORT_DELAY_MS = 5;

export class StartedReport {
  private state: 'not-started' | 'pending' | 'reported' = 'not-started';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly send: () => void,
    private readonly delayMs = STARTED_REPORT_DELAY_MS,
  ) {}

  /** The run started: report it after the delay (at once with a delay of 0). */
  runStarted(): void {
    if (this.state !== 'not-started') return;
    this.state = 'pending';
    if (this.delayMs <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), this.delayMs);
  }

  /** Before another report of the attempt: a pending start goes first. */
  flush(): void {
    if (this.state !== 'pending') return;
    clearTimeout(this.timer);
    this.state = 'reported';
    this.send();
  }

  /** At the completion: true when the start was not reported yet (the completion carries it). */
  takeForCompletion(): boolean {
    if (this.state !== 'pending') return false;
    clearTimeout(this.timer);
    this.state = 'reported';
    return true;
  }

  /** The attempt was ended elsewhere (cancelled, requeued): nothing more is reported. */
  cancel(): void {
    clearTimeout(this.timer);
    this.state = 'reported';
  }
}
