// One status websocket: parses the client's messages, holds its subscriptions and its cluster watch, and sends
// status messages in order (a COMPLETED whose result is read for inlining holds back what follows it).
import type { RawData, WebSocket } from 'ws';
import type { RouteDeps } from '../../http/deps.js';
import type { Identity } from '../../auth/keys.js';
import { API_PROTOCOL_VERSION } from '../../protocol/api-version.js';
import { FabricError, isFabricError } from '../../protocol/errors.js';
import { fabricVersion } from '../../http/fabric-version.js';
import { resultField } from '../results/result-field.js';
import { parseCursor } from '../status/cursor.js';
import type { Draft } from '../status/messages.js';
import { clientMessage } from './client-messages.js';
import type { StatusHub } from './hub.js';
import type { EndReason, RequestSubscription } from './subscription.js';

/** Whether `me` may read a request submitted by `submitter`. */
export function mayRead(me: Identity, submitter: string): boolean {
  return !me.auth || me.tags.operator || me.actor === submitter;
}

export class StatusConnection {
  private readonly subs = new Map<string, RequestSubscription>();
  private unwatch: (() => void) | undefined;
  private chain: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly me: Identity,
    private readonly hub: StatusHub,
    private readonly deps: RouteDeps,
  ) {
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('close', () => this.close());
    ws.on('error', (e) => deps.ctx.log.debug({ err: e }, 'status websocket error'));
    this.write({ type: 'hello', protocol: API_PROTOCOL_VERSION, fabric: fabricVersion(), actor: me.actor });
  }

  private refuse(code: string, message: string, extra: Record<string, unknown> = {}): void {
    this.write({ type: 'error', code, message, ...extra });
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    let parsed: unknown;
    try {
      if (isBinary) throw new Error('binary frames are not messages; send JSON text');
      parsed = JSON.parse(data.toString());
    } catch (e) {
      this.refuse('WS_BAD_MESSAGE', `not a JSON message: ${(e as Error).message}`, { hint: 'send e.g. {"type":"subscribe","requestId":"r-01"}' });
      return;
    }
    const r = clientMessage.safeParse(parsed);
    if (!r.success) {
      const i = r.error.issues[0]!;
      const path = i.path.join('.');
      this.refuse('WS_BAD_MESSAGE', `${path === '' ? 'message' : path}: ${i.message}`, { hint: 'types: subscribe {requestId, since?}, unsubscribe {requestId}, watch {topic: "cluster"}, ping' });
      return;
    }
    const m = r.data;
    try {
      switch (m.type) {
        case 'ping':
          this.write({ type: 'pong', at: new Date(this.deps.ctx.clock()).toISOString() });
          return;
        case 'watch':
          this.unwatch ??= this.hub.watch({ changed: (position) => this.write({ type: 'changed', topic: 'cluster', position }) });
          this.write({ type: 'watching', topic: 'cluster' });
          return;
        case 'unsubscribe': {
          const sub = this.subs.get(m.requestId);
          if (sub !== undefined) this.hub.drop(sub);
          this.subs.delete(m.requestId);
          this.write({ type: 'unsubscribed', requestId: m.requestId });
          return;
        }
        case 'subscribe':
          this.subscribe(m.requestId, m.since);
          return;
      }
    } catch (e) {
      if (isFabricError(e)) this.write({ type: 'error', ...e.toBody(), requestId: (m as { requestId?: string }).requestId });
      else {
        this.deps.ctx.log.error({ err: e }, `status websocket: ${m.type} failed`);
        this.refuse('API_INTERNAL', `internal error: ${(e as Error).message}`);
      }
    }
  }

  private subscribe(requestId: string, since: string | number | undefined): void {
    const cursor = since === undefined ? null : parseCursor(since);
    const old = this.subs.get(requestId);
    if (old !== undefined) {
      this.hub.drop(old);
      this.subs.delete(requestId);
    }
    if (this.subs.size >= this.deps.config.wsMaxSubscriptions) {
      throw new FabricError('WS_TOO_MANY_SUBSCRIPTIONS', 429, `a websocket may follow at most ${this.deps.config.wsMaxSubscriptions} requests at once`, { hint: 'unsubscribe from finished ones, or open another socket' });
    }
    const sub = this.hub.subscribe(requestId, cursor, { send: (d) => this.send(d), ended: (s, reason) => this.ended(s, reason) }, (submitter) => mayRead(this.me, submitter));
    if (sub === undefined) throw forbidden(requestId, this.me);
    this.subs.set(requestId, sub);
    this.write({ type: 'subscribed', requestId, since: since === undefined ? null : String(since) });
  }

  private ended(sub: RequestSubscription, reason: EndReason): void {
    if (this.subs.get(sub.requestId) === sub) this.subs.delete(sub.requestId);
    const msg = reason === 'forbidden' ? { type: 'error', ...forbidden(sub.requestId, this.me).toBody(), requestId: sub.requestId } : { type: 'ended', requestId: sub.requestId, reason };
    this.enqueue(async () => msg);
  }

  private send(d: Draft): void {
    if (d.result === undefined && this.chain === undefined) {
      this.write(d.msg);
      return;
    }
    const result = d.result;
    this.enqueue(async () => (result === undefined ? d.msg : { ...d.msg, ...(await resultField(this.deps, d.msg.requestId, result)) }));
  }

  private enqueue(make: () => Promise<object>): void {
    const next = (this.chain ?? Promise.resolve()).then(async () => {
      this.write(await make());
    });
    const settled = next.catch((e) => this.deps.ctx.log.error({ err: e }, 'status websocket: a message could not be sent'));
    this.chain = settled.then(() => {
      if (this.chain === tail) this.chain = undefined;
    });
    const tail = this.chain;
  }

  private write(msg: object): void {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return;
    if (this.ws.bufferedAmount > this.deps.config.wsMaxBufferedBytes) {
      this.deps.ctx.log.warn({ actor: this.me.actor, buffered: this.ws.bufferedAmount }, 'status websocket closed: the client does not read its messages');
      this.ws.close(1013, 'too many unread messages');
      this.close();
      return;
    }
    this.ws.send(JSON.stringify(msg));
    this.observeNotify(msg);
  }

  /** A live status message: from its event's append (`at`) to now is the request's notify phase. */
  private observeNotify(msg: object): void {
    const metrics = this.deps.ctx.metrics;
    const m = msg as { type?: unknown; replay?: unknown; at?: unknown; requestId?: unknown };
    if (metrics === undefined || m.type !== 'status' || m.replay !== false || typeof m.at !== 'string' || typeof m.requestId !== 'string') return;
    const model = this.deps.ctx.view.state.requests.byId.get(m.requestId)?.modelKey;
    if (model !== undefined) metrics.requests.observe('notify', model, (this.deps.ctx.clock() - Date.parse(m.at)) / 1000);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const sub of this.subs.values()) this.hub.drop(sub);
    this.subs.clear();
    this.unwatch?.();
  }
}

export function forbidden(requestId: string, me: Identity): FabricError {
  return new FabricError('API_REQUEST_FORBIDDEN', 403, `request ${requestId} belongs to another API key; ${me.actor} may read only its own requests`, {
    hint: 'read it with the key that submitted it, or an operator key',
    details: { requestId },
  });
}

