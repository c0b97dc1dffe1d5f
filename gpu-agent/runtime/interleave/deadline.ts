// One deadline for a request (or a session of traces): a timeout and the caller's abort signal. `expired` rejects
// with the InterventionError (Timeout or Cancelled) so awaits can race it; `check()` throws it between steps.
import type { BlockError } from '../../../protocol/interleave.js';
import { InterventionError, blockError } from '../errors.js';

export class Deadline {
  private timer: NodeJS.Timeout | undefined;
  readonly expired: Promise<never>;
  private fail!: (e: Error) => void;
  reason: BlockError | undefined;

  constructor(timeoutMs: number, signal: AbortSignal | undefined) {
    this.expired = new Promise<never>((_, reject) => (this.fail = reject));
    this.expired.catch(() => {});
    const trip = (e: BlockError) => {
      if (this.reason) return;
      this.reason = e;
      this.fail(new InterventionError(e));
    };
    this.timer = setTimeout(
      () =>
        trip(
          blockError(
            'Timeout',
            `the request did not finish within ${timeoutMs} ms (a block that never returns, or waits on something that never happens)`,
          ),
        ),
      timeoutMs,
    );
    if (signal) {
      const onAbort = () =>
        trip(blockError('Cancelled', `the request was cancelled${signal.reason ? `: ${String(signal.reason)}` : ''}`));
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
  }

  check(): void {
    if (this.reason) throw new InterventionError(this.reason);
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}
