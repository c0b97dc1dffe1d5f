// Deletes the blob of every expired result (ResultExpired: retention, or deleted by its submitter). The event is
// the decision and is stored first; the deletion follows it, at least once: at start every expired result's
// blob is deleted again (a no-op when gone), so a crash between the two leaves nothing behind for long.
import type { Logger } from 'pino';
import type { BlobStore } from '../blobstore/port.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';

export class ResultReaper {
  private unlisten: (() => void) | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  deleted = 0;

  constructor(
    private readonly view: ControlPlaneView,
    private readonly blobs: BlobStore,
    private readonly log: Logger,
  ) {}

  start(): void {
    for (const v of this.view.state.requests.byId.values())
      if (v.result?.expiredAt !== undefined) this.delete(v.result.ref);
    this.unlisten = this.view.onApplied((e) => {
      if (e.type === 'ResultExpired') this.delete((e.data as { resultRef: string }).resultRef);
    });
  }

  private delete(ref: string): void {
    this.chain = this.chain.then(async () => {
      try {
        if (await this.blobs.delete(ref)) this.deleted++;
      } catch (err) {
        this.log.error(
          { err, ref },
          `the blob of expired result ${ref} could not be deleted; it is tried again at the next start`,
        );
      }
    });
  }

  /** Resolves once the deletions asked for so far are done. */
  async idle(): Promise<void> {
    await this.chain;
  }

  async stop(): Promise<void> {
    this.unlisten?.();
    await this.chain;
  }
}
