// A submitted request, followed by polling `GET /requests/:id` (the non-blocking mode of the SDK).
import { CancelledError, ClientTimeoutError, FabricHttpError, RemoteError } from './errors.js';
import { fetchResult } from './fetch-result.js';
import type { FabricHttp } from './http.js';
import { FINAL_STATUSES, updateFromReply } from './status.js';
import type { StatusUpdate } from './status.js';
import type { RequestReply } from './wire.js';

export interface RequestInfo extends StatusUpdate {
  /** The whole view as the fabric sent it (timestamps, statuses, logs, error, result reference…). */
  reply: RequestReply;
}

export interface WaitOptions {
  /** First poll interval, ms (doubles up to `maxPollMs`; default 100). */
  pollMs?: number;
  maxPollMs?: number;
  /** Give up after this long with ClientTimeoutError (default: no limit). */
  waitMs?: number;
  signal?: AbortSignal;
}

export class RequestHandle {
  constructor(
    private readonly http: FabricHttp,
    readonly requestId: string,
    private readonly single: boolean,
  ) {}

  async status(signal?: AbortSignal): Promise<RequestInfo> {
    const reply = await this.http.json<RequestReply>(
      'GET',
      `/requests/${encodeURIComponent(this.requestId)}`,
      signal ? { signal } : {},
    );
    return { ...updateFromReply(reply), reply };
  }

  /** Waits for the request to finish; its block's value (a list of values for several invokes). */
  async result<T = any>(opts: WaitOptions = {}): Promise<T> {
    const out = await this.output(opts);
    return (this.single ? out.values[0] : out.values) as T;
  }

  /** Waits for the request to finish; every invoke's value and the result's metadata. */
  async output(
    opts: WaitOptions = {},
  ): Promise<{ requestId: string; values: unknown[]; meta: Record<string, unknown> }> {
    const info = await this.wait(opts);
    const r = info.reply;
    if (r.status === 'ERROR')
      throw new RemoteError(
        this.requestId,
        r.error ?? { phase: 'unknown', type: 'Error', message: 'the fabric reported an error without details' },
      );
    if (r.status === 'CANCELLED')
      throw new CancelledError(
        this.requestId,
        `${r.cancelled?.by ?? 'someone'}${r.cancelled?.actor ? ` ${r.cancelled.actor}` : ''}`,
      );
    const d = await fetchResult(this.http, this.requestId, r.result ?? {}, opts.signal);
    return { requestId: this.requestId, values: d.values, meta: d.meta };
  }

  /** Polls until COMPLETED, ERROR or CANCELLED. */
  async wait(opts: WaitOptions = {}): Promise<RequestInfo> {
    const start = Date.now();
    let interval = opts.pollMs ?? 100;
    for (;;) {
      const info = await this.status(opts.signal);
      if (FINAL_STATUSES.has(info.status)) return info;
      if (opts.waitMs !== undefined && Date.now() - start + interval > opts.waitMs)
        throw new ClientTimeoutError(this.requestId, Date.now() - start);
      await sleep(interval, opts.signal);
      interval = Math.min(opts.maxPollMs ?? 1000, interval * 2);
    }
  }

  /** Cancels the request on the fabric; false when it had already finished. */
  async cancel(): Promise<boolean> {
    try {
      await this.http.json('POST', `/requests/${encodeURIComponent(this.requestId)}/cancel`, { body: {} });
      return true;
    } catch (e) {
      if (e instanceof FabricHttpError && e.code === 'CP_REQUEST_FINISHED') return false;
      throw e;
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
