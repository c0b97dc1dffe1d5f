// The agent's watchdog: a worker thread that watches the main thread, where trusted blocks run. What a trusted block
// does there cannot be stopped from the main thread itself — a synchronous loop (`for (;;) {}`) never lets the
// request's timeout fire; a loop pushing 100 MB arrays fills the host's memory until the kernel's OOM killer ends the
// whole agent, with no last words, so the retry could not know what to isolate. (Stopping the main thread's
// JavaScript from here with the inspector's `Runtime.terminateExecution` was tried: Node 20 then aborts in
// `InternalCallbackScope::Close`, the terminated promise job having left its async id on the stack.) So:
//
// - memory: while the process's RSS is over `memoryMaxBytes`, or the host's available memory under
//   `memoryFloorBytes`, and an in-process request runs, the main thread is told (`onInterrupt`, `memory`) and fails
//   the block it entered last with OutOfMemory — the agent lives on when the block yields at all. If the main
//   thread does not turn within 1 s of being told (a block allocating in a synchronous loop), or the memory is not back under
//   the limits within `memoryGraceMs`, the watchdog writes the last words naming that block's request, and kills the
//   process before the kernel does;
// - a spin past a deadline: when the main thread has not turned for `spinGraceMs` past the deadline of an in-process
//   request, the same, naming the request whose deadline passed (the spin ends within about a second of its timeout);
// - a stall with no deadline passed (`stallMs`): the same, naming the block entered last (or every request running).
//
// The next boot reports the last words with its registration; the requests named there are suspects
// (docs/lifecycle.md, "Poison requests"): their retry runs isolated in a sandbox runner, where the memory cap and the
// timeout apply; the others in flight are requeued as after any restart. Under memory pressure the last words are
// written ahead (and removed when it ends): if the kernel kills the agent first, the next boot still says why.
//
// Shared with the worker: a clock the main thread stamps every 100 ms, the running requests (id, deadline,
// in-process) as JSON, and the id of the request whose blocks were entered last. The worker sends only `memory`.
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';

const RUNNING_BYTES = 32 * 1024;
const CULPRIT_BYTES = 512;

export interface WatchedRequest {
  id: string;
  /** Epoch ms at which its time limit ends. */
  deadline: number;
  /** Its blocks run in this process (trusted, not isolated). */
  inProcess: boolean;
}

export interface Interrupt {
  why: 'memory';
  /** What the worker saw: `rss 1100 MiB (limit 1024 MiB), host memory available …`. */
  detail: string;
}

export interface WatchdogOptions {
  stallMs: number;
  lastWordsFile: string;
  agentId: string;
  bootId: string;
  /** How long past an in-process request's deadline a blocked loop is stopped (default 500 ms). */
  spinGraceMs?: number;
  /** How long the main thread has to stop a block over the memory limits before the process is (default 3000 ms). */
  memoryGraceMs?: number;
  memoryMaxBytes?: number;
  memoryFloorBytes?: number;
  onInterrupt?: (i: Interrupt) => void;
}

/** 90 % of this process's cgroup (v2) memory limit, when it has one. */
export function cgroupMemoryMax(): number | undefined {
  try {
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    if (line === undefined) return undefined;
    const max = readFileSync(`/sys/fs/cgroup${line.slice(3)}/memory.max`, 'utf8').trim();
    return max === 'max' ? undefined : Math.floor(Number(max) * 0.9) || undefined;
  } catch {
    return undefined;
  }
}

let gc: (() => void) | undefined;
/** A full collection now (the memory of a stopped block goes back before the next request needs it). */
export function collectGarbage(): void {
  try {
    if (gc === undefined) {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as () => void;
    }
    gc();
  } catch {
    // Only an optimisation: V8 collects on its own.
  }
}

export class Watchdog {
  private readonly beat: BigInt64Array;
  private readonly running: Uint8Array;
  private readonly runningLength: Int32Array;
  private readonly culprit: Uint8Array;
  private readonly culpritLength: Int32Array;
  private culpritId = '';
  private readonly worker: Worker;
  private readonly timer: NodeJS.Timeout;

