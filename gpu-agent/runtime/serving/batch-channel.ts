// One channel over the channels of a batch's requests (serving/batch-run.ts): the interleaver sees one trace whose
// invokes are every request's in turn; each request's blocks see their own START and their own invoke numbers, as
// when the request runs alone. Messages from the blocks are renumbered into the batch and queued as they come;
// messages to the blocks go to the request whose invoke they name, renumbered back. A request that fails (its
// block's error, its channel breaking, a message for an invoke it does not have, its own timeout or cancel) is
// failed at once and told STOP; an EXCEPTION for its first invoke is queued so the interleaver ends its invokes.
// When the batch splits (batch-run.ts), `split` gives the requests that go on apart a channel of their own: their
// messages, queued ones included, go there from then on.
import type { BlockChannel, BlockToHost, HostToBlock, StartRequest } from '../../../protocol/interleave.js';
import { InterventionError, blockError } from '../errors.js';
import type { Deadline } from '../interleave/deadline.js';

/** One request of a batch, its channel open. */
export interface BatchMember {
  start: StartRequest;
  channel: BlockChannel;
  deadline: Deadline;
  /** Its first invoke's index in the batch, and how many it has. */
  offset: number;
  count: number;
  /** Set once it failed: the error its caller got. */
  failure?: InterventionError;
  /** Set once it completed. */
  completed?: boolean;
  /** Its messages queued and not yet read by the trace. */
  queued?: number;
}

/** Messages a request may have waiting for the trace: a runner sending without end fails its own request. */
export const MAX_QUEUED = 4096;

/** Barrier names are each request's own: `@barrier:<seq>:<parties>:<name>` gets the request's first invoke. */
const BARRIER = /^@barrier:(\d+):(\d+):([\s\S]+)$/;

/** The receiving end of some of the batch's requests: a trace's channel. */
class View implements BlockChannel {
  readonly queue: BlockToHost[] = [];
  waiter: ((m: BlockToHost) => void) | undefined;

  constructor(
    private readonly mux: BatchChannel,
    readonly members: Set<BatchMember>,
  ) {}

  send(msg: HostToBlock): void {
    this.mux.send(msg, this);
  }

  receive(): Promise<BlockToHost> {
    const next = this.queue.shift();
    if (next) {
      const m = this.mux.memberOf(next.invoke);
      if (m?.queued) m.queued--;
      return Promise.resolve(next);
    }
    return new Promise((resolve) => (this.waiter = resolve));
  }

  push(msg: BlockToHost, m: BatchMember): void {
    const w = this.waiter;
    this.waiter = undefined;
    if (w) w(msg);
    else {
      this.queue.push(msg);
      m.queued = (m.queued ?? 0) + 1;
    }
  }

  /** Each request is ended by the batch (batch-run.ts), not by the trace. */
  close(): void {}
}

export class BatchChannel {
  private readonly views: View[] = [];
  /** The channel of the whole batch. */
  readonly channel: BlockChannel;

  constructor(
    readonly members: BatchMember[],
    /** Called once when a member fails, before its STOP. */
    private readonly onFail: (m: BatchMember, e: InterventionError) => void,
  ) {
    const all = new View(this, new Set(members));
    this.views.push(all);
    this.channel = all;
    for (const m of members) {
      void this.pump(m);
      m.deadline.expired.catch((e: unknown) => {
        if (e instanceof InterventionError) this.fail(m, e);
      });
    }
  }

  /** A channel of their own for `members`: their messages go there from now on, those already queued too. */
  split(members: Set<BatchMember>): BlockChannel {
    const view = new View(this, members);
    for (const v of this.views) {
      for (const m of members) v.members.delete(m);
      const keep = v.queue.filter((msg) => !members.has(this.memberOf(msg.invoke)!));
      // The queued counts stay with their members.
      for (const msg of v.queue) if (members.has(this.memberOf(msg.invoke)!)) view.queue.push(msg);
      v.queue.splice(0, v.queue.length, ...keep);
    }
    this.views.push(view);
    return view;
  }

  /** The member an invoke of the batch belongs to. */
  memberOf(invoke: number): BatchMember | undefined {
    return this.members.find((m) => invoke >= m.offset && invoke < m.offset + m.count);
  }

