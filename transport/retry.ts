// Runs a subscriber's handler until it succeeds, with a doubling backoff, unless the subscription
// stops first: the same message is retried so that the order per partition holds.
import type { SubscribeOptions, TransportMessage } from './port.js';

export interface RetryControl {
  /** True once the subscription is closing: stop retrying, leave the message uncommitted. */
  stopped(): boolean;
  /** Resolves after ms, or early when the subscription stops. */
  sleep(ms: number): Promise<void>;
  /** Kafka needs heartbeats while a partition is stuck on a failing message. */
  heartbeat?: () => Promise<void>;
}

/** Returns true when the handler succeeded, false when the subscription stopped first. */
export async function deliverWithRetry(
  messages: readonly TransportMessage[],
  run: () => Promise<void>,
  options: SubscribeOptions,
  control: RetryControl,
): Promise<boolean> {
  let delay = options.retryDelayMs ?? 100;
  const maxDelay = options.maxRetryDelayMs ?? 5000;
  for (;;) {
    if (control.stopped()) return false;
    try {
      await run();
      return true;
    } catch (error) {
      try {
        options.onError?.(error, messages);
      } catch {
        /* a failing error callback must not stop delivery */
      }
    }
    await control.sleep(delay);
    delay = Math.min(delay * 2, maxDelay);
    await control.heartbeat?.().catch(() => {});
  }
}
