// `ndif why` for people: one block per step (position, time, actor, event, the sentence, the decision's numbers),
// its causes as a chain of ← lines and its effects as → lines.
import type { Fact } from './describe.js';
import type { CauseLink, EventFacts, WhyReport } from './why.js';

function numbersLine(n: Record<string, Fact>): string {
  const parts = Object.entries(n).map(([k, v]) => `${k}=${v === null ? 'null' : String(v)}`);
  return parts.join(' ');
}

function head(f: Pick<EventFacts, 'position' | 'at' | 'actor' | 'type' | 'rule'>): string {
  return `#${f.position}  ${f.at}  ${f.actor}  ${f.type}${f.rule === null ? '' : `  [${f.rule}]`}`;
}

function detail(f: EventFacts, indent: string): string[] {
  const out = [`${indent}${f.summary}`];
  if (f.decision !== null && f.decision !== '' && !f.summary.includes(f.decision))
    out.push(`${indent}decision: ${f.decision}`);
  if (Object.keys(f.numbers).length > 0) out.push(`${indent}numbers: ${numbersLine(f.numbers)}`);
  const derived = Object.fromEntries(Object.entries(f.derived).filter(([, v]) => v !== null));
  if (Object.keys(derived).length > 0) out.push(`${indent}derived from the log: ${numbersLine(derived)}`);
  return out;
}

function cause(c: CauseLink, indent: string): string[] {
  switch (c.kind) {
    case 'event':
      return [`${indent}← ${head(c)}  (${c.streamId})`, ...detail(c, `${indent}    `)];
    case 'step':
      return [`${indent}← #${c.position} ${c.type} (above)`];
    case 'command':
      return [`${indent}← command ${c.commandId} by ${c.actor} at ${c.at}`];
    case 'unresolved':
      return [`${indent}← ? ${c.note}`];
  }
}

export function renderWhy(r: WhyReport): string {
  const lines = [
    `why ${r.subject.kind} ${r.subject.id}: ${r.steps.length} step(s) from ${r.subject.streamId} (log head at position ${r.headPosition})`,
    '',
  ];
  for (const s of r.steps) {
    lines.push(head(s));
    lines.push(...detail(s, '    '));
    const causes = s.causes.filter(
      (c) => !(c.kind === 'command' && s.decidedBy !== 'scheduler' && s.causes.length === 1),
    );
    if (causes.length > 0) {
      lines.push('    because:');
      for (const c of causes) lines.push(...cause(c, '      '));
    } else if (s.causes[0]?.kind === 'command') {
      lines.push(`    by command ${s.causes[0].commandId}`);
    }
    if (s.effects.length > 0) {
      lines.push('    caused:');
      for (const e of s.effects) lines.push(`      → ${head(e)}  (${e.streamId})`, `          ${e.summary}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}
