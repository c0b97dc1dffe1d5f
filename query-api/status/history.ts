// A request's recorded statuses and log lines, read from its stream (GET /requests/:id).
import type { StoredEvent } from '../../eventstore/port.js';
import { decode } from '../../projections/decode.js';
import { eventDraft, messagesOf } from './messages.js';

export interface HistoryEntry {
  status: string;
  at: string;
  cursor: string;
  attempt?: number;
  reason?: string;
  /** TRACE: which trace of a session, of how many, what happened to it, how long it ran. */
  trace?: number;
  traces?: number;
  traceStatus?: string;
  ms?: number;
  /** A repeated trace (a loop): its iterations, how many are done, the latest reported value. */
  iterations?: number;
  done?: number;
  reported?: { iteration: number; value: number | Record<string, number> };
}

export interface LogEntry {
  attempt: number;
  stream: 'stdout' | 'stderr';
  line: string;
}

export const MAX_LOG_LINES = 1000;

/**
 * `logsTruncated`: only the last MAX_LOG_LINES lines are shown here; `logCapped`: an attempt reached its log
 * limits and the fabric dropped the rest of its output (the last line shown is the LOG_TRUNCATED note).
 */
export function historyOf(events: StoredEvent[]): {
  statuses: HistoryEntry[];
  logs: LogEntry[];
  logsTruncated: boolean;
  logCapped: boolean;
} {
  const statuses: HistoryEntry[] = [];
  // Log events are only noted on the way forward; their lines are read backwards from the last one, as many as
  // are shown (a request that logged 200,000 lines costs 1,000 here, not 200,000).
  const logEvents: StoredEvent[] = [];
  let logCapped = false;
  for (const e of events) {
    if (e.type === 'RequestLogged' || e.type === 'RequestLogTruncated') {
      logEvents.push(e);
      if (e.type === 'RequestLogTruncated') logCapped = true;
      continue;
    }
    const d = eventDraft(e, null, true);
    if (d === undefined) continue;
    const m = d.msg;
    if (m.status === 'STREAM') continue;
    const h: HistoryEntry = { status: m.status, at: m.at, cursor: m.cursor };
    if (typeof m.attempt === 'number') h.attempt = m.attempt;
    const requeued = m.requeued as { reason?: string } | undefined;
    if (requeued?.reason !== undefined) h.reason = requeued.reason;
    if (m.status === 'TRACE') {
      h.trace = m.trace as number;
      h.traces = m.traces as number;
      h.traceStatus = m.traceStatus as string;
      if (typeof m.ms === 'number') h.ms = m.ms;
      if (typeof m.iterations === 'number') {
        h.iterations = m.iterations;
        h.done = m.done as number;
      }
      if (m.reported !== undefined) h.reported = m.reported as NonNullable<HistoryEntry['reported']>;
    }
    statuses.push(h);
  }
  const logs: LogEntry[] = [];
  let total = 0;
  for (let i = logEvents.length - 1; i >= 0; i--) {
    if (logs.length >= MAX_LOG_LINES) {
      // Only counted from here on.
      const e = decode(logEvents[i]!);
      total += e?.type === 'RequestLogged' ? e.data.lines.length : 1;
      continue;
    }
    const d = eventDraft(logEvents[i]!, null, true);
    if (d === undefined) continue;
    const lines = messagesOf(d);
    total += lines.length;
    for (let j = lines.length - 1; j >= 0 && logs.length < MAX_LOG_LINES; j--) {
      const x = lines[j]!;
      logs.push({ attempt: x.attempt as number, stream: x.stream as 'stdout' | 'stderr', line: x.line as string });
    }
  }
  logs.reverse();
  return { statuses, logs, logsTruncated: total > logs.length, logCapped };
}
