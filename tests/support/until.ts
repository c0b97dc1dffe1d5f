// Waiting in tests: poll until a probe has an answer, with a deadline that fails the test saying what it waited for.
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `probe` every `everyMs` until it returns something other than undefined or false, and returns that.
 * A probe that throws is polled again (a server not up yet); after `timeoutMs` it fails naming `what` and the
 * probe's last error.
 */
export async function until<T>(
  what: string | (() => string),
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 20_000,
  everyMs = 20,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}${last ? `: ${String(last)}` : ''}`,
      );
    await sleep(everyMs);
  }
}
