// A model serves one request (or session) at a time: each waits for the one before it, whatever its outcome.
export class ServingQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `f` after everything queued before it; its own result or failure. */
  enqueue<T>(f: () => Promise<T>): Promise<T> {
    const next = this.tail.then(f);
    this.tail = next.catch(() => {});
    return next;
  }

  /** Settles once everything queued so far has. */
  async drain(): Promise<void> {
    await this.tail;
  }
}
