// The agent's handle on one runner process: its socket channel, its stdout/stderr as lines, how it
// exited (exit code, signal, whether its memory cgroup OOM-killed it or V8 ran out of heap), and a kill
// that takes its whole process group. A runner serves at most one request (claim()). Its pipes carry the
// drain markers (runner-drain.ts): rawOutputDrained() says when everything written before them was read.
import { setPriority } from 'node:os';
import type { AgentToRunner, ReadyMessage, RunnerToAgent } from '../protocol/frames.js';
import { LineSplitter } from '../gpu-agent/block/containment/line-splitter.js';
import { DrainMarkerScanner } from './runner-drain.js';
import type { MemoryCgroup } from './memory-cgroup.js';
import type { SocketChannel } from './socket-channel.js';
import type { SpawnedRunner } from './spawner.js';

export type KillReason = 'timeout' | 'cancel' | 'close' | 'start-timeout' | 'finished' | 'refused';

export interface RunnerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The kernel OOM-killed it in its memory cgroup. */
  oomKilled: boolean;
  /** V8 aborted at the --max-old-space-size heap cap. */
  heapExhausted: boolean;
  /** Set when the agent killed it, and why. */
  killedBy: KillReason | undefined;
  /** Last lines the runner wrote to stderr (V8's fatal messages land here). */
  stderrTail: string[];
  memoryPeakBytes: number | undefined;
}

const STDERR_TAIL_LINES = 20;
export type OutputListener = (stream: 'stdout' | 'stderr', line: string) => void;

export class RunnerProcess {
  readonly pid: number;
  readonly exited: Promise<RunnerExit>;
  private claimed = false;
  private killedBy: KillReason | undefined;
  private readonly stderrTail: string[] = [];
  private outputListener: OutputListener | undefined;
  private exitInfo: RunnerExit | undefined;
  private running = true;
  private readonly drained = new Set<'stdout' | 'stderr'>();
  private drainWaiters: Array<() => void> = [];

  constructor(
    readonly id: string,
    spawned: SpawnedRunner,
    readonly channel: SocketChannel<RunnerToAgent, AgentToRunner>,
    private readonly cgroup: MemoryCgroup | undefined,
    readonly spawnedAt: number,
    /** Started at low priority (warm-up); claim() restores normal priority. */
    private readonly niced = false,
  ) {
    this.pid = spawned.pid;
    const out = new LineSplitter((line) => this.outputListener?.('stdout', line));
    const err = new LineSplitter((line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
      this.outputListener?.('stderr', line);
    });
    const scanned = (stream: 'stdout' | 'stderr', lines: LineSplitter) =>
      new DrainMarkerScanner(
        (t) => lines.write(t),
        () => {
          lines.flush();
          this.markDrained(stream);
        },
      );
    const outScan = scanned('stdout', out);
    const errScan = scanned('stderr', err);
    spawned.stdout.setEncoding('utf8').on('data', (t: string) => outScan.write(t));
    spawned.stderr.setEncoding('utf8').on('data', (t: string) => errScan.write(t));
    const streamsClosed = Promise.all([
      new Promise((r) => spawned.stdout.once('close', r)),
      new Promise((r) => spawned.stderr.once('close', r)),
    ]);
    this.exited = spawned.exited.then(async ({ code, signal }) => {
      this.running = false;
      // stderr may still hold V8's last words; give the pipes a moment to drain.
      await Promise.race([streamsClosed, new Promise((r) => setTimeout(r, 200))]);
      outScan.end();
      errScan.end();
      out.flush();
      err.flush();
      const oomKilled = (this.cgroup?.oomKills() ?? 0) > 0;
      const memoryPeakBytes = this.cgroup?.peakBytes();
      this.cgroup?.remove();
      this.exitInfo = {
        code,
        signal,
        oomKilled,
        heapExhausted: this.stderrTail.some((l) => /JavaScript heap out of memory|Reached heap limit/.test(l)),
        killedBy: this.killedBy,
        stderrTail: [...this.stderrTail],
        memoryPeakBytes,
      };
      return this.exitInfo;
    });
  }

  /**
   * Resolves once both pipes have carried the runner's drain marker (every raw write before it has been
   * passed to the output listener), the runner has exited (its pipes were read to their end), or `maxMs`
   * passed.
   */
  rawOutputDrained(maxMs: number): Promise<void> {
    if (this.drained.size === 2 || this.exitInfo) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.drainWaiters = this.drainWaiters.filter((w) => w !== done);
        resolve();
      };
      const timer = setTimeout(done, maxMs);
      this.drainWaiters.push(done);
      void this.exited.then(done);
    });
  }

  private markDrained(stream: 'stdout' | 'stderr'): void {
    this.drained.add(stream);
    if (this.drained.size === 2) for (const w of [...this.drainWaiters]) w();
  }

  /** The exit, once it happened. */
  get exit(): RunnerExit | undefined {
    return this.exitInfo;
  }

  get alive(): boolean {
    return this.running;
  }

  /** Takes the runner for one request; a second claim throws (runners are never reused). */
  claim(): void {
    if (this.claimed) throw new Error(`runner ${this.id} was already used for a request`);
    this.claimed = true;
    if (this.niced) {
      try {
        setPriority(this.pid, 0);
      } catch {
        /* already gone; the request will see that */
      }
    }
  }

  get isClaimed(): boolean {
    return this.claimed;
  }

  onOutput(listener: OutputListener | undefined): void {
    this.outputListener = listener;
  }

  /** SIGKILLs the runner's process group (it is its group's leader). Idempotent. */
  kill(reason: KillReason): void {
    this.killedBy ??= reason;
    if (!this.alive) return;
    for (const target of [-this.pid, this.pid]) {
      try {
        process.kill(target, 'SIGKILL');
        return;
      } catch {
        /* not a group leader yet, or already gone */
      }
    }
  }

  /** Sends through the channel; false when the runner's socket is already gone. */
  trySend(msg: AgentToRunner): boolean {
    try {
      this.channel.send(msg);
      return true;
    } catch {
      return false;
    }
  }

  ready: ReadyMessage | undefined;
  readyAt: number | undefined;
}
