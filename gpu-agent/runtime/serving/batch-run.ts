// Runs a batch of requests (serving/batcher.ts) as one trace: their invokes stacked into one forward pass, as the
// invokes of one request are, over one channel that keeps each request's blocks to their own START and invoke numbers
// (batch-channel.ts). Each block sees and changes only its own rows; a request that fails, times out or is cancelled
// ends its own invokes while the others go on (the interleaver's `isolate` hook); each gets its own RunResult. A batch
// of one request runs exactly as a request alone.
import type { BlockChannel, StartRequest } from '../../../protocol/interleave.js';
import { InterventionError } from '../errors.js';
import { Deadline } from '../interleave/deadline.js';
import type { HostContext } from '../interleave/host-context.js';
import { BatchTrace } from '../interleave/batch-trace.js';
import type { BatchHooks, Outcome } from '../interleave/batch-trace.js';
import type { LogLine, RunRequest, RunResult } from '../interleave/request-types.js';
import { passTimings } from '../interleave/pass-timings.js';
import { runTraces } from '../interleave/trace-session.js';
import type { ModelTurns, Turn } from './model-turns.js';
import { BatchChannel } from './batch-channel.js';
import type { BatchMember } from './batch-channel.js';

/** A request waiting in a batch: its channel opening since it joined, its deadline running since then. */
export interface BatchEntry {
  req: RunRequest;
  start: StartRequest;
  channel: Promise<BlockChannel>;
  deadline: Deadline;
  resolve: (r: RunResult) => void;
  reject: (e: unknown) => void;
}

/** What a batched request's result says of its batch (RunResult.batch). */
export interface BatchInfo {
  /** Serial number of the batch on this model: requests with the same one ran in the same forward pass. */
  id: number;
  requests: number;
  rows: number;
}

/** Runs the batch's requests once `turn` was granted and the batch closed; settles every entry. */
export async function runBatch(
  ctx: HostContext,
  entries: BatchEntry[],
  turns: ModelTurns,
  turn: Turn,
  id: number,
): Promise<void> {
  const opened = await Promise.allSettled(entries.map((e) => Promise.race([e.channel, e.deadline.expired])));
  const ready: Array<{ entry: BatchEntry; channel: BlockChannel }> = [];
  opened.forEach((o, k) => {
    const entry = entries[k]!;
    if (o.status === 'fulfilled') ready.push({ entry, channel: o.value });
    else {
      entry.deadline.clear();
      entry.reject(o.reason);
      // A channel that opens after its request gave up is closed unused.
      void entry.channel.then((c) => c.close()).catch(() => {});
    }
  });
  if (ready.length === 0) return;
  if (ready.length === 1) {
    const { entry, channel } = ready[0]!;
    const run = runTraces(ctx, [{ req: entry.req, start: entry.start, plan: null }], () => turn.around(channel), {
      deadline: entry.deadline,
    });
    await run.then(
      ([r]) => entry.resolve({ ...r!, batch: { id, requests: 1, rows: r!.invokes.length } }),
      entry.reject,
    );
    return;
  }
  await runStacked(ctx, ready, turns, turn, id);
}

/** How long the host waits for some requests' blocks before the others go on apart (a fork of the pass). */
export const STALL_MS = 1000;

type Member = BatchMember & { entry: BatchEntry };

