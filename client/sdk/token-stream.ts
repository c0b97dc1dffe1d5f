// `ndif.stream(...)`: the tokens of one request as an async iterator, each token once and in order. They come from
// the status websocket's STREAM messages (tokens are events of the request's stream, so a reconnect resumes after the
// last one received); the tokens of a step already seen (a retried attempt replays the same steps) are skipped,
// and when the request completes any token the websocket did not deliver (it gave out and the trace polled
// instead) is taken from the result's metadata, so the iterator always ends with every generated token.
import type { StreamedToken } from './wire.js';
import type { TraceResult } from './fabric.js';

export class GenerationStream<V extends readonly unknown[] = unknown[]> implements AsyncIterable<StreamedToken> {
  private readonly queue: StreamedToken[] = [];
  private readonly seen = new Map<number, number>();
  private wake: (() => void) | undefined;
  private done = false;
  private failure: unknown;
  private iterating = false;
  /** Resolves with the request's outcome (as `execute` returns it) once it is done. */
  readonly result: Promise<TraceResult<V>>;

  constructor(
    readonly requestId: string,
    run: (onTokens: (tokens: StreamedToken[]) => void) => Promise<TraceResult<V>>,
  ) {
    this.result = run((tokens) => this.push(tokens)).then(
      (r) => {
        this.fillFrom(r);
        this.finish();
        return r;
      },
      (e: unknown) => {
        this.failure = e;
        this.finish();
        throw e;
      },
    );
    this.result.catch(() => undefined);
  }

  /** Every token of an invoke's row: steps in order, each once. */
  private push(tokens: StreamedToken[]): void {
    for (const t of tokens) {
      const next = this.seen.get(t.invoke) ?? 0;
      if (t.step !== next) continue;
      this.seen.set(t.invoke, next + 1);
      this.queue.push(t);
    }
    this.wake?.();
  }

  private fillFrom(r: TraceResult<V>): void {
    const generated = r.meta.generated as number[][] | undefined;
    if (!Array.isArray(generated)) return;
    const missing: StreamedToken[] = [];
    generated.forEach((ids, invoke) => {
      for (let step = this.seen.get(invoke) ?? 0; step < ids.length; step++)
        missing.push({ step, invoke, token: ids[step]! });
    });
    missing.sort((a, b) => a.step - b.step || a.invoke - b.invoke);
    this.push(missing);
  }

  private finish(): void {
    this.done = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamedToken> {
    if (this.iterating) throw new Error('a generation stream can be iterated once');
    this.iterating = true;
    for (;;) {
      const t = this.queue.shift();
      if (t !== undefined) {
        yield t;
        continue;
      }
      if (this.done) {
        if (this.failure !== undefined) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }
}
