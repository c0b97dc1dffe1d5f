// `ndif audit` for people: one line per event (position, time, actor, type, stream) and its sentence.
import type { AuditAnswer } from './audit.js';

export function renderAudit(a: AuditAnswer): string {
  const filters = Object.entries(a.filter)
    .filter(([k, v]) => v !== undefined && !(k === 'afterPosition' && v === 0) && !(k === 'limit' && v === 1000))
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  const lines = [
    `audit ${filters}: ${a.events.length} event(s) (from the ${a.source === 'audit-projection' ? 'audit projection' : a.source === 'audit-read-model' ? 'audit read model' : "event store's index"})`,
  ];
  for (const e of a.events) {
    lines.push(
      `#${e.position}  ${e.at}  ${e.actor}  ${e.type}  ${e.streamId}${e.rule === null ? '' : `  [${e.rule}]`}`,
    );
    lines.push(`    ${e.summary}`);
  }
  if (a.nextAfterPosition !== null) lines.push(`more: --after ${a.nextAfterPosition}`);
  return lines.join('\n');
}