async function runStacked(
  ctx: HostContext,
  ready: Array<{ entry: BatchEntry; channel: BlockChannel }>,
  turns: ModelTurns,
  turn: Turn,
  id: number,
): Promise<void> {
  const t0 = performance.now();
  const members: Member[] = [];
  let offset = 0;
  for (const { entry, channel } of ready) {
    const count = entry.start.invokes.length;
    members.push({ entry, start: entry.start, channel, deadline: entry.deadline, offset, count });
    offset += count;
  }
  const rows = offset;
  // When every request has failed the stacked pass stops too.
  const allFailed = new AbortController();
  const mux = new BatchChannel(members, (m, e) => {
    (m as Member).entry.reject(e);
    if (members.every((x) => x.failure)) allFailed.abort();
  });
  const start: StartRequest = {
    kind: 'START',
    requestId: `batch-${id}`,
    invokes: members.flatMap((m) =>
      m.start.invokes.map((inv, i) => ({ ...inv, invoke: m.offset + i, batchStart: m.offset + i, batchSize: 1 })),
    ),
    steps: 1,
    cache: false,
  };
  const logs: LogLine[] = [];
  const req: RunRequest = {
    invokes: members.flatMap((m) => m.entry.req.invokes),
    onLog: (line) => {
      const m = mux.memberOf(line.invoke) as Member | undefined;
      if (!m || m.failure) return;
      logs.push(line);
      m.entry.req.onLog?.({ ...line, invoke: line.invoke - m.offset });
    },
  };
  const longest = Math.max(...members.map((m) => m.entry.req.timeoutMs ?? 60_000));
  const deadline = new Deadline(longest, allFailed.signal);
  const stats0 = ctx.cache.getStats();
  /** Which trace each request is in: the batch's, or a fork's. */
  const owner = new Map<Member, BatchTrace>();
  const traces: Array<Promise<void>> = [];

  const settle = async (run: BatchTrace, going: Promise<Outcome>, done?: () => void): Promise<void> => {
    try {
      const outcome = await going;
      const stats1 = ctx.cache.getStats();
      const results = run.results();
      for (const m of members) {
        if (owner.get(m) !== run || m.failure || m.completed) continue;
        m.completed = true;
        const own = run.mediators.slice(m.offset, m.offset + m.count);
        const stopped = own.some((i) => i.stopped) && own.every((i) => i.stopped || i.status === 'ended');
        m.entry.resolve({
          requestId: m.start.requestId,
          invokes: results.slice(m.offset, m.offset + m.count),
          steps: outcome.steps,
          stoppedEarly: outcome.stoppedEarly || stopped,
          cache: 'none',
          logs: logs
            .filter((l) => l.invoke >= m.offset && l.invoke < m.offset + m.count)
            .map((l) => ({ ...l, invoke: l.invoke - m.offset })),
          timings: passTimings(run, performance.now() - t0, stats0, stats1),
          batch: { id, requests: members.length, rows },
        });
        mux.finish(m, 'completed');
      }
    } catch (e) {
      // A failure no single request owns (the model's own, the backstop deadline) fails every request still in it.
      for (const m of members) {
        if (owner.get(m) !== run || m.failure || m.completed) continue;
        if (!(e instanceof InterventionError)) {
          m.completed = true;
          m.entry.reject(e);
          mux.finish(m, 'failed');
        } else if (e.invoke !== undefined && mux.memberOf(e.invoke) === m)
          mux.fail(m, new InterventionError(e.blockError, e.invoke - m.offset));
        else mux.fail(m, e);
      }
    } finally {
      done?.();
    }
  };

  const hooks: BatchHooks = {
    stallMs: STALL_MS,
    isolate: (e, mediators) => {
      if (e.invoke === undefined) return false;
      const m = mux.memberOf(e.invoke);
      if (!m) return false;
      mux.fail(m, m.failure ?? new InterventionError(e.blockError, e.invoke - m.offset));
      for (let i = m.offset; i < m.offset + m.count; i++) {
        const inv = mediators[i]!;
        if (inv.status !== 'ended') inv.end({ tree: null, tensors: [] });
      }
      return true;
    },
    // The requests whose blocks are not the ones keeping the trace waiting go on in a fork of the pass.
    stalled: (parent) => {
      const run = parent as BatchTrace;
      const running = new Set(run.mediators.filter((i) => i.status === 'running').map((i) => mux.memberOf(i.index)));
      const waiting = new Set(
        members.filter(
          (m) =>
            owner.get(m) === run &&
            !running.has(m) &&
            run.mediators.slice(m.offset, m.offset + m.count).some((i) => i.status !== 'ended'),
        ),
      );
      if (waiting.size === 0) return;
      const own = new Set([...waiting].flatMap((m) => Array.from({ length: m.count }, (_, i) => m.offset + i)));
      const view = mux.split(waiting);
      // The fork takes the model's turns with a turn of its own, given back while it waits for its blocks.
      const forkTurn = turns.turn();
      const channel: BlockChannel = {
        send: (msg) => view.send(msg),
        receive: async () => {
          forkTurn.give();
          try {
            return await view.receive();
          } finally {
            await forkTurn.take();
          }
        },
        close: () => {},
      };
      const fork = run.fork(own, channel);
      for (const m of waiting) owner.set(m, fork);
      traces.push(
        settle(
          fork,
          forkTurn.take().then(() => fork.resume()),
          () => forkTurn.done(),
        ),
      );
    },
  };

  try {
    const channel = await turn.around(mux.channel);
    const run = new BatchTrace(ctx, req, start, channel, deadline, null, undefined, hooks);
    for (const m of members) owner.set(m, run);
    // The batch's turn is given back when its own trace ends: a fork still running takes the model's turns with its own.
    traces.push(settle(run, run.drive(), () => turn.give()));
    // Forks add themselves while the traces run.
    for (let k = 0; k < traces.length; k++) await traces[k];
  } finally {
    deadline.clear();
    for (const m of members) m.deadline.clear();
  }
}
