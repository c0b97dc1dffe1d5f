// One status websocket: parses the client's messages, holds its subscriptions and its cluster watch, and sends
// status messages in order (a COMPLETED whose result is read for inlining holds back what follows it).
import * as wsLib from 'ws';
import type { RawData, WebSocket } from 'ws';
import type { RouteDeps } from '../../http/deps.js';
import type { Identity } from '../../auth/keys.js';
import { API_PROTOCOL_VERSION } from '../../protocol/api-version.js';
import { FabricError, isFabricError } from '../../protocol/errors.js';
import { fabricVersion } from '../../http/fabric-version.js';
import { resultField, resultUrl, type ResultRef } from '../results/result-field.js';
import { parseCursor } from '../status/cursor.js';
import { messagesOf, type Draft } from '../status/messages.js';
import { performance } from 'node:perf_hooks';
import { candidateRequestIds } from '../../http/request-ids.js';
import { requestStream } from '../../domain/shared/ids.js';
import { Fifo } from '../../protocol/fifo.js';
import { clientMessage } from './client-messages.js';
import type { StatusHub } from './hub.js';
import type { EndReason, RequestSubscription } from './subscription.js';

/** Operators, and the only caller when auth is off: they see every key's requests. */
export function seesAll(me: Identity): boolean {
  return !me.auth || me.tags.operator;
}

/** Whether `me` may read a request submitted by `submitter`. */
export function mayRead(me: Identity, submitter: string): boolean {
  return seesAll(me) || me.actor === submitter;
}

/** The TCP socket under a websocket: corked while a batch of messages is written, so they leave in one write. */
export interface Corkable {
  cork(): void;
  uncork(): void;
  write(chunk: Uint8Array): boolean;
}

const FRAME_OPTIONS = { fin: true, rsv1: false, opcode: 1, mask: false, readOnly: false } as const;
const BINARY_FRAME_OPTIONS = { fin: true, rsv1: false, opcode: 2, mask: false, readOnly: true } as const;
/** Frames at least this large are written as they are, not concatenated into a burst. */
const LARGE_FRAME_BYTES = 64 * 1024;
/** ws's frame builder (exported by its ES module entry; not in its type declarations). */
const Sender = (
  wsLib as unknown as {
    Sender: { frame(data: Buffer, options: typeof FRAME_OPTIONS | typeof BINARY_FRAME_OPTIONS): Buffer[] };
  }
).Sender;

/** Longest stretch of writing queued messages before the connection lets the event loop turn. */
const OUTBOX_SLICE_MS = 4;

/** Statuses a `statuses: "final"` subscription is not sent. */
const PROGRESS_STATUSES: ReadonlySet<string> = new Set([
  'RECEIVED',
  'QUEUED',
  'PROVISIONING',
  'DEPLOYING',
  'DISPATCHED',
  'RUNNING',
]);

/** What a subscription asked for (docs/http-api.md, "Status websocket"). */
interface SubscriptionOptions {
  binary: boolean;
  finalOnly: boolean;
  /** `results: "stream"`: told of results while they are written. */
  stream: boolean;
  /** The result last announced by RESULT_WRITING: its COMPLETED does not carry it again. */
  announced?: string;
}

/** A message followed by one binary frame (a COMPLETED result, on a `results: "binary"` subscription). */
class WithBinary {
  constructor(
    readonly msg: object,
    readonly data: Buffer,
  ) {}
}

export class StatusConnection {
  private readonly subs = new Map<string, RequestSubscription>();
  private readonly subOptions = new Map<string, SubscriptionOptions>();
  private unwatch: (() => void) | undefined;
  private readonly outbox = new Fifo<object | (() => Promise<object | WithBinary>)>();
  private flushing = false;
  private closed = false;
  private notified: { at: string; requestId: string } = { at: '', requestId: '' };
  /** A message still being handled (an operator's subscription resolved against the log): later ones wait for it. */
  private handling: Promise<void> | undefined;

  constructor(
    private readonly ws: WebSocket,
    private readonly me: Identity,
    private readonly hub: StatusHub,
    private readonly deps: RouteDeps,
    private readonly socket: Partial<Corkable> = {},
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
    // Messages are handled in the order they came: one behind a message still being handled waits for it.
    const handled =
      this.handling === undefined ? this.handle(data, isBinary) : this.handling.then(() => this.handle(data, isBinary));
    if (handled === undefined) return;
    const settled: Promise<void> = handled.finally(() => {
      if (this.handling === settled) this.handling = undefined;
    });
    this.handling = settled;
  }