  /** Fails a member (once): its caller gets `e`, its blocks STOP, its invokes end in the interleaver. */
  fail(m: BatchMember, e: InterventionError): void {
    if (m.failure || m.completed) return;
    m.failure = e;
    this.onFail(m, e);
    this.finish(
      m,
      e.blockError.type === 'Timeout' ? 'timeout' : e.blockError.type === 'Cancelled' ? 'cancelled' : 'failed',
    );
    this.push({ kind: 'EXCEPTION', invoke: m.offset, error: e.blockError });
  }

  /** Ends a member's conversation: STOP with `reason`, then close. */
  finish(m: BatchMember, reason: string): void {
    m.deadline.clear();
    try {
      m.channel.send({ kind: 'STOP', reason });
    } catch {
      // The channel is already broken; nothing to tell the blocks.
    }
    m.channel.close();
  }

  /** A message of the trace on `view`: START, STEP and STOP to its requests, a VALUE or RAISE to its invoke's. */
  send(msg: HostToBlock, view: View): void {
    const live = [...view.members].filter((m) => !m.failure && !m.completed);
    switch (msg.kind) {
      case 'START':
        for (const m of live) this.to(m, m.start);
        return;
      case 'STEP':
        for (const m of live) {
          const own = msg.invokes.filter((i) => this.memberOf(i.invoke) === m);
          this.to(m, { ...msg, invokes: own.map((i) => ({ ...i, invoke: i.invoke - m.offset })) });
        }
        return;
      case 'STOP':
        for (const m of live) this.to(m, msg);
        return;
      default: {
        const m = this.memberOf(msg.invoke);
        if (!m || m.failure || m.completed) return;
        const b = BARRIER.exec(msg.addr);
        const own = `${m.offset}/`;
        const name = b?.[3];
        const addr = b && name?.startsWith(own) ? `@barrier:${b[1]}:${b[2]}:${name.slice(own.length)}` : msg.addr;
        this.to(m, { ...msg, invoke: msg.invoke - m.offset, addr });
      }
    }
  }

  private to(m: BatchMember, msg: HostToBlock): void {
    try {
      m.channel.send(msg);
    } catch (e) {
      this.fail(m, broken(e));
    }
  }

  private push(msg: BlockToHost): void {
    const m = this.memberOf(msg.invoke);
    if (!m) return;
    this.views.find((v) => v.members.has(m))?.push(msg, m);
  }

  /** Reads a member's messages into the queue, renumbered, until it fails or completes. */
  private async pump(m: BatchMember): Promise<void> {
    for (;;) {
      let msg: BlockToHost;
      try {
        msg = await m.channel.receive();
      } catch (e) {
        this.fail(m, broken(e));
        return;
      }
      if (m.failure || m.completed) return;
      const i = (msg as { invoke?: unknown }).invoke;
      if (typeof i !== 'number' || !Number.isInteger(i) || i < 0 || i >= m.count) {
        const e = new InterventionError(
          blockError('ProtocolError', `message for invoke ${String(i)}, which this request does not have`, 'protocol'),
        );
        this.fail(m, e);
        return;
      }
      if ((m.queued ?? 0) >= MAX_QUEUED) {
        const why = `the blocks sent ${MAX_QUEUED} messages the host had not read yet`;
        this.fail(m, new InterventionError(blockError('ProtocolError', why, 'protocol')));
        return;
      }
      if (msg.kind === 'SWAP' && msg.addr.startsWith('@param:') && this.members.length > 1) {
        // A parameter is shared by every row of the pass: a swap in a batch would reach the other requests' rows.
        const why = `${msg.addr.slice(7)}: a parameter swap cannot run in a batch of requests (it would hold for the other requests' rows); name the parameter in the block's source (m.x.weight) so the request runs on its own`;
        this.fail(m, new InterventionError(blockError('ProtocolError', why, 'protocol'), i));
        return;
      }
      const b = msg.kind === 'WAIT' ? BARRIER.exec(msg.addr) : null;
      const addr = b ? { addr: `@barrier:${b[1]}:${b[2]}:${m.offset}/${b[3]}` } : {};
      this.push({ ...msg, invoke: i + m.offset, ...addr } as BlockToHost);
    }
  }
}

/** The error of a channel that broke, as a request alone reports it. */
function broken(e: unknown): InterventionError {
  return new InterventionError(
    blockError('ProtocolError', `the channel to the blocks broke: ${(e as Error).message}`, 'protocol'),
  );
}
