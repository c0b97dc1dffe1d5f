// The status websocket (`GET /ws`, docs/http-api.md): one connection per Fabric client, shared by every request
// it follows. `subscribe` resolves once the server confirms the subscription, so a request submitted after it
// misses nothing. When the connection drops, it reconnects and subscribes again from the last cursor each
// subscription received (the server sends nothing twice). While nothing is followed the connection stays open but
// unreferenced, so it neither keeps the process alive nor costs a new handshake for the next request.
import WebSocket from 'ws';
import { FabricClientError, FabricHttpError, ProtocolError, UnreachableError } from './errors.js';
import type { FabricHttp } from './http.js';
import { errorBodyOf, httpFailure } from './http.js';
import { FINAL_STATUSES } from './status.js';
import type { ServerMessage, StatusMessage } from './wire.js';

export interface SubscriptionHandlers {
  message(m: StatusMessage): void;
  /**
   * The subscription cannot go on: the server refused it (FabricHttpError), the fabric went away for good
   * (UnreachableError), or it ended before a final status reached us (SubscriptionEndedError).
   */
  error(e: Error): void;
}

/** The server ended a subscription before this client saw the request's final status (ws `ended`). */
export class SubscriptionEndedError extends FabricClientError {
  constructor(
    readonly requestId: string,
    readonly reason: string,
  ) {
    super(
      `the status websocket ended the subscription to request ${requestId} (${reason}) before its final status arrived`,
    );
  }
}

/** What a subscription asks the server for (docs/http-api.md, "Status websocket"). */
export interface SubscribeOptions {
  /**
   * `binary`: a COMPLETED result comes as the binary frame after its message (`resultBytes` on the message). `stream`:
   * as `binary`, and a large result is announced while the agent writes it (RESULT_WRITING, with its `url`).
   */
  results?: 'inline' | 'binary' | 'stream';
  /** `final`: only LOG, STREAM, TRACE and the final status. */
  statuses?: 'all' | 'final';
}

interface Sub {
  requestId: string;
  handlers: SubscriptionHandlers;
  options: SubscribeOptions;
  cursor: string | null;
  confirmed: boolean;
  /** Resubscriptions after a server-side replay failure (`ended` with reason `failed`). */
  retries: number;
  onConfirmed: Array<{ resolve: () => void; reject: (e: Error) => void }>;
}

export interface StatusSocketOptions {
  /** Reconnect attempts after a drop before the subscriptions fail (backoff 100 ms doubling, capped at 2 s). */
  reconnectAttempts?: number;
}

export class StatusSocket {
  private ws: WebSocket | null = null;
  /** The TCP socket under `ws`: referenced only while something is followed. */
  private tcp: { ref(): unknown; unref(): unknown } | null = null;
  private opening: Promise<WebSocket> | null = null;
  private readonly subs = new Map<string, Sub>();
  private closed = false;
  /** A COMPLETED message with `binary: true` whose binary frame (the next frame on the socket) has not come yet. */
  private awaitingBinary: { sub: Sub; message: StatusMessage } | null = null;

  constructor(
    private readonly http: FabricHttp,
    private readonly opts: StatusSocketOptions = {},
  ) {}

  /** Follows a request; resolves when the server confirms. `since`: the last cursor already seen. */
  async subscribe(
    requestId: string,
    handlers: SubscriptionHandlers,
    since: string | null = null,
    options: SubscribeOptions = {},
  ): Promise<{ unsubscribe(): void }> {
    if (this.closed) throw new FabricClientError('this Fabric client is closed');
    if (this.subs.has(requestId))
      throw new FabricClientError(`request ${requestId} is already followed by this client`);
    const sub: Sub = { requestId, handlers, options, cursor: since, confirmed: false, retries: 0, onConfirmed: [] };
    this.subs.set(requestId, sub);
    const confirmed = new Promise<void>((resolve, reject) => sub.onConfirmed.push({ resolve, reject }));
    try {
      const ws = await this.connection();
      this.tcp?.ref();
      this.sendSubscribe(ws, sub);
      await confirmed;
    } catch (e) {
      this.drop(requestId);
      throw e;
    }
    return { unsubscribe: () => this.unsubscribe(requestId) };
  }