  /** Handles one message; a promise when its answer needs a read of the log first. */
  private handle(data: RawData, isBinary: boolean): Promise<void> | undefined {
    if (this.closed) return;
    let parsed: unknown;
    try {
      if (isBinary) throw new Error('binary frames are not messages; send JSON text');
      parsed = JSON.parse(data.toString());
    } catch (e) {
      this.refuse('WS_BAD_MESSAGE', `not a JSON message: ${(e as Error).message}`, {
        hint: 'send e.g. {"type":"subscribe","requestId":"r-01"}',
      });
      return;
    }
    const r = clientMessage.safeParse(parsed);
    if (!r.success) {
      const i = r.error.issues[0]!;
      const path = i.path.join('.');
      this.refuse('WS_BAD_MESSAGE', `${path === '' ? 'message' : path}: ${i.message}`, {
        hint: 'types: subscribe {requestId, since?}, unsubscribe {requestId}, watch {topic: "cluster"}, ping',
      });
      return;
    }
    const m = r.data;
    try {
      switch (m.type) {
        case 'ping':
          this.write({ type: 'pong', at: new Date(this.deps.ctx.clock()).toISOString() });
          return;
        case 'watch':
          this.unwatch ??= this.hub.watch({
            changed: (position) => this.write({ type: 'changed', topic: 'cluster', position }),
          });
          this.write({ type: 'watching', topic: 'cluster' });
          return;
        case 'unsubscribe': {
          const sub = this.subs.get(m.requestId);
          if (sub !== undefined) this.hub.drop(sub);
          this.subs.delete(m.requestId);
          this.subOptions.delete(m.requestId);
          this.write({ type: 'unsubscribed', requestId: m.requestId });
          return;
        }
        case 'subscribe': {
          const options: SubscriptionOptions = {
            binary: m.results === 'binary' || m.results === 'stream',
            finalOnly: m.statuses === 'final',
            stream: m.results === 'stream',
          };
          const cursor = m.since === undefined ? null : parseCursor(m.since);
          const known = this.knownId(m.requestId);
          if (known !== undefined) {
            this.subscribe(m.requestId, known, cursor, m.since, options);
            return;
          }
          return this.loggedId(m.requestId)
            .then((recorded) => {
              if (!this.closed) this.subscribe(m.requestId, recorded, cursor, m.since, options);
            })
            .catch((e: unknown) => this.failed(e, m));
        }
      }
    } catch (e) {
      this.failed(e, m);
    }
  }

  private failed(e: unknown, m: { type: string }): void {
    if (isFabricError(e))
      this.write({ type: 'error', ...e.toBody(), requestId: (m as { requestId?: string }).requestId });
    else {
      this.deps.ctx.log.error({ err: e }, `status websocket: ${m.type} failed`);
      this.refuse('API_INTERNAL', `internal error: ${(e as Error).message}`);
    }
  }

  /**
   * The recorded id a subscription by `name` follows, where the live view decides it: the caller's own scope; for
   * an operator a full id the view holds. Undefined when only the log can tell (an operator's name that neither
   * scope holds in the view: a request finished and evicted from it, or one not submitted yet).
   */
  private knownId(name: string): string | undefined {
    const [own, full] = candidateRequestIds(this.me, name);
    const byId = this.deps.ctx.view.state.requests.byId;
    if (full === undefined || byId.has(own!)) return own!;
    return byId.has(full) ? full : undefined;
  }

  /** An operator's name looked up in the log: its own scope's request, else the full id's, else its own scope. */
  private async loggedId(name: string): Promise<string> {
    const [own, full] = candidateRequestIds(this.me, name) as [string, string];
    const store = this.deps.ctx.store;
    if ((await store.readStream(requestStream(own), { limit: 1 })).length > 0) return own;
    return (await store.readStream(requestStream(full), { limit: 1 })).length > 0 ? full : own;
  }

