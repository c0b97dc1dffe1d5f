// The SDK's HTTP calls: base URL, API key, JSON in and out, and one mapping of failures: nothing answering →
// UnreachableError; an error body → FabricHttpError (its code, message, hint and details as the fabric sent them).
import { API_PROTOCOL_VERSION, PROTOCOL_HEADER } from '../../protocol/api-version.js';
import type { ErrorBody } from '../../protocol/errors.js';
import { FabricHttpError, ProtocolMismatchError, UnreachableError } from './errors.js';
import { type Exchange, ExchangeError, exchange } from './http-exchange.js';

export interface HttpOptions {
  url: string;
  apiKey?: string | null;
  /** Per-call timeout for one HTTP exchange (not for waiting on a request), ms. */
  timeoutMs?: number;
  /** The protocol version sent in `x-ndif-protocol` (default: this SDK's). */
  protocolVersion?: string;
}

export interface CallOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined | null>;
  signal?: AbortSignal;
  /** Return the body as bytes instead of parsed JSON. */
  binary?: boolean;
  /** Send the API key (default true; a signed result URL needs none). */
  auth?: boolean;
  /** Statuses (besides 2xx) whose body is returned rather than thrown. */
  accept?: number[];
  /** More request headers (If-None-Match, …). */
  headers?: Record<string, string>;
  /** Raw bytes sent as application/octet-stream instead of a JSON body. */
  rawBody?: Uint8Array;
  /** This call's timeout instead of the client's (a large upload). */
  timeoutMs?: number;
}

export interface HttpReply<T> {
  status: number;
  body: T;
  headers: Headers;
}

export const API_KEY_HEADER = 'x-api-key';

export class FabricHttp {
  readonly url: string;
  readonly apiKey: string | null;
  readonly protocolVersion: string;
  /** The limit of one exchange (ms). */
  readonly timeoutMs: number;

  constructor(opts: HttpOptions) {
    this.url = normalizeUrl(opts.url);
    this.apiKey = opts.apiKey ?? null;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.protocolVersion = opts.protocolVersion ?? API_PROTOCOL_VERSION;
  }

  /** `http://host:port/path` for a path of the API; `ws:`/`wss:` when `ws` is set. */
  resolve(path: string, query?: CallOptions['query'], ws = false): string {
    const u = new URL(path.replace(/^\//, ''), `${this.url}/`);
    for (const [k, v] of Object.entries(query ?? {}))
      if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
    if (ws) u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    return u.toString();
  }

  headers(extra?: Record<string, string>, auth = true): Record<string, string> {
    const h: Record<string, string> = { [PROTOCOL_HEADER]: this.protocolVersion, ...extra };
    if (auth && this.apiKey) h[API_KEY_HEADER] = this.apiKey;
    return h;
  }

  async call<T>(method: string, path: string, opts: CallOptions = {}): Promise<HttpReply<T>> {
    const target = this.resolve(path, opts.query);
    const call = `${method} ${path}`;
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let res: Exchange;
    try {
      res = await exchange(
        target,
        method,
        this.headers(
          {
            ...opts.headers,
            ...(opts.rawBody !== undefined
              ? { 'content-type': 'application/octet-stream' }
              : opts.body !== undefined
                ? { 'content-type': 'application/json' }
                : {}),
          },
          opts.auth ?? true,
        ),
        opts.rawBody !== undefined ? opts.rawBody : opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
        signal,
      );
    } catch (e) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? e;
      const cause = e instanceof ExchangeError ? e.cause : e;
      throw new UnreachableError(
        this.url,
        e instanceof ExchangeError && e.phase === 'reply' ? `${call} (reading the reply)` : call,
        cause,
      );
    }
    const raw = res.body;
    const ok = (res.status >= 200 && res.status < 300) || (opts.accept ?? []).includes(res.status);
    if (!ok) throw httpFailure(this.url, res.status, errorBodyOf(res.status, raw), call);
    if (opts.binary) return { status: res.status, body: raw as T, headers: res.headers };
    const text = new TextDecoder().decode(raw);
    return { status: res.status, body: (text === '' ? null : JSON.parse(text)) as T, headers: res.headers };
  }

  async json<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    return (await this.call<T>(method, path, opts)).body;
  }
}

/** An error answer as the SDK's error: a protocol refusal becomes ProtocolMismatchError, the rest FabricHttpError. */
export function httpFailure(url: string, status: number, body: ErrorBody, call: string): Error {
  if (body.code === 'API_PROTOCOL_MISMATCH') {
    const d = body.details ?? {};
    return new ProtocolMismatchError(
      url,
      String(d.client ?? '?'),
      typeof d.server === 'string' ? d.server : null,
      `the server refused ${call}: ${body.message}`,
    );
  }
  return new FabricHttpError(status, body, call);
}

/** The fabric's error body, or one made up from the status when the reply is not one (a proxy's HTML page). */
export function errorBodyOf(status: number, raw: Uint8Array): ErrorBody {
  const text = new TextDecoder().decode(raw);
  try {
    const b = JSON.parse(text) as Partial<ErrorBody> & { error?: string };
    if (b && typeof b.code === 'string' && typeof b.message === 'string') return b as ErrorBody;
    if (b && typeof b.message === 'string') return { code: `HTTP_${status}`, message: b.message };
  } catch {
    // not JSON: fall through
  }
  const snippet = text.trim().slice(0, 200);
  return {
    code: `HTTP_${status}`,
    message: `the server answered HTTP ${status}${snippet ? `: ${snippet}` : ''}`,
    hint: "is the URL the fabric's API?",
  };
}

export function normalizeUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`fabric URL ${JSON.stringify(url)} is not a URL; expected e.g. http://127.0.0.1:8080`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new TypeError(`fabric URL ${JSON.stringify(url)} must start with http:// or https://`);
  return u.toString().replace(/\/+$/, '');
}
