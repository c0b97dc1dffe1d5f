// A request's recorded statuses and log lines, read from its stream (GET /requests/:id).
import type { StoredEvent } from '../../eventstore/port.js';
import { eventDraft } from './messages.js';

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

export function historyOf(events: StoredEvent[]): { statuses: HistoryEntry[]; logs: LogEntry[]; logsTruncated: boolean } {
  const statuses: HistoryEntry[] = [];
  let logs: LogEntry[] = [];
  let dropped = 0;
  for (const e of events) {
    const d = eventDraft(e, null, true);
    if (d === undefined) continue;
    const m = d.msg;
    if (m.status === 'STREAM') continue;
    if (m.status === 'LOG') {
      logs.push({ attempt: m.attempt as number, stream: m.stream as 'stdout' | 'stderr', line: m.line as string });
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
  return { statuses, logs, logsTruncated: dropped > 0 };
}
