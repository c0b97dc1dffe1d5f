// The agent's watchdog: a worker thread that watches the main thread's event loop. A trusted block runs in the
// agent's own thread, and a synchronous loop in it (`for (;;) {}`) cannot be interrupted from JavaScript: the
// request's timeout never fires, heartbeats stop, and the agent would hang for good. When the loop has not turned
// for `stallMs`, the watchdog writes the agent's last words (the stall and the requests that were running) and
// kills the process; its supervisor starts it again, and the control plane treats the requests as suspects
// (docs/lifecycle.md, "Poison requests"): their next attempt runs isolated, in a sandbox runner.
//
// The main thread stamps a shared clock every `stallMs / 10` (at most every 500 ms) and keeps the running request
// ids in a shared buffer; the worker reads both. Nothing else crosses.
import { Worker } from 'node:worker_threads';

const RUNNING_BYTES = 16 * 1024;

export interface WatchdogOptions {
  stallMs: number;
  lastWordsFile: string;
  agentId: string;
  bootId: string;
}

export class Watchdog {
  private readonly beat: BigInt64Array;
  private readonly running: Uint8Array;
  private readonly runningLength: Int32Array;
  private readonly worker: Worker;
  private readonly timer: NodeJS.Timeout;

  constructor(opts: WatchdogOptions) {
    const shared = new SharedArrayBuffer(16 + RUNNING_BYTES);
    this.beat = new BigInt64Array(shared, 0, 1);
    this.runningLength = new Int32Array(shared, 8, 1);
    this.running = new Uint8Array(shared, 16, RUNNING_BYTES);
    this.stamp();
    this.worker = new Worker(WATCHER, { eval: true, workerData: { shared, ...opts, runningBytes: RUNNING_BYTES } });
    this.worker.unref();
    this.timer = setInterval(() => this.stamp(), Math.min(500, Math.max(50, Math.floor(opts.stallMs / 10))));
    this.timer.unref();
  }

  private stamp(): void {
    Atomics.store(this.beat, 0, BigInt(Date.now()));
  }

  /** The requests running now, for the last words. */
  setRunning(ids: string[]): void {
    const bytes = new TextEncoder().encode(JSON.stringify(ids.slice(0, 256)));
    const n = Math.min(bytes.length, RUNNING_BYTES);
    this.running.set(bytes.subarray(0, n));
    Atomics.store(this.runningLength, 0, bytes.length <= RUNNING_BYTES ? n : 0);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.worker.terminate();
  }
}

// The worker's code, evaluated as CommonJS in its own thread (no module file to resolve).
const WATCHER = `
const { workerData } = require('node:worker_threads');
const { writeFileSync, mkdirSync } = require('node:fs');
const { dirname } = require('node:path');
const { shared, stallMs, lastWordsFile, agentId, bootId, runningBytes } = workerData;
const beat = new BigInt64Array(shared, 0, 1);
const runningLength = new Int32Array(shared, 8, 1);
const running = new Uint8Array(shared, 16, runningBytes);
setInterval(() => {
  const last = Number(Atomics.load(beat, 0));
  const stalled = Date.now() - last;
  if (stalled < stallMs) return;
  let ids = [];
  try {
    const n = Atomics.load(runningLength, 0);
    ids = n > 0 ? JSON.parse(new TextDecoder().decode(running.slice(0, n))) : [];
  } catch {}
  const cause = 'watchdog: the event loop was blocked for ' + stalled + ' ms (limit ' + stallMs + ' ms)' +
    (ids.length ? ' while running ' + ids.join(', ') + ' (a trusted block in a synchronous loop?)' : '') + '; the process was killed';
  try {
    mkdirSync(dirname(lastWordsFile), { recursive: true, mode: 0o700 });
    writeFileSync(lastWordsFile, JSON.stringify({ agentId, bootId, at: new Date().toISOString(), cause, running: ids }), { mode: 0o600 });
  } catch {}
  try { writeFileSync(2, 'gpu-agent: ' + cause + '\\n'); } catch {}
  process.kill(process.pid, 'SIGKILL');
}, Math.min(1000, Math.max(100, Math.floor(stallMs / 4))));
`;
