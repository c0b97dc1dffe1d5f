// How much a request may log: lines and UTF-8 bytes per attempt (beyond them the rest is dropped and one
// LOG_TRUNCATED note is recorded), and how the agent batches lines into reports (one report, and one event, per
// batch). Shared by the agent, which stops sending at the limits, and the control plane, which enforces them.

export interface LogLimits {
  /** Lines kept per attempt. */
  maxLines: number;
  /** UTF-8 bytes of line text kept per attempt. */
  maxBytes: number;
}

export const DEFAULT_LOG_LIMITS: LogLimits = Object.freeze({ maxLines: 10_000, maxBytes: 1024 * 1024 });

/** A batch is sent when it holds this many lines, this many bytes, or when it is this old. */
export const LOG_BATCH = Object.freeze({ maxLines: 250, maxBytes: 64 * 1024, maxAgeMs: 50 });

/** Longest line kept (longer ones are cut). */
export const MAX_LOG_LINE_CHARS = 65536;

/** UTF-8 length of a string, without encoding it. */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Reads NDIF_LOG_MAX_LINES / NDIF_LOG_MAX_BYTES (positive integers); unset: the defaults. */
export function logLimitsFromEnv(env: Readonly<Record<string, string | undefined>>): LogLimits {
  const read = (name: string, fallback: number): number => {
    const v = env[name];
    if (v === undefined || v === '') return fallback;
    if (!/^[1-9][0-9]{0,12}$/.test(v))
      throw new RangeError(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  return {
    maxLines: read('NDIF_LOG_MAX_LINES', DEFAULT_LOG_LIMITS.maxLines),
    maxBytes: read('NDIF_LOG_MAX_BYTES', DEFAULT_LOG_LIMITS.maxBytes),
  };
}

/**
 * The block side's share of the limits: a block that writes without end (a `console.log` loop) must not fill its
 * process's memory with lines the agent will drop anyway. Lines are admitted while they fit the limits, plus the
 * first one beyond them (so the agent's batcher sees the limit reached and records the LOG_TRUNCATED note); every
 * later line is only counted. Trusted (in the agent) and untrusted (in a sandbox runner) blocks apply the same quota.
 */
export class LogQuota {
  private lines = 0;
  private bytes = 0;
  private over = false;
  /** Lines refused (written after the limits were reached). */
  dropped = 0;

  constructor(private readonly limits: LogLimits) {}

  admit(line: string): boolean {
    if (this.over) {
      this.dropped++;
      return false;
    }
    const cut = line.length > MAX_LOG_LINE_CHARS ? line.slice(0, MAX_LOG_LINE_CHARS) : line;
    this.lines++;
    this.bytes += utf8Length(cut);
    if (this.lines > this.limits.maxLines || this.bytes > this.limits.maxBytes) this.over = true;
    return true;
  }
}