  private subscribe(
    requestId: string,
    recorded: string,
    cursor: ReturnType<typeof parseCursor> | null,
    since: string | number | undefined,
    options: SubscriptionOptions,
  ): void {
    const old = this.subs.get(requestId);
    if (old !== undefined) {
      this.hub.drop(old);
      this.subs.delete(requestId);
    }
    if (this.subs.size >= this.deps.config.wsMaxSubscriptions) {
      throw new FabricError(
        'WS_TOO_MANY_SUBSCRIPTIONS',
        429,
        `a websocket may follow at most ${this.deps.config.wsMaxSubscriptions} requests at once`,
        { hint: 'unsubscribe from finished ones, or open another socket' },
      );
    }
    const sub = this.hub.subscribe(
      recorded,
      cursor,
      { send: (d) => this.send(d, requestId), ended: (s, reason) => this.ended(s, reason, requestId) },
      (submitter) => mayRead(this.me, submitter),
    );
    if (sub === undefined) throw forbidden(requestId, this.me);
    this.subs.set(requestId, sub);
    this.subOptions.set(requestId, options);
    this.write({ type: 'subscribed', requestId, since: since === undefined ? null : String(since) });
  }

  private ended(sub: RequestSubscription, reason: EndReason, name: string): void {
    if (this.subs.get(name) === sub) {
      this.subs.delete(name);
      this.subOptions.delete(name);
    }
    this.push(
      reason === 'forbidden'
        ? { type: 'error', ...forbidden(name, this.me).toBody(), requestId: name }
        : { type: 'ended', requestId: name, reason },
    );
  }

  /** Sends a draft's messages naming the request as the client subscribed to it. */
  private send(d: Draft, name: string): void {
    const named = (m: Draft['msg']) => (m.requestId === name ? m : { ...m, requestId: name });
    const result = d.result;
    const options = this.subOptions.get(name);
    if (d.writing !== undefined) {
      // Only a client that reads results while they are written is told; its URL names the recorded id.
      if (options?.stream !== true) return;
      options.announced = d.writing.ref;
      this.push(named({ ...d.msg, ...resultUrl(this.deps, d.msg.requestId, d.writing) }));
      return;
    }
    if (result !== undefined && options?.announced === result.ref) {
      // The client is reading it already (the message has its size and sha256); the URL again in case that read failed.
      this.push(named({ ...d.msg, streamed: true, ...resultUrl(this.deps, d.msg.requestId, result) }));
      return;
    }
    if (result !== undefined) {
      if (options?.binary === true && result.bytes <= this.deps.config.wsBinaryResultMaxBytes) {
        this.push(() => this.binaryResult(named(d.msg), result));
        return;
      }
      // The result's URL names the recorded id (a signed URL needs no key).
      this.push(async () => named({ ...d.msg, ...(await resultField(this.deps, d.msg.requestId, result)) }));
      return;
    }
    if (options?.finalOnly === true && PROGRESS_STATUSES.has((d.msg as { status?: string }).status ?? '')) return;
    for (const m of messagesOf(d)) this.push(named(m));
  }

  /**
   * A COMPLETED message with `binary: true` and the result container as the binary frame right after it. The blob's
   * sha256 is not computed here: the message carries it and the client checks the bytes against it. A blob that
   * cannot be read is shown by URL with the reason, as for inlining.
   */
  private async binaryResult(msg: Draft['msg'], r: ResultRef): Promise<object | WithBinary> {
    const weights = r.weightsFingerprint === undefined ? {} : { weightsFingerprint: r.weightsFingerprint };
    try {
      const blob = await this.deps.ctx.blobs.get(r.ref, { sha256: false });
      return new WithBinary({ ...msg, bytes: r.bytes, sha256: r.sha256, ...weights, binary: true }, blob.bytes);
    } catch {
      return { ...msg, ...(await resultField(this.deps, msg.requestId, r)) };
    }
  }

