// Admission of new submissions against the caller's key limits: requests waiting in the queues (maxQueued) and
// result bytes kept (storageQuotaBytes), both read from the live view plus the submissions this process has
// accepted that the view does not hold yet (300 parallel submissions are counted one by one, not all against
// the same stale count). A refusal is a coded 429 naming the limit; a resubmission of a request that exists
// is never refused (it is answered as the request it is).
import { FabricError } from '../../../protocol/errors.js';
import type { FabricContext } from '../../../fabric/context.js';
import type { EffectiveLimits } from '../../../http/key-limits.js';
import { storedBytesOf } from '../../../projections/requests/state.js';
import type { QueueState } from '../../../projections/queue/state.js';

export const AdmissionErrorCode = {
  queueFull: 'API_KEY_QUEUE_FULL',
  storageQuota: 'API_STORAGE_QUOTA_EXCEEDED',
} as const;

/** Requests of `submitter` waiting in every model's queue. */
export function queuedOf(q: QueueState, submitter: string): number {
  let n = 0;
  for (const bySubmitter of q.bySubmitter.values()) n += bySubmitter.get(submitter)?.size ?? 0;
  return n;
}

export class SubmitAdmission {
  /** Per submitter: submissions accepted here whose events the view has not applied yet. */
  private readonly unseen = new Map<string, number>();

  constructor(private readonly ctx: FabricContext) {}

  /**
   * Throws the 429 when `submitter` is at a limit and `exists()` says the request is new; else returns the
   * function to call with the submission's log position once it is appended (or undefined when it was not).
   */
  async admit(
    submitter: string,
    limits: EffectiveLimits,
    exists: () => Promise<boolean>,
  ): Promise<(position: number | undefined) => void> {
    if (limits.maxQueued === null && limits.storageQuotaBytes === null) return () => undefined;
    const s = this.ctx.view.state;
    const queued = queuedOf(s.queue, submitter) + (this.unseen.get(submitter) ?? 0);
    const stored = storedBytesOf(s.requests, submitter);
    if (limits.maxQueued !== null && queued >= limits.maxQueued && !(await exists())) {
      throw new FabricError(
        AdmissionErrorCode.queueFull,
        429,
        `${submitter} has ${queued} requests waiting, the most its key may have queued (${limits.maxQueued}); submit more as these run`,
        {
          hint: 'wait for some to finish (the status websocket says when), or cancel ones you no longer need',
          details: { queued, maxQueued: limits.maxQueued, retryAfterMs: 5000 },
        },
      );
    }
    if (limits.storageQuotaBytes !== null && stored >= limits.storageQuotaBytes && !(await exists())) {
      throw new FabricError(
        AdmissionErrorCode.storageQuota,
        429,
        `${submitter} keeps ${stored} bytes of results, its key's quota is ${limits.storageQuotaBytes} bytes; new requests are refused until results expire or are deleted`,
        {
          hint: 'download and delete results you keep (DELETE /requests/:id/result), or wait for them to expire',
          details: { storedBytes: stored, storageQuotaBytes: limits.storageQuotaBytes, retryAfterMs: 60_000 },
        },
      );
    }
    this.unseen.set(submitter, (this.unseen.get(submitter) ?? 0) + 1);
    let done = false;
    const forget = () => {
      if (done) return;
      done = true;
      const n = (this.unseen.get(submitter) ?? 1) - 1;
      if (n > 0) this.unseen.set(submitter, n);
      else this.unseen.delete(submitter);
    };
    return (position) => {
      if (position === undefined || this.ctx.view.position >= position) return forget();
      this.ctx.view.waitForPosition(position, 30_000).then(forget, forget);
    };
  }
}
