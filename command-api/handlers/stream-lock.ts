// Commands on one stream run one after another inside this process (commands on different streams run
// concurrently). Without it, N concurrent commands on a stream — an agent's burst of log lines — would race
// each other in the store, one winning per round; the store's optimistic concurrency still covers writers in
// other processes.

export class StreamLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(streamId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(streamId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(streamId, tail);
    void tail.then(() => {
      if (this.tails.get(streamId) === tail) this.tails.delete(streamId);
    });
    return next;
  }
}