  /**
   * Status messages go out in order through one outbox: a message whose result is read for inlining holds back
   * what follows it, and a burst (a batch of 1000 log lines is 1000 LOG messages) is written corked, a few ms of
   * it per turn of the event loop, so it neither costs a system call per message nor holds up the process.
   */
  private push(item: object | (() => Promise<object | WithBinary>)): void {
    this.outbox.push(item);
    if (this.flushing) return;
    // Flushed after the current run of code, so the messages of one event (a batch's lines) go out together.
    this.flushing = true;
    queueMicrotask(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    // A burst is framed here and leaves as one buffer per slice (one system call with one copy): a writev of two
    // small buffers per message (what ws.send does on a corked socket) cost the process ~5 µs a message in the
    // kernel. Frames are whole, so ws's own frames (pings, close) never interleave inside them.
    const frames: Buffer[] = [];
    const drain = () => {
      if (frames.length === 0) return;
      if (frames.length === 1 || !frames.some((f) => f.byteLength >= LARGE_FRAME_BYTES)) {
        this.socket.write!(frames.length === 1 ? frames[0]! : Buffer.concat(frames));
      } else {
        // A result's bytes are not copied into the burst: the small frames around them are, and the socket, corked,
        // writes the pieces with one writev.
        this.socket.cork?.();
        let small: Buffer[] = [];
        for (const f of frames) {
          if (f.byteLength < LARGE_FRAME_BYTES) {
            small.push(f);
            continue;
          }
          if (small.length > 0) this.socket.write!(Buffer.concat(small));
          small = [];
          this.socket.write!(f);
        }
        if (small.length > 0) this.socket.write!(Buffer.concat(small));
        this.socket.uncork?.();
      }
      frames.length = 0;
    };
    const direct = typeof this.socket.write === 'function' && Object.keys(this.ws.extensions ?? {}).length === 0;
    try {
      let sliceStart = performance.now();
      for (let item = this.outbox.take(); item !== undefined; item = this.outbox.take()) {
        if (typeof item === 'function') {
          drain();
          const m = await item().catch((e: unknown) => {
            this.deps.ctx.log.error({ err: e }, 'status websocket: a message could not be sent');
            return undefined;
          });
          // Framed, with what follows (the subscription's `ended`), so they leave together.
          if (m instanceof WithBinary) {
            if (direct) {
              this.frame(m.msg, frames);
              if (this.writable()) frames.push(...Sender.frame(m.data, BINARY_FRAME_OPTIONS));
            } else {
              this.write(m.msg);
              if (this.writable()) this.ws.send(m.data, { binary: true });
            }
          } else if (m !== undefined) {
            if (direct) this.frame(m, frames);
            else this.write(m);
          }
          sliceStart = performance.now();
          continue;
        }
        if ((direct && this.outbox.size > 0) || frames.length > 0) this.frame(item, frames);
        else this.write(item);
        if (performance.now() - sliceStart > OUTBOX_SLICE_MS) {
          drain();
          await new Promise((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
    } finally {
      drain();
      this.flushing = false;
    }
    if (this.outbox.size > 0) void this.flush();
  }

  /** Whether the connection can take another message (else it is closed: a client that does not read). */
  private writable(): boolean {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return false;
    if (this.ws.bufferedAmount > this.deps.config.wsMaxBufferedBytes) {
      this.deps.ctx.log.warn(
        { actor: this.me.actor, buffered: this.ws.bufferedAmount },
        'status websocket closed: the client does not read its messages',
      );
      this.ws.close(1013, 'too many unread messages');
      this.close();
      return false;
    }
    return true;
  }

  /** Appends `msg` as a websocket text frame (server frames are not masked) to `frames`. */
  private frame(msg: object, frames: Buffer[]): void {
    if (!this.writable()) return;
    for (const b of Sender.frame(Buffer.from(JSON.stringify(msg)), FRAME_OPTIONS)) frames.push(b);
    this.observeNotify(msg);
  }

  private write(msg: object): void {
    if (!this.writable()) return;
    this.ws.send(JSON.stringify(msg));
    this.observeNotify(msg);
  }

  /** A live status message: from its event's append (`at`) to now is the request's notify phase. */
  private observeNotify(msg: object): void {
    const metrics = this.deps.ctx.metrics;
    const m = msg as { type?: unknown; replay?: unknown; at?: unknown; requestId?: unknown };
    if (
      metrics === undefined ||
      m.type !== 'status' ||
      m.replay !== false ||
      typeof m.at !== 'string' ||
      typeof m.requestId !== 'string'
    )
      return;
    // The messages of one event (a batch of log lines) share its time: it is observed once.
    if (m.at === this.notified.at && m.requestId === this.notified.requestId) return;
    this.notified = { at: m.at, requestId: m.requestId };
    const byId = this.deps.ctx.view.state.requests.byId;
    const model = candidateRequestIds(this.me, m.requestId)
      .map((id) => byId.get(id)?.modelKey)
      .find((x) => x !== undefined);
    if (model !== undefined)
      metrics.requests.observe('notify', model, (this.deps.ctx.clock() - Date.parse(m.at)) / 1000);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const sub of this.subs.values()) this.hub.drop(sub);
    this.subs.clear();
    this.subOptions.clear();
    this.unwatch?.();
  }
}

export function forbidden(requestId: string, me: Identity): FabricError {
  return new FabricError(
    'API_REQUEST_FORBIDDEN',
    403,
    `request ${requestId} belongs to another API key; ${me.actor} may read only its own requests`,
    {
      hint: 'read it with the key that submitted it, or an operator key',
      details: { requestId },
    },
  );
}
