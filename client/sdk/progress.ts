// Shows requests' progress on a terminal. On a TTY one live line at the bottom, rewritten in place every 250 ms,
// holding every request in flight on that output (`[ndif 1b2c3d4e] RUNNING trace 2 of 5 · 1.4s   [ndif 9f8e…]
// QUEUED position 1 of 2 · 0.3s`), so concurrent traces never take turns on one line; elsewhere one plain line
// per change of status or session trace. `print` writes a line (a block's log line) above the live line.
//
// Text others write to the same terminal (tokens streamed to stdout, the caller's console.log) is never erased:
// while a line is live, writes to the terminal's streams pass through a wrapper that lifts the live line first, and
// while such text has left the cursor mid-line the live line is not drawn at all (redrawing it there would wipe the
// text with `\r\x1b[2K`); it comes back once a line ends. The wrappers are removed when the last request ends.
// Text left mid-line before the first request's progress started cannot be known and is not kept: end it with a
// newline before starting a trace with progress on.
import type { StatusUpdate } from './status.js';

export interface ProgressOutput {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface Progress {
  status(u: StatusUpdate): void;
  /**
   * A session's trace `trace` (0-based) of `traces` runs: shown as `trace k of n`, a loop's as
   * `trace k of n · step d of N · loss 0.31` (`loop`: iterations done, of how many, the latest reported value).
   */
  trace(trace: number, traces: number, loop?: LoopState): void;
  /** Writes one line to `to` (default: the progress output) above the live line. */
  print(text: string, to?: ProgressOutput): void;
  /** Leaves the terminal clean (this request's part of the live line goes; the line is erased with the last). */
  end(): void;
}

/** `QUEUED position 3 of 7`, `DEPLOYING (replica loading)`, `RUNNING` … */
export function describeStatus(u: StatusUpdate): string {
  let s: string = u.status;
  if (u.position !== null && (u.status === 'QUEUED' || u.status === 'PROVISIONING' || u.status === 'DEPLOYING')) {
    s += ` position ${u.position + 1}${u.queueLength !== null ? ` of ${u.queueLength}` : ''}`;
  }
  if (u.attempt !== null && u.attempt > 1 && (u.status === 'DISPATCHED' || u.status === 'RUNNING'))
    s += ` attempt ${u.attempt}`;
  if (u.deploymentNote) s += ` (${u.deploymentNote})`;
  return s;
}

export function formatElapsed(ms: number): string {
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 60_000) return `${Math.round(ms / 1000)}s`;
  const m = Math.floor(ms / 60_000);
  return `${m}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s`;
}

export interface ProgressOptions {
  out: ProgressOutput;
  label: string;
  now?: () => number;
  /** Redraw interval on a TTY (ms). */
  refreshMs?: number;
  /** Other streams on the same terminal as `out` (the SDK passes stdout when both are TTYs): their text is kept. */
  terminal?: ProgressOutput[];
}

export interface LoopState {
  done: number;
  iterations: number;
  reported?: number | Record<string, number>;
}

/** `trace 1 of 1 · step 812 of 2000 · loss 0.3141` */
export function describeTrace(k: number, n: number, loop?: LoopState): string {
  const base = `trace ${k + 1} of ${n}`;
  if (loop === undefined) return base;
  const r = loop.reported;
  const value =
    r === undefined
      ? ''
      : typeof r === 'number'
        ? ` · ${formatValue(r)}`
        : ` · ${Object.entries(r)
            .map(([key, v]) => `${key} ${formatValue(v)}`)
            .join(' ')}`;
  return `${base} · step ${loop.done} of ${loop.iterations}${value}`;
}

const formatValue = (v: number) => (Number.isInteger(v) ? String(v) : v.toPrecision(4));

interface Entry {
  label: string;
  started: number;
  now: () => number;
  status: StatusUpdate | null;
  trace: string | null;
}

const describeEntry = (e: Entry) =>
  `${e.label} ${e.status ? describeStatus(e.status) : 'SUBMITTING'}${e.trace && e.status?.status === 'RUNNING' ? ` ${e.trace}` : ''} · ${formatElapsed(e.now() - e.started)}`;

type Write = (...args: unknown[]) => unknown;

/** The live line of one output: every request in flight there, and the state of the terminal's current line. */
class LiveLine {
  readonly entries = new Set<Entry>();
  private drawn = false;
  /** Someone else's text ends the terminal's current line without a newline: drawing would erase it. */
  private midLine = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private readonly originals = new Map<ProgressOutput, Write>();
  private readonly write: Write;

  constructor(
    private readonly out: ProgressOutput,
    private readonly refreshMs: number,
  ) {
    const w = out.write as Write;
    this.write = (s) => w.call(out, s);
  }

