// The control plane's end of the IPC transport: a Unix-socket server in front of an InProcessBroker. Each
// connection (an agent process) gets its own InProcessTransport on the broker, so its subscriptions are
// ordinary group members: a message is committed only after the client's handler answered `done ok`, and a
// connection that closes (the agent died) leaves every message it had not finished uncommitted, for the
// group's next member.
import { createServer, type Server, type Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { isFabricError } from '../../protocol/errors.js';
import type { InProcessBroker } from '../inprocess/broker.js';
import { InProcessTransport } from '../inprocess/transport.js';
import type { Subscription, TransportMessage } from '../port.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../validate.js';
import { FrameReader, splitValues, writeFrame, type Frame } from './frames.js';
import type { ClientFrame, DeliveredMeta, ErrorWire, OutgoingMeta } from './wire.js';

export interface IpcServerOptions {
  /** Socket path (at most ~100 bytes on Linux); an existing file there is replaced. */
  path: string;
  broker: InProcessBroker;
  maxMessageBytes?: number;
}

function errorWire(e: unknown): ErrorWire {
  if (isFabricError(e))
    return { code: e.code, httpStatus: e.httpStatus, message: e.message, hint: e.hint, details: e.details };
  return { code: 'TRANSPORT_UNAVAILABLE', httpStatus: 503, message: e instanceof Error ? e.message : String(e) };
}

class Connection {
  private readonly transport: InProcessTransport;
  private readonly subs = new Map<number, Subscription>();
  private readonly deliveries = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  private nextDelivery = 1;
  private closed = false;

  constructor(
    private readonly socket: Socket,
    broker: InProcessBroker,
    maxMessageBytes: number,
  ) {
    this.transport = new InProcessTransport({ broker, maxMessageBytes });
    const reader = new FrameReader();
    socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = reader.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const f of frames) this.handle(f);
    });
    socket.on('close', () => void this.shutdown());
    socket.on('error', () => {});
  }

  private reply(header: object): void {
    if (!this.closed && !this.socket.destroyed) writeFrame(this.socket, header);
  }

  private handle(frame: Frame): void {
    const h = frame.header as unknown as ClientFrame;
    switch (h.t) {
      case 'pub': {
        let values: Buffer[];
        try {
          values = splitValues(
            frame.body,
            h.msgs.map((m) => m.n),
          );
        } catch {
          this.socket.destroy();
          return;
        }
        const messages = h.msgs.map((m: OutgoingMeta, i) =>
          m.headers === undefined
            ? { key: m.key, value: values[i] }
            : { key: m.key, value: values[i], headers: m.headers },
        );
        // InProcessTransport.publish appends synchronously before its promise settles: frames are appended in
        // arrival order, which is the client's call order.
        this.transport.publish(h.topic, messages).then(
          () => this.reply({ t: 'ok', id: h.id }),
          (e: unknown) => this.reply({ t: 'err', id: h.id, error: errorWire(e) }),
        );
        return;
      }
      case 'sub': {
        const options = {
          fromBeginning: h.fromBeginning,
          retryDelayMs: h.retryDelayMs,
          maxRetryDelayMs: h.maxRetryDelayMs,
        };
        const deliver = (ms: readonly TransportMessage[]) => this.deliver(h.sub, ms);
        const joined = h.batch
          ? this.transport.subscribeBatch(h.topic, h.group, deliver, options)
          : this.transport.subscribe(h.topic, h.group, (m) => deliver([m]), options);
        joined.then(
          (s) => {
            if (this.closed) return void s.close();
            this.subs.set(h.sub, s);
            this.reply({ t: 'ok', id: h.id });
          },
          (e: unknown) => this.reply({ t: 'err', id: h.id, error: errorWire(e) }),
        );
        return;
      }
      case 'unsub': {
        const s = this.subs.get(h.sub);
        this.subs.delete(h.sub);
        void (s?.close() ?? Promise.resolve()).then(() => this.reply({ t: 'ok', id: h.id }));
        return;
      }
      case 'done': {
        const d = this.deliveries.get(h.d);
        if (d === undefined) return;
        this.deliveries.delete(h.d);
        if (h.ok) d.resolve();
        else d.reject(new Error(h.error ?? 'the subscriber failed'));
        return;
      }
      default:
        this.socket.destroy();
    }
  }

  private deliver(sub: number, messages: readonly TransportMessage[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the subscriber disconnected'));
    const d = this.nextDelivery++;
    const meta: DeliveredMeta[] = messages.map((m) => ({
      topic: m.topic,
      partition: m.partition,
      offset: m.offset,
      key: m.key,
      headers: m.headers,
      timestamp: m.timestamp,
      n: m.value.byteLength,
    }));
    return new Promise<void>((resolve, reject) => {
      this.deliveries.set(d, { resolve, reject });
      writeFrame(
        this.socket,
        { t: 'dlv', d, sub, msgs: meta },
        messages.map((m) => m.value),
      );
    });
  }

  async shutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const gone = new Error('the subscriber disconnected');
    for (const d of this.deliveries.values()) d.reject(gone);
    this.deliveries.clear();
    await this.transport.close();
    this.socket.destroy();
  }
}

export class IpcTransportServer {
  private readonly connections = new Set<Connection>();

  private constructor(
    private readonly server: Server,
    readonly path: string,
  ) {}

  static listen(options: IpcServerOptions): Promise<IpcTransportServer> {
    rmSync(options.path, { force: true });
    const max = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    let self: IpcTransportServer | undefined;
    const server = createServer((socket) => {
      socket.setNoDelay?.(true);
      const c = new Connection(socket, options.broker, max);
      self?.connections.add(c);
      socket.on('close', () => self?.connections.delete(c));
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.path, () => {
        server.off('error', reject);
        self = new IpcTransportServer(server, options.path);
        resolve(self);
      });
    });
  }

  /** Stops accepting, ends every connection (their unfinished messages stay uncommitted), removes the socket file. */
  async close(): Promise<void> {
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await Promise.all([...this.connections].map((c) => c.shutdown()));
    await closing;
    rmSync(this.path, { force: true });
  }
}
