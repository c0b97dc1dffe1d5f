// One untrusted request on one runner, seen by the model host as a BlockChannel: the same messages as
// in-process, carried as frames. What the runner cannot say itself becomes a structured EXCEPTION for
// every invoke still open: a timeout or cancel (the runner is killed at once), a crash (exit code or
// signal), the memory cap (cgroup OOM kill or V8 heap limit), the CPU rlimit, an unreadable frame. The
// runner's raw stdout/stderr pipes (writes straight to fd 1/2) arrive as LOG lines of the lowest open invoke,
// all of them before the last invoke's END. A session of several traces sends one START per trace, each after every
// invoke of the last one ended; the request is done when the last trace's invokes have.
import type { BlockError, BlockToHost, BlockChannel, HostToBlock } from '../protocol/interleave.js';
import type { RunnerLimits } from './config.js';
import { SandboxError } from './errors.js';
import { describeExit } from './launcher.js';
import type { KillReason, RunnerExit, RunnerProcess } from './runner-process.js';
import { ChannelClosedError } from './socket-channel.js';
import type { ChannelEnd } from './socket-channel.js';
import { Fifo } from '../protocol/fifo.js';

export interface SessionOptions {
  /** Wall-clock limit from open to the last invoke's END; the runner is SIGKILLed when it passes. */
  timeoutMs?: number;
  signal?: AbortSignal;
  limits: RunnerLimits;
  /** Called once with how long the request held the runner (START to last END), for pool sizing. */
  onExecuted?: (ms: number) => void;
}

/**
 * How long a line the runner wrote straight to its stderr pipe is held before it becomes a LOG line. A runner that
 * dies prints Node's fatal report (the runner's own frames and paths) there just before it goes: lines still held
 * when it dies are withheld from the user (the report keeps them, for the agent's log). A runner alive this long
 * after the line is not dying, so the line was the block's own (`fs.writeSync(2, …)`).
 */
const RAW_STDERR_HOLD_MS = 250;

export interface SessionReport {
  pid: number;
  exit: RunnerExit;
  /** Why the session ended: every invoke ended, or the reason it was cut short. */
  outcome: 'completed' | 'timeout' | 'cancelled' | 'crashed' | 'protocol' | 'closed';
  /** Raw stderr lines of a runner that died, not shown to the user (its fatal report): for the agent's log. */
  withheld: string[];
}

/** After the last END the runner exits by itself; if it has not within this, it is killed (never reused). */
const EXIT_GRACE_MS = 1000;
/** How long the last END waits for the runner's drain markers on its stdout/stderr pipes. */
const RAW_OUTPUT_DRAIN_MS = 200;

export class SandboxSession implements BlockChannel {
  private readonly queue = new Fifo<BlockToHost>();
  private readonly waiters = new Fifo<{ resolve: (m: BlockToHost) => void; reject: (e: Error) => void }>();
  private readonly open = new Set<number>();
  private started = false;
  private startedAt = 0;
  /** The trace the runner serves (a session's); undefined for a request of one trace. */
  private trace: { index: number; count: number; iteration?: number; iterations?: number } | undefined;
  /** Every invoke of the last trace ended. */
  private done = false;
  private terminal: Error | undefined;
  private outcome: SessionReport['outcome'] | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly onAbort = () => this.cut('cancel');
  private concluded!: () => void;
  private readonly conclusion = new Promise<void>((r) => (this.concluded = r));
  private held: string[] = [];
  private heldTimer: NodeJS.Timeout | undefined;
  private readonly withheld: string[] = [];
  /** Resolves once the runner has exited and the session has reached its outcome. */
  readonly report: Promise<SessionReport>;

  constructor(
    private readonly runner: RunnerProcess,
    private readonly opts: SessionOptions,
  ) {
    if (opts.timeoutMs !== undefined) {
      this.timer = setTimeout(() => this.cut('timeout'), opts.timeoutMs);
    }
    if (opts.signal) {
      if (opts.signal.aborted) queueMicrotask(this.onAbort);
      else opts.signal.addEventListener('abort', this.onAbort, { once: true });
    }
    runner.onOutput((stream, line) => {
      if (!this.started || this.open.size === 0) return;
      if (stream === 'stdout') return this.deliver({ kind: 'LOG', invoke: Math.min(...this.open), stream, line });
      this.held.push(line);
      this.heldTimer ??= setTimeout(() => {
        this.heldTimer = undefined;
        if (this.runner.alive) this.releaseHeld();
      }, RAW_STDERR_HOLD_MS);
    });
    void this.pump();
    this.report = Promise.all([runner.exited, this.conclusion]).then(([exit]) => {
      this.dispose();
      return { pid: runner.pid, exit, outcome: this.outcome ?? 'closed', withheld: [...this.withheld] };
    });
  }