  unsubscribe(requestId: string): void {
    if (!this.subs.has(requestId)) return;
    this.drop(requestId);
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'unsubscribe', requestId }));
  }

  close(): void {
    this.closed = true;
    for (const s of [...this.subs.values()]) this.drop(s.requestId);
    this.ws?.close(1000);
    this.ws = null;
    this.tcp = null;
  }

  private drop(requestId: string): void {
    this.subs.delete(requestId);
    // A result frame still due keeps the socket referenced: unreferenced, the process could exit before it arrives.
    if (this.subs.size === 0 && this.awaitingBinary === null) this.tcp?.unref();
  }

  private sendSubscribe(ws: WebSocket, sub: Sub): void {
    ws.send(
      JSON.stringify({
        type: 'subscribe',
        requestId: sub.requestId,
        ...(sub.cursor === null ? {} : { since: sub.cursor }),
        ...(sub.options.results === undefined ? {} : { results: sub.options.results }),
        ...(sub.options.statuses === undefined ? {} : { statuses: sub.options.statuses }),
      }),
    );
  }

  private connection(): Promise<WebSocket> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) return Promise.resolve(this.ws);
    this.opening ??= this.open().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private open(): Promise<WebSocket> {
    const url = this.http.resolve('/ws', undefined, true);
    return new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(url, { headers: this.http.headers(), perMessageDeflate: false });
      let settled = false;
      ws.on('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          settled = true;
          reject(
            httpFailure(
              this.http.url,
              res.statusCode ?? 0,
              errorBodyOf(res.statusCode ?? 0, new Uint8Array(Buffer.concat(chunks))),
              'GET /ws',
            ),
          );
          ws.terminate();
        });
      });
      ws.once('upgrade', (res) => {
        this.tcp = res.socket;
      });
      ws.once('open', () => {
        settled = true;
        this.ws = ws;
        resolve(ws);
      });
      ws.on('error', (e) => {
        if (!settled) {
          settled = true;
          reject(new UnreachableError(this.http.url, 'opening the status websocket', e));
        }
      });
      ws.on('message', (data, isBinary) => this.onMessage(ws, data as Buffer, isBinary));
      ws.on('close', () => this.onClose(ws));
    });
  }

  private onMessage(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    const pending = this.awaitingBinary;
    if (pending !== null) {
      this.awaitingBinary = null;
      if (!isBinary) {
        this.failAll(new ProtocolError('the status websocket sent a message where a binary result was due'), ws);
        return;
      }
      if (this.subs.size === 0) this.tcp?.unref();
      pending.sub.handlers.message({
        ...pending.message,
        resultBytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
      });
      return;
    }
    let m: ServerMessage;
    try {
      if (isBinary) throw new Error('binary frame');
      m = JSON.parse(data.toString('utf8')) as ServerMessage;
    } catch (e) {
      this.failAll(
        new ProtocolError(`the status websocket sent something that is not a JSON message (${(e as Error).message})`),
        ws,
      );
      return;
    }
    if (m.type === 'subscribed') {
      const s = this.subs.get(m.requestId);
      if (!s) return;
      s.confirmed = true;
      for (const w of s.onConfirmed.splice(0)) w.resolve();
    } else if (m.type === 'status') {
      const s = this.subs.get(m.requestId);
      if (!s) return;
      s.cursor = m.cursor;
      if (m.binary === true) this.awaitingBinary = { sub: s, message: m };
      if (FINAL_STATUSES.has(m.status)) this.drop(m.requestId);
      if (m.binary !== true) s.handlers.message(m);
    } else if (m.type === 'ended') {
      const s = this.subs.get(m.requestId);
      if (!s) return;
      if (m.reason === 'failed' && s.retries < 3) {
        // The server could not read the replay: subscribe again from the last cursor seen.
        s.retries++;
        setTimeout(
          () => this.subs.get(m.requestId) === s && this.ws === ws && this.sendSubscribe(ws, s),
          100 * s.retries,
        ).unref();
        return;
      }
      this.drop(m.requestId);
      const err = new SubscriptionEndedError(m.requestId, m.reason);
      for (const w of s.onConfirmed.splice(0)) w.reject(err);
      if (s.confirmed) s.handlers.error(err);
    } else if (m.type === 'error') {
      const err = new FabricHttpError(
        0,
        {
          code: m.code,
          message: m.message,
          ...(m.hint ? { hint: m.hint } : {}),
          ...(m.details ? { details: m.details } : {}),
        },
        'status websocket',
      );
      if (m.requestId !== undefined) {
        const s = this.subs.get(m.requestId);
        if (!s) return;
        this.drop(m.requestId);
        for (const w of s.onConfirmed.splice(0)) w.reject(err);
        if (s.confirmed) s.handlers.error(err);
      } else this.failAll(err, ws);
    }
  }

  private onClose(ws: WebSocket): void {
    if (this.ws !== ws) return;
    // A COMPLETED whose binary frame never came: its subscription is dropped already; the request is read again.
    const pending = this.awaitingBinary;
    this.awaitingBinary = null;
    pending?.sub.handlers.error(
      new SubscriptionEndedError(pending.sub.requestId, 'the connection closed before the result frame'),
    );
    this.ws = null;
    this.tcp = null;
    if (this.closed || this.subs.size === 0) return;
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const attempts = this.opts.reconnectAttempts ?? 6;
    let lastError: unknown = null;
    for (let i = 0; i < attempts; i++) {
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** i)));
      if (this.closed || this.subs.size === 0) return;
      try {
        const ws = await this.connection();
        for (const s of this.subs.values()) this.sendSubscribe(ws, s);
        return;
      } catch (e) {
        lastError = e;
        if (!(e instanceof UnreachableError)) break;
      }
    }
    this.failAll(
      lastError instanceof Error
        ? lastError
        : new UnreachableError(this.http.url, 'reconnecting the status websocket', lastError),
      null,
    );
  }

  private failAll(e: Error, ws: WebSocket | null): void {
    const subs = [...this.subs.values()];
    this.subs.clear();
    for (const s of subs) {
      for (const w of s.onConfirmed.splice(0)) w.reject(e);
      if (s.confirmed) s.handlers.error(e);
    }
    if (ws) ws.terminate();
    if (this.ws === ws) {
      this.ws = null;
      this.tcp = null;
    }
  }
}
