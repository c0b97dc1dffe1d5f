// A request's recorded statuses and log lines, read from its stream (GET /requests/:id).
import type { StoredEvent } from '../../eventstore/port.js';
import { eventDraft, messagesOf } from './messages.js';

export interface HistoryEntry {
  status: string;
  at: string;
  cursor: string;
  attempt?: number;
  reason?: string;
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
export function historyOf(events: StoredEvent[]): { statuses: HistoryEntry[]; logs: LogEntry[]; logsTruncated: boolean; logCapped: boolean } {
  const statuses: HistoryEntry[] = [];
  let logs: LogEntry[] = [];
  let dropped = 0;
  let logCapped = false;
  for (const e of events) {
    const d = eventDraft(e, null, true);
    if (d === undefined) continue;
    const m = d.msg;
    if (m.status === 'LOG') {
      for (const x of messagesOf(d)) logs.push({ attempt: x.attempt as number, stream: x.stream as 'stdout' | 'stderr', line: x.line as string });
      if (m.code === 'LOG_TRUNCATED') logCapped = true;
      if (logs.length > 2 * MAX_LOG_LINES) {
        dropped += logs.length - MAX_LOG_LINES;
        logs = logs.slice(-MAX_LOG_LINES);
      }
      continue;
    }
    const h: HistoryEntry = { status: m.status, at: m.at, cursor: m.cursor };
    if (typeof m.attempt === 'number') h.attempt = m.attempt;
    const requeued = m.requeued as { reason?: string } | undefined;
    if (requeued?.reason !== undefined) h.reason = requeued.reason;
    statuses.push(h);
  }
  if (logs.length > MAX_LOG_LINES) {
    dropped += logs.length - MAX_LOG_LINES;
    logs = logs.slice(-MAX_LOG_LINES);
  }
  return { statuses, logs, logsTruncated: dropped > 0, logCapped };
}