  get pid(): number {
    return this.runner.pid;
  }

  send(msg: HostToBlock): void {
    if (this.terminal) return; // the runner is gone; its invokes already got their EXCEPTION
    if (msg.kind === 'START') {
      if (this.started) {
        const next = this.trace !== undefined && msg.trace !== undefined && isNextTrace(this.trace, msg.trace);
        if (!next || this.open.size > 0)
          throw new Error(
            'START sent twice on one sandbox session (only the next trace of a session may start, once the last one ended)',
          );
      } else this.startedAt = performance.now();
      // Uploaded tensors travel with the first START only: the runner keeps them for the session's later traces.
      if (this.started && msg.inputs !== undefined) msg = { ...msg, inputs: undefined };
      this.started = true;
      this.trace = msg.trace;
      for (const inv of msg.invokes) this.open.add(inv.invoke);
    }
    this.runner.trySend(msg);
  }

  receive(): Promise<BlockToHost> {
    const m = this.queue.take();
    if (m) return Promise.resolve(m);
    if (this.terminal) return Promise.reject(this.terminal);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Ends the session: the runner is killed if still running. */
  close(): void {
    this.outcome ??= 'closed';
    this.runner.kill('close');
    this.end(new SandboxError('SANDBOX_CLOSED', 'the sandbox session was closed'));
  }

  /** The runner is alive after writing them: held raw stderr lines are the block's. */
  private releaseHeld(): void {
    clearTimeout(this.heldTimer);
    this.heldTimer = undefined;
    const lines = this.held;
    this.held = [];
    if (this.started && this.open.size > 0 && !this.terminal)
      for (const line of lines) this.deliver({ kind: 'LOG', invoke: Math.min(...this.open), stream: 'stderr', line });
  }

  /** The runner died: what it still had on its stderr pipe is its fatal report, not the block's output. */
  private withholdHeld(): void {
    clearTimeout(this.heldTimer);
    this.heldTimer = undefined;
    this.withheld.push(...this.held);
    this.held = [];
  }

  private deliver(m: BlockToHost): void {
    const w = this.waiters.take();
    if (w) w.resolve(m);
    else this.queue.push(m);
  }

  private end(err: Error): void {
    if (this.terminal) return;
    this.terminal = err;
    for (const w of this.waiters.drain()) w.reject(err);
    this.dispose();
    this.concluded();
  }

  private dispose(): void {
    clearTimeout(this.timer);
    clearTimeout(this.heldTimer);
    this.opts.signal?.removeEventListener('abort', this.onAbort);
  }

  private async pump(): Promise<void> {
    for (;;) {
      let m: BlockToHost;
      try {
        m = (await this.runner.channel.receive()) as BlockToHost;
      } catch (e) {
        const end = e instanceof ChannelClosedError ? e.end : ({ reason: 'error', error: e as Error } as ChannelEnd);
        return this.runnerGone(end);
      }
      if (this.terminal) return;
      if (m.kind === 'END' || m.kind === 'EXCEPTION') {
        // The last invoke's END waits for the raw pipe output written before it (runner-drain.ts).
        if (this.started && this.open.size === 1 && this.open.has(m.invoke)) {
          await this.runner.rawOutputDrained(RAW_OUTPUT_DRAIN_MS);
          if (this.terminal) return;
          if (this.runner.alive) this.releaseHeld();
        }
        this.open.delete(m.invoke);
      }
      this.deliver(m);
      if (this.started && this.open.size === 0 && (this.trace === undefined || isLastTrace(this.trace)))
        this.finished();
    }
  }

  private finished(): void {
    this.done = true;
    this.outcome ??= 'completed';
    this.opts.onExecuted?.(performance.now() - this.startedAt);
    clearTimeout(this.timer);
    this.concluded();
    const grace = setTimeout(() => this.runner.kill('finished'), EXIT_GRACE_MS);
    grace.unref();
    void this.runner.exited.then(() => clearTimeout(grace));
  }

  /** Timeout or cancel: kill now, answer every open invoke now, do not wait for the process to go. */
  private cut(reason: Extract<KillReason, 'timeout' | 'cancel'>): void {
    if (this.terminal || this.done) return;
    this.outcome = reason === 'timeout' ? 'timeout' : 'cancelled';
    this.releaseHeld();
    this.runner.kill(reason);
    const error: BlockError =
      reason === 'timeout'
        ? {
            phase: 'execute',
            type: 'Timeout',
            message: `the block ran past its ${this.opts.timeoutMs} ms limit; its sandbox runner was killed`,
          }
        : { phase: 'execute', type: 'Cancelled', message: 'the request was cancelled; its sandbox runner was killed' };
    this.failOpen(
      error,
      reason === 'timeout'
        ? new SandboxError('SANDBOX_TIMEOUT', error.message)
        : new SandboxError('SANDBOX_CANCELLED', error.message),
    );
  }

  private failOpen(error: BlockError, terminal: Error): void {
    if (!this.started) {
      this.end(terminal);
      return;
    }
    for (const invoke of [...this.open].sort((a, b) => a - b)) this.deliver({ kind: 'EXCEPTION', invoke, error });
    this.open.clear();
    this.end(terminal);
  }

  private async runnerGone(end: ChannelEnd): Promise<void> {
    if (this.terminal) return;
    if (this.done) return this.end(new ChannelClosedError(end));
    if (end.reason === 'protocol') {
      this.outcome = 'protocol';
      this.releaseHeld();
      this.runner.kill('refused');
      const error: BlockError = {
        phase: 'protocol',
        type: 'ProtocolError',
        message: `the sandbox runner sent an unreadable frame (${end.error.code}): ${end.error.message}`,
      };
      return this.failOpen(error, end.error);
    }
    // The socket closed under open invokes: the runner died. Its exit says why.
    const exit = await Promise.race([
      this.runner.exited,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), EXIT_GRACE_MS)),
    ]);
    if (this.terminal) return;
    if (!exit) this.runner.kill('finished');
    const info = exit ?? (await this.runner.exited);
    if (this.terminal) return;
    this.outcome = 'crashed';
    this.withholdHeld();
    const error = crashError(info, this.opts.limits);
    this.failOpen(error, new ChannelClosedError(end));
  }
}

