// Deletes the blob of every expired result (ResultExpired: retention, or deleted by its submitter). The event is
// the decision and is stored first; the deletion follows it, at least once: at start every expired result's
// blob is deleted again (a no-op when gone), so a crash between the two leaves nothing behind for long: those of
// the requests in the view, and — finished requests leave the view (bounded hot state) — those of the expiries
// among the last RECENT_EVENTS events, read from the store's type index.
import type { Logger } from 'pino';
import type { BlobStore } from '../blobstore/port.js';
import type { EventStore } from '../eventstore/port.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';

/** How far back the start looks for expiries whose deletion a crash may have cut off (it follows the event at once). */
const RECENT_EVENTS = 100_000;

export class ResultReaper {
  private unlisten: (() => void) | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  deleted = 0;

  constructor(
    private readonly view: ControlPlaneView,
    private readonly blobs: BlobStore,
    private readonly log: Logger,
    private readonly store?: EventStore,
  ) {}

  start(): void {
    for (const v of this.view.state.requests.byId.values())
      if (v.result?.expiredAt !== undefined) this.delete(v.result.ref);
    const store = this.store;
    if (store?.capabilities.queryFilters.includes('type')) {
      const from = Math.max(0, this.view.position - RECENT_EVENTS);
      this.chain = this.chain.then(async () => {
        try {
          for (let after = from; ; ) {
            const page = await store.query({ type: 'ResultExpired', afterPosition: after, limit: 1000 });
            for (const e of page) this.delete((e.data as { resultRef: string }).resultRef);
            if (page.length < 1000) break;
            after = page[page.length - 1]!.position;
          }
        } catch (err) {
          this.log.error({ err }, 'recent expired results could not be read; their blobs are tried at the next start');
        }
      });
    }
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