  constructor(opts: WatchdogOptions) {
    const shared = new SharedArrayBuffer(16 + RUNNING_BYTES + CULPRIT_BYTES);
    this.beat = new BigInt64Array(shared, 0, 1);
    this.runningLength = new Int32Array(shared, 8, 1);
    this.culpritLength = new Int32Array(shared, 12, 1);
    this.running = new Uint8Array(shared, 16, RUNNING_BYTES);
    this.culprit = new Uint8Array(shared, 16 + RUNNING_BYTES, CULPRIT_BYTES);
    this.stamp();
    const { onInterrupt, ...data } = opts;
    this.worker = new Worker(WATCHER, {
      eval: true,
      workerData: {
        shared,
        spinGraceMs: 500,
        memoryGraceMs: 3000,
        ...data,
        runningBytes: RUNNING_BYTES,
        culpritBytes: CULPRIT_BYTES,
      },
    });
    this.worker.on('message', (m: Interrupt) => onInterrupt?.(m));
    this.worker.unref();
    this.timer = setInterval(() => this.stamp(), 100);
    this.timer.unref();
  }

  private stamp(): void {
    Atomics.store(this.beat, 0, BigInt(Date.now()));
  }

  /** The requests running now: their deadlines, and the last words' list. */
  setRunning(requests: WatchedRequest[]): void {
    const bytes = new TextEncoder().encode(JSON.stringify(requests.slice(0, 256)));
    const n = Math.min(bytes.length, RUNNING_BYTES);
    this.running.set(bytes.subarray(0, n));
    Atomics.store(this.runningLength, 0, bytes.length <= RUNNING_BYTES ? n : 0);
  }

  /** The request whose blocks the host entered last (they run their own code now, if any block does). */
  setCulprit(requestId: string): void {
    if (requestId === this.culpritId) return;
    this.culpritId = requestId;
    const bytes = new TextEncoder().encode(requestId);
    const n = bytes.length <= CULPRIT_BYTES ? bytes.length : 0;
    this.culprit.set(bytes.subarray(0, n));
    Atomics.store(this.culpritLength, 0, n);
  }