/** The user-facing reason a runner died under a request. */
export function crashError(exit: RunnerExit, limits: RunnerLimits): BlockError {
  const how = describeExit(exit.code, exit.signal);
  if (exit.oomKilled) {
    return {
      phase: 'execute',
      type: 'OutOfMemory',
      message: `the block exceeded the sandbox memory cap of ${limits.memoryMb} MiB; the kernel killed its runner (${how})`,
    };
  }
  if (exit.heapExhausted) {
    return {
      phase: 'execute',
      type: 'OutOfMemory',
      message: `the block exceeded the sandbox JavaScript heap cap of ${limits.heapMb} MiB; its runner aborted (${how})`,
    };
  }
  if (exit.signal === 'SIGXCPU') {
    return {
      phase: 'execute',
      type: 'CpuLimit',
      message: `the block used its ${limits.cpuSeconds} s CPU allowance; its runner was killed (${how})`,
    };
  }
  // What the runner itself printed as it died (Node's fatal report: runner frames, paths) is not the user's: it
  // goes to the agent's log (SessionReport.withheld); the block's own output already arrived as LOG lines.
  return {
    phase: 'execute',
    type: 'SandboxCrashed',
    message: `the sandbox runner died during the request (${how}); the block's own output is in the request's log, and what the runner printed as it died is in the agent's log`,
  };
}

type TracePlace = NonNullable<Extract<HostToBlock, { kind: 'START' }>['trace']>;

/** `b` is the trace (or iteration of a repeated trace) that follows `a` in its session. */
function isNextTrace(a: TracePlace, b: TracePlace): boolean {
  if (a.count !== b.count) return false;
  if (a.iterations !== undefined && a.iteration! < a.iterations - 1)
    return b.index === a.index && b.iterations === a.iterations && b.iteration === a.iteration! + 1;
  return b.index === a.index + 1;
}

function isLastTrace(t: TracePlace): boolean {
  return t.index === t.count - 1 && (t.iterations === undefined || t.iteration === t.iterations - 1);
}
