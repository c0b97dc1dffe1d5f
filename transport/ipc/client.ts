// The agent's end of the IPC transport: a Transport whose broker is in another process (the control plane), over
// a Unix socket. Same contract as the in-process and Kafka adapters: input is checked here the same way before
// anything is sent; publishes are appended in call order; handlers answer each delivery, and only an answered
// delivery is committed. When the socket closes (the control plane went away) every pending call fails with
// TRANSPORT_UNAVAILABLE, the transport counts as closed, and `onDisconnect` is told.
import { createConnection, type Socket } from 'node:net';
import { FabricError } from '../../protocol/errors.js';
import { transportClosed, TransportErrorCode } from '../errors.js';
import type {
  BatchHandler,
  MessageHandler,
  OutgoingMessage,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportMessage,
} from '../port.js';
import { checkGroup, checkMessages, checkTopic, DEFAULT_MAX_MESSAGE_BYTES } from '../validate.js';
import { FrameReader, splitValues, writeFrame, type Frame } from './frames.js';
import type { ErrorWire, ServerFrame } from './wire.js';

export interface IpcTransportOptions {
  /** The server's socket path. */
  path: string;
  maxMessageBytes?: number;
  /** Called once when the connection is lost without close() having been called. */
  onDisconnect?(error: Error): void;
}

interface LocalSub {
  deliver(messages: TransportMessage[]): Promise<void>;
  options: SubscribeOptions;
}

function unavailable(path: string, why: string): FabricError {
  return new FabricError(TransportErrorCode.Unavailable, 503, `the IPC transport at ${path} is unavailable: ${why}`, {
    hint: 'the control-plane process that serves the socket is gone or not started; an agent exits and is started again',
    details: { path },
  });
}

function fromWire(e: ErrorWire): FabricError {
  return new FabricError(e.code, e.httpStatus, e.message, { hint: e.hint, details: e.details });
}

export class IpcTransport implements Transport {
  readonly kind = 'ipc' as const;
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  private readonly subs = new Map<number, LocalSub>();
  private readonly open = new Set<Subscription>();
  private readonly maxMessageBytes: number;
  private nextId = 1;
  private closed = false;
  private lost: FabricError | undefined;

  private constructor(
    private readonly socket: Socket,
    private readonly options: IpcTransportOptions,
  ) {
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const reader = new FrameReader();
    socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = reader.push(chunk);
      } catch (e) {
        socket.destroy(e as Error);
        return;
      }
      for (const f of frames) this.handle(f);
    });
    socket.on('error', () => {});
    socket.on('close', () => this.onClose());
  }

  static connect(options: IpcTransportOptions): Promise<IpcTransport> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(options.path);
      socket.once('error', (e) => reject(unavailable(options.path, e.message)));
      socket.once('connect', () => {
        socket.removeAllListeners('error');
        resolve(new IpcTransport(socket, options));
      });
    });
  }

  private onClose(): void {
    const wasOpen = !this.closed;
    this.closed = true;
    const error = wasOpen
      ? unavailable(this.options.path, 'the connection closed')
      : transportClosed('call the server');
    this.lost ??= error;
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
    this.subs.clear();
    this.open.clear();
    if (wasOpen) this.options.onDisconnect?.(error);
  }

  private call(header: Record<string, unknown>, values: readonly Uint8Array[] = []): Promise<void> {
    if (this.lost !== undefined) return Promise.reject(this.lost);
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      writeFrame(this.socket, { ...header, id }, values);
    });
  }

  private handle(frame: Frame): void {
    const h = frame.header as unknown as ServerFrame;
    if (h.t === 'ok' || h.t === 'err') {
      const p = this.pending.get(h.id);
      if (p === undefined) return;
      this.pending.delete(h.id);
      if (h.t === 'ok') p.resolve();
      else p.reject(fromWire(h.error));
      return;
    }
    if (h.t === 'dlv') {
      let values: Buffer[];
      try {
        values = splitValues(
          frame.body,
          h.msgs.map((m) => m.n),
        );
      } catch (e) {
        this.socket.destroy(e as Error);
        return;
      }
      const messages: TransportMessage[] = h.msgs.map((m, i) => ({
        topic: m.topic,
        partition: m.partition,
        offset: m.offset,
        key: m.key,
        value: values[i],
        headers: m.headers,
        timestamp: m.timestamp,
      }));
      const sub = this.subs.get(h.sub);
      const answer = (ok: boolean, error?: unknown) => {
        if (this.lost !== undefined) return;
        writeFrame(
          this.socket,
          ok
            ? { t: 'done', d: h.d, ok }
            : { t: 'done', d: h.d, ok, error: error instanceof Error ? error.message : String(error) },
        );
      };
      if (sub === undefined) {
        answer(false, 'the subscription is closed');
        return;
      }
      sub.deliver(messages).then(
        () => answer(true),
        (e: unknown) => {
          try {
            sub.options.onError?.(e, messages);
          } catch {
            /* a failing error callback must not stop delivery */
          }
          answer(false, e);
        },
      );
      return;
    }
    this.socket.destroy();
  }

  async publish(topic: string, messages: OutgoingMessage | readonly OutgoingMessage[]): Promise<void> {
    if (this.closed) throw this.lost?.code === TransportErrorCode.Unavailable ? this.lost : transportClosed('publish');
    checkTopic(topic);
    const list = checkMessages(messages, this.maxMessageBytes);
    await this.call(
      {
        t: 'pub',
        topic,
        msgs: list.map((m) =>
          m.headers === undefined
            ? { key: m.key, n: m.value.byteLength }
            : { key: m.key, headers: m.headers, n: m.value.byteLength },
        ),
      },
      list.map((m) => m.value),
    );
  }

  subscribe(
    topic: string,
    groupId: string,
    handler: MessageHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join(topic, groupId, false, (ms) => handler(ms[0]), options);
  }

  subscribeBatch(
    topic: string,
    groupId: string,
    handler: BatchHandler,
    options: SubscribeOptions = {},
  ): Promise<Subscription> {
    return this.join(topic, groupId, true, handler, options);
  }

  private async join(
    topic: string,
    groupId: string,
    batch: boolean,
    deliver: (ms: TransportMessage[]) => Promise<void>,
    options: SubscribeOptions,
  ): Promise<Subscription> {
    if (this.closed)
      throw this.lost?.code === TransportErrorCode.Unavailable ? this.lost : transportClosed('subscribe');
    checkTopic(topic);
    checkGroup(groupId);
    const sub = this.nextId++;
    this.subs.set(sub, { deliver, options });
    try {
      await this.call({
        t: 'sub',
        sub,
        topic,
        group: groupId,
        batch,
        fromBeginning: options.fromBeginning,
        retryDelayMs: options.retryDelayMs,
        maxRetryDelayMs: options.maxRetryDelayMs,
      });
    } catch (e) {
      this.subs.delete(sub);
      throw e;
    }
    let closing: Promise<void> | undefined;
    const subscription: Subscription = {
      topic,
      groupId,
      close: () =>
        (closing ??= (
          this.lost !== undefined ? Promise.resolve() : this.call({ t: 'unsub', sub }).catch(() => undefined)
        ).finally(() => {
          this.subs.delete(sub);
          this.open.delete(subscription);
        })),
    };
    this.open.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.open].map((s) => s.close()));
    this.closed = true;
    await new Promise<void>((resolve) => {
      if (this.socket.destroyed) return resolve();
      this.socket.once('close', () => resolve());
      this.socket.end();
    });
  }
}
