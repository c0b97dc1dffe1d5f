// The in-process channel: two promise queues, one per direction. `createInProcessBlocks` returns the host's end
// and serves the request's blocks on the other end in this process (trusted blocks only: they run with the
// agent's privileges, and a block stuck in a synchronous loop cannot be interrupted here; untrusted blocks run
// in a sandbox runner).
import type { BlockChannel, BlockEndpoint, BlockToHost, HostToBlock } from '../../../protocol/interleave.js';
import { serveBlocks } from './block-runner.js';
import { Fifo } from '../../../protocol/fifo.js';
import type { BlockEnvironment } from './block-runner.js';

class MessageQueue<T> {
  private readonly items = new Fifo<T>();
  private readonly waiters = new Fifo<{ resolve: (v: T) => void; reject: (e: Error) => void }>();
  private closed: Error | undefined;

  push(v: T): void {
    if (this.closed) throw this.closed;
    const w = this.waiters.take();
    if (w) w.resolve(v);
    else this.items.push(v);
  }

  next(): Promise<T> {
    if (this.items.size > 0) return Promise.resolve(this.items.take()!);
    if (this.closed) return Promise.reject(this.closed);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  close(reason: Error): void {
    if (this.closed) return;
    this.closed = reason;
    for (const w of this.waiters.drain()) w.reject(reason);
  }
}

export class ChannelClosed extends Error {
  constructor(side: string) {
    super(`the in-process channel was closed by the ${side}`);
    this.name = 'ChannelClosed';
  }
}

/** Both ends of an in-process channel. Messages are passed by reference (tensors are not copied). */
export function channelPair(): { host: BlockChannel; blocks: BlockEndpoint } {
  const toBlocks = new MessageQueue<HostToBlock>();
  const toHost = new MessageQueue<BlockToHost>();
  const closeBoth = (side: string) => {
    const e = new ChannelClosed(side);
    toBlocks.close(e);
    toHost.close(e);
  };
  return {
    host: { send: (m) => toBlocks.push(m), receive: () => toHost.next(), close: () => closeBoth('host') },
    blocks: { send: (m) => toHost.push(m), receive: () => toBlocks.next(), close: () => closeBoth('blocks') },
  };
}

/** The host end of a channel whose blocks run in this process. */
export function createInProcessBlocks(env: BlockEnvironment): BlockChannel {
  const { host, blocks } = channelPair();
  void serveBlocks(blocks, env).finally(() => blocks.close());
  return host;
}
