// A request's output lines, batched: one report per LOG_BATCH.maxLines lines, maxBytes bytes or maxAgeMs,
// whichever comes first, and a last one when the run ends (before its COMPLETED or FAILED, on the same ordered
// chain of reports). At the attempt's log limits the batcher stops: the last batch says `truncated` and every
// later line is only counted. The control plane enforces the same limits; stopping here spares the transport.
import { LOG_BATCH, MAX_LOG_LINE_CHARS, utf8Length, type LogLimits } from '../../protocol/log-limits.js';

export interface LogBatch {
  lines: { stream: 'stdout' | 'stderr'; line: string }[];
  truncated: boolean;
}

export interface LogBatcherOptions {
  limits: LogLimits;
  batch?: { maxLines: number; maxBytes: number; maxAgeMs: number };
  /** Sends one batch (queued behind the earlier reports of the request). */
  send(batch: LogBatch): void;
}

export class LogBatcher {
  private lines: LogBatch['lines'] = [];
  private batchBytes = 0;
  private keptLines = 0;
  private keptBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private truncated = false;
  private noteSent = false;
  private closed = false;
  /** Lines dropped at the limits (not sent). */
  dropped = 0;

  constructor(private readonly options: LogBatcherOptions) {}

  push(stream: 'stdout' | 'stderr', text: string): void {
    if (this.closed) return;
    if (this.truncated) {
      this.dropped++;
      return;
    }
    const line = text.length > MAX_LOG_LINE_CHARS ? text.slice(0, MAX_LOG_LINE_CHARS) : text;
    const bytes = utf8Length(line);
    const { limits } = this.options;
    if (this.keptLines + 1 > limits.maxLines || this.keptBytes + bytes > limits.maxBytes) {
      this.truncated = true;
      this.dropped++;
      this.flush();
      return;
    }
    this.lines.push({ stream, line });
    this.keptLines++;
    this.keptBytes += bytes;
    this.batchBytes += bytes;
    const b = this.options.batch ?? LOG_BATCH;
    if (this.lines.length >= b.maxLines || this.batchBytes >= b.maxBytes) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), b.maxAgeMs);
  }

  /** Sends what is buffered (and, once, that the limits were reached). */
  flush(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const noteDue = this.truncated && !this.noteSent;
    if (this.lines.length === 0 && !noteDue) return;
    const batch: LogBatch = { lines: this.lines, truncated: this.truncated };
    this.lines = [];
    this.batchBytes = 0;
    if (this.truncated) this.noteSent = true;
    this.options.send(batch);
  }

  /** The run ended: sends the rest. */
  close(): void {
    this.flush();
    this.closed = true;
  }

  /** The run was aborted: drops the rest. */
  discard(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.lines = [];
    this.closed = true;
  }
}
