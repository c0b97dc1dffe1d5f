// Shows a request's progress on a terminal: on a TTY one line rewritten in place (status, queue position,
// elapsed time, refreshed every 250 ms); elsewhere one plain line per change of status. `print` writes a line
// (a block's log line) above the live line without tearing it.
import type { StatusUpdate } from './status.js';

export interface ProgressOutput {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface Progress {
  status(u: StatusUpdate): void;
  /** Writes one line to `to` (default: the progress output) above the live line. */
  print(text: string, to?: ProgressOutput): void;
  /** Leaves the terminal clean (erases the live line on a TTY). */
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
}

export function createProgress(opts: ProgressOptions): Progress {
  const now = opts.now ?? Date.now;
  const started = now();
  const out = opts.out;
  let last: StatusUpdate | null = null;
  let lastPlain = '';
  let drawn = false;
  let timer: NodeJS.Timeout | null = null;

  const line = () => {
    const text = `${opts.label} ${last ? describeStatus(last) : 'SUBMITTING'} · ${formatElapsed(now() - started)}`;
    const width = Math.max(20, (out.columns || 80) - 1);
    return text.length > width ? `${text.slice(0, width - 1)}…` : text;
  };
  const draw = () => {
    out.write(`\r\x1b[2K${line()}`);
    drawn = true;
  };
  const erase = () => {
    if (drawn) out.write('\r\x1b[2K');
    drawn = false;
  };

  if (out.isTTY) {
    timer = setInterval(draw, opts.refreshMs ?? 250);
    timer.unref();
  }

  return {
    status(u) {
      last = u;
      if (out.isTTY) return draw();
      const text = `${opts.label} ${describeStatus(u)} · ${formatElapsed(now() - started)}`;
      const key = `${u.status}|${u.position}|${u.attempt}|${u.deploymentNote}`;
      if (key !== lastPlain) out.write(`${text}\n`);
      lastPlain = key;
    },
    print(text, to = out) {
      erase();
      to.write(`${text}\n`);
      if (timer) draw();
    },
    end() {
      if (timer) clearInterval(timer);
      timer = null;
      erase();
    },
  };
}