  /** Stops watching; last words written ahead under memory pressure are removed (this is a clean end). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.worker.postMessage('stop');
    await new Promise((r) => setTimeout(r, 30));
    await this.worker.terminate();
  }
}

// The worker's code, evaluated as CommonJS in its own thread (no module file to resolve).
const WATCHER = `
const { workerData, parentPort } = require('node:worker_threads');
const { writeFileSync, mkdirSync, readFileSync, rmSync } = require('node:fs');
const { dirname } = require('node:path');
const { shared, stallMs, spinGraceMs, memoryGraceMs, lastWordsFile, agentId, bootId, runningBytes, culpritBytes } = workerData;
const memoryMax = workerData.memoryMaxBytes, memoryFloor = workerData.memoryFloorBytes;
const beat = new BigInt64Array(shared, 0, 1);
const runningLength = new Int32Array(shared, 8, 1);
const culpritLength = new Int32Array(shared, 12, 1);
const running = new Uint8Array(shared, 16, runningBytes);
const culpritBuf = new Uint8Array(shared, 16 + runningBytes, culpritBytes);
const mib = (b) => Math.round(b / 1048576) + ' MiB';
function requests() {
  try {
    const n = Atomics.load(runningLength, 0);
    return n > 0 ? JSON.parse(new TextDecoder().decode(running.slice(0, n))) : [];
  } catch { return []; }
}
function culprit(inProcess) {
  const n = Atomics.load(culpritLength, 0);
  const id = n > 0 ? new TextDecoder().decode(culpritBuf.slice(0, n)) : '';
  const r = inProcess.find((x) => x.id === id);
  return r ? [r.id] : inProcess.map((x) => x.id);
}
function available() {
  try {
    const m = /MemAvailable:\\s+(\\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch { return undefined; }
}
let wordsAhead = false, wordsKey = '', wordsAt = 0;
function words(cause, ids) {
  try {
    mkdirSync(dirname(lastWordsFile), { recursive: true, mode: 0o700 });
    writeFileSync(lastWordsFile, JSON.stringify({ agentId, bootId, at: new Date().toISOString(), cause, running: ids }), { mode: 0o600 });
  } catch {}
}
function die(cause, ids) {
  words(cause, ids);
  try { writeFileSync(2, 'gpu-agent: ' + cause + '\\n'); } catch {}
  process.kill(process.pid, 'SIGKILL');
}
// told: when the main thread was last told (told again every 500 ms); asked: the first telling it has not turned
// since (the main thread answers by turning: the beat moves past it).
let told = 0, asked = 0, memorySince = 0;
parentPort.on('message', (m) => {
  if (m === 'stop' && wordsAhead) { try { rmSync(lastWordsFile, { force: true }); } catch {} wordsAhead = false; }
});
setInterval(() => {
  const now = Date.now();
  const last = Number(Atomics.load(beat, 0));
  const blocked = now - last;
  const reqs = requests();
  const inProcess = reqs.filter((r) => r.inProcess);
  const ids = reqs.map((r) => r.id);
  // A spin past a deadline: the loop has not turned since that deadline, and not for spinGraceMs.
  if (blocked >= spinGraceMs) {
    const late = inProcess.find((r) => last <= r.deadline && now - r.deadline >= spinGraceMs);
    if (late)
      return die('timeout: the trusted block of ' + late.id + ' kept the event loop blocked ' + (now - late.deadline) +
        ' ms past its deadline (blocked ' + blocked + ' ms in all; a synchronous loop?); the process was killed to stop it', [late.id]);
  }
  // Memory: stop the block before the kernel stops the agent.
  const rss = process.memoryUsage.rss();
  const avail = memoryFloor ? available() : undefined;
  const over = (memoryMax !== undefined && rss > memoryMax) || (avail !== undefined && avail < memoryFloor);
  const pressure = (memoryMax !== undefined && rss > 0.8 * memoryMax) || (avail !== undefined && avail < 2 * memoryFloor);
  const what = 'rss ' + mib(rss) + (memoryMax !== undefined ? ' (limit ' + mib(memoryMax) + ')' : '') +
    (avail !== undefined ? ', host memory available ' + mib(avail) + ' (floor ' + mib(memoryFloor) + ')' : '');
  if (pressure && inProcess.length > 0) {
    const suspects = culprit(inProcess);
    const key = suspects.join(',');
    if (!wordsAhead || key !== wordsKey || now - wordsAt > 1000) {
      wordsKey = key;
      wordsAt = now;
      words('memory: the agent ran short of memory while the trusted block of ' + key + ' ran (' + what +
        '); a death without other last words under this pressure is most likely the kernel\\'s OOM killer', suspects);
      wordsAhead = true;
    }
  } else if (wordsAhead) {
    try { rmSync(lastWordsFile, { force: true }); } catch {}
    wordsAhead = false;
  }
  if (over && inProcess.length > 0) {
    if (memorySince === 0) memorySince = now;
    if (memorySince === now || now - told > 500) {
      parentPort.postMessage({ why: 'memory', detail: what });
      told = now;
      if (asked === 0 || last >= asked) asked = now;
    }
    const unanswered = last < asked && now - asked >= 1000;
    if (unanswered || now - memorySince >= memoryGraceMs) {
      const suspects = culprit(inProcess);
      return die('memory: the trusted block of ' + suspects.join(', ') + ' kept the agent over its memory limits (' + what +
        ') and the agent could not stop it' + (unanswered ? ' (its event loop was blocked ' + blocked + ' ms: a synchronous loop)' : '') +
        '; the process was killed before the kernel\\'s OOM killer', suspects);
    }
    return;
  }
  memorySince = 0;
  asked = 0;
  if (stallMs > 0 && blocked >= stallMs) {
    const suspects = inProcess.length > 0 ? culprit(inProcess) : ids;
    die('watchdog: the event loop was blocked for ' + blocked + ' ms (limit ' + stallMs + ' ms)' +
      (suspects.length ? ' while running ' + suspects.join(', ') + ' (a trusted block in a synchronous loop?)' : '') + '; the process was killed', suspects);
  }
}, 20);
`;