  add(e: Entry, terminal: ProgressOutput[]): void {
    this.entries.add(e);
    for (const s of [this.out, ...terminal]) this.wrap(s);
    if (this.timer === null) {
      this.timer = setInterval(() => this.draw(), this.refreshMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  remove(e: Entry): void {
    this.entries.delete(e);
    if (this.entries.size > 0) {
      this.draw();
      return;
    }
    this.erase();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    for (const [s, w] of this.originals) s.write = w as ProgressOutput['write'];
    this.originals.clear();
    lines.delete(this.out);
  }

  /** Writes `text` and a newline to `to` above the live line. */
  print(text: string, to: ProgressOutput): void {
    this.erase();
    const w = this.originals.get(to);
    if (w) w.call(to, `${this.midLine ? '\n' : ''}${text}\n`);
    else to.write(`${this.midLine ? '\n' : ''}${text}\n`);
    this.midLine = false;
    this.draw();
  }

  draw(): void {
    if (this.midLine || this.entries.size === 0) return;
    const width = Math.max(20, (this.out.columns || 80) - 1);
    let text = [...this.entries].map(describeEntry).join('   ');
    if (text.length > width) text = `${text.slice(0, width - 1)}…`;
    this.write(`\r\x1b[2K${text}`);
    this.drawn = true;
  }

  private erase(): void {
    if (this.drawn) this.write('\r\x1b[2K');
    this.drawn = false;
  }

  private wrap(s: ProgressOutput): void {
    if (this.originals.has(s)) return;
    const original = s.write as Write;
    this.originals.set(s, original);
    s.write = ((chunk: unknown, ...rest: unknown[]) => {
      this.erase();
      const r = original.call(s, chunk, ...rest);
      const text = typeof chunk === 'string' ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString() : '';
      if (text.length > 0) this.midLine = !text.endsWith('\n');
      this.draw();
      return r;
    }) as ProgressOutput['write'];
  }
}

const lines = new Map<ProgressOutput, LiveLine>();

export function createProgress(opts: ProgressOptions): Progress {
  const now = opts.now ?? Date.now;
  const out = opts.out;
  const entry: Entry = { label: opts.label, started: now(), now, status: null, trace: null };
  let ended = false;

  if (!out.isTTY) {
    let lastPlain = '';
    const plain = () => {
      const key = `${entry.status?.status}|${entry.status?.position}|${entry.status?.attempt}|${entry.status?.deploymentNote}|${entry.trace}`;
      if (key !== lastPlain) out.write(`${describeEntry(entry)}\n`);
      lastPlain = key;
    };
    return {
      status(u) {
        entry.status = u;
        plain();
      },
      trace(k, n, loop) {
        entry.trace = describeTrace(k, n, loop);
        if (entry.status?.status === 'RUNNING') plain();
      },
      print(text, to = out) {
        to.write(`${text}\n`);
      },
      end() {},
    };
  }

  let line = lines.get(out);
  if (line === undefined) {
    line = new LiveLine(out, opts.refreshMs ?? 250);
    lines.set(out, line);
  }
  const live = line;
  live.add(
    entry,
    (opts.terminal ?? []).filter((s) => s !== out),
  );
  return {
    status(u) {
      entry.status = u;
      live.draw();
    },
    trace(k, n, loop) {
      entry.trace = describeTrace(k, n, loop);
      live.draw();
    },
    print(text, to = out) {
      if (ended) to.write(`${text}\n`);
      else live.print(text, to);
    },
    end() {
      if (ended) return;
      ended = true;
      live.remove(entry);
    },
  };
}

/** The tag of a request's progress and log lines: `[ndif 1b2c3d4e]`. */
export const requestLabel = (requestId: string) => `[ndif ${requestId.slice(0, 8)}]`;

/**
 * A trace's progress as the `progress` option asks: `true` on stderr (stdout's text is kept when both are the same
 * terminal), `false` none, or any output.
 */
export function progressFor(p: boolean | ProgressOutput, requestId: string): Progress | null {
  if (p === false) return null;
  const out: ProgressOutput = p === true ? process.stderr : p;
  const terminal = p === true && process.stdout.isTTY ? [process.stdout as ProgressOutput] : [];
  return createProgress({ out, label: requestLabel(requestId), terminal });
}

/** Where a block's console lines go by default: tagged with their request, stdout lines to stdout, stderr to stderr. */
export function defaultLog(
  progress: Progress | null,
  requestId: string,
): (l: { stream: string; line: string }) => void {
  const tag = requestLabel(requestId);
  return (l) => {
    const to = l.stream === 'stderr' ? process.stderr : process.stdout;
    if (progress) progress.print(`${tag} ${l.line}`, to);
    else to.write(`${tag} ${l.line}\n`);
  };
}
