// Messages over one end of a Unix domain socket, as binary frames (protocol/frames.ts). The agent holds
// one end, the runner the other; each reads the frames of the opposite direction. Incoming messages queue
// until receive() takes them; when the socket ends or a frame is unreadable, every pending and later
// receive() rejects with the reason.
import type { Socket } from 'node:net';
import { FabricError } from '../protocol/errors.js';
import { FrameDecoder, type ProtocolError, encodeAgentToRunner, encodeRunnerToAgent } from '../protocol/frames.js';
import type { AgentToRunner, FrameDirection, RunnerToAgent } from '../protocol/frames.js';
import { Fifo } from '../protocol/fifo.js';

/** Why a socket channel stopped delivering messages. */
export type ChannelEnd =
  | { reason: 'eof' }
  | { reason: 'closed' }
  | { reason: 'protocol'; error: ProtocolError }
  | { reason: 'error'; error: Error };

export class ChannelClosedError extends FabricError {
  readonly end: ChannelEnd;
  constructor(end: ChannelEnd) {
    const why =
      end.reason === 'eof'
        ? 'the other end closed the socket'
        : end.reason === 'closed'
          ? 'this end closed the channel'
          : end.error.message;
    super('SANDBOX_CHANNEL_CLOSED', 500, `sandbox channel closed: ${why}`, { details: { reason: end.reason } });
    this.name = 'ChannelClosedError';
    this.end = end;
  }
}

export class SocketChannel<In, Out> {
  private readonly queue = new Fifo<In>();
  private readonly waiters = new Fifo<{ resolve: (m: In) => void; reject: (e: Error) => void }>();
  private readonly decoder: FrameDecoder<FrameDirection>;
  private ended: ChannelEnd | undefined;
  private readonly endListeners: Array<(end: ChannelEnd) => void> = [];

  constructor(
    private readonly socket: Socket,
    inbound: FrameDirection,
    private readonly encode: (msg: Out) => Buffer,
  ) {
    this.decoder = new FrameDecoder(inbound);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => {
      try {
        this.decoder.end();
        this.finish({ reason: 'eof' });
      } catch (e) {
        this.finish({ reason: 'protocol', error: e as ProtocolError });
      }
    });
    socket.on('error', (error) => this.finish({ reason: 'error', error }));
    socket.on('close', () => this.finish({ reason: 'eof' }));
  }

  private onData(chunk: Buffer): void {
    // The frames before an unreadable one in the same chunk are delivered first, then the channel ends.
    const { messages, error } = this.decoder.pushAll(chunk);
    for (const m of messages as In[]) {
      const w = this.waiters.take();
      if (w) w.resolve(m);
      else this.queue.push(m);
    }
    if (error !== undefined) {
      this.finish({ reason: 'protocol', error });
      this.socket.destroy();
    }
  }

  private finish(end: ChannelEnd): void {
    if (this.ended) return;
    this.ended = end;
    const err = new ChannelClosedError(end);
    for (const w of this.waiters.drain()) w.reject(err);
    for (const l of this.endListeners.splice(0)) l(end);
  }

  /** Why the channel ended, once it has. */
  get end(): ChannelEnd | undefined {
    return this.ended;
  }

  /** Called once when the channel stops delivering (immediately if it already has). */
  onEnd(listener: (end: ChannelEnd) => void): void {
    if (this.ended) listener(this.ended);
    else this.endListeners.push(listener);
  }

  send(msg: Out): void {
    if (this.ended || this.socket.destroyed) throw new ChannelClosedError(this.ended ?? { reason: 'closed' });
    this.socket.write(this.encode(msg));
  }

  /** Writes a frame encoded earlier (one that is sent many times, like INIT). */
  sendFrame(frame: Uint8Array): void {
    if (this.ended || this.socket.destroyed) throw new ChannelClosedError(this.ended ?? { reason: 'closed' });
    this.socket.write(frame);
  }

  receive(): Promise<In> {
    const m = this.queue.take();
    if (m !== undefined) return Promise.resolve(m);
    if (this.ended) return Promise.reject(new ChannelClosedError(this.ended));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Half-closes after everything written so far has been handed to the kernel. */
  flush(): Promise<void> {
    if (this.socket.destroyed || this.socket.writableEnded) return Promise.resolve();
    return new Promise((resolve) => this.socket.end(resolve));
  }

  close(): void {
    this.finish({ reason: 'closed' });
    this.socket.destroy();
  }
}

/** The agent's end: sends AgentToRunner, receives RunnerToAgent. */
export function agentEnd(socket: Socket): SocketChannel<RunnerToAgent, AgentToRunner> {
  return new SocketChannel<RunnerToAgent, AgentToRunner>(socket, 'runner-to-agent', (m) => encodeAgentToRunner(m));
}

/** The runner's end: sends RunnerToAgent, receives AgentToRunner. */
export function runnerEnd(socket: Socket): SocketChannel<AgentToRunner, RunnerToAgent> {
  return new SocketChannel<AgentToRunner, RunnerToAgent>(socket, 'agent-to-runner', (m) => encodeRunnerToAgent(m));
}
