// Why a recent change happened, as `ndif why` tells it (forensics/why.ts): the change's own step in its subject's
// causal history — the sentence and rule it recorded — and the chain of events and the command that caused it.
// Recorded facts never change, so each answer is kept by position.
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import { explainWhy, type CauseLink } from '../../forensics/why.js';
import { CHANGE_KINDS } from './recent-changes.js';

export interface ChangeExplained {
  position: number;
  at: string;
  kind: 'requeue' | 'eviction' | 'demotion';
  model: string;
  /** The request (requeue) or replica (eviction, demotion) it happened to. */
  subject: string;
  reason: string | null;
  summary: string;
  rule: string | null;
  /** What caused it, nearest first: one line per event, then the command that started the chain. */
  causes: string[];
}

function causeLine(c: CauseLink): string {
  if (c.kind === 'event') return `${c.type} by ${c.actor}: ${c.summary}`;
  if (c.kind === 'command') return `command ${c.commandId} by ${c.actor} at ${c.at}`;
  if (c.kind === 'step') return `${c.type} at position ${c.position} (earlier in this history)`;
  return `event ${c.eventId}: ${c.note}`;
}

export class ChangeExplainer {
  private readonly cache = new Map<number, ChangeExplained>();

  constructor(private readonly store: EventStore) {}

  async explain(e: StoredEvent): Promise<ChangeExplained> {
    const hit = this.cache.get(e.position);
    if (hit !== undefined) return hit;
    const d = e.data as { requestId?: string; replicaId?: string; modelKey: string; reason?: string };
    const kind = CHANGE_KINDS[e.type]!;
    const subject = kind === 'requeue' ? d.requestId! : d.replicaId!;
    const report = await explainWhy(this.store, subject, {
      kind: kind === 'requeue' ? 'request' : 'replica',
      maxEffects: 0,
      queuePositions: false,
    });
    const step = report.steps.find((s) => s.position === e.position);
    const out: ChangeExplained = {
      position: e.position,
      at: e.metadata.at,
      kind,
      model: d.modelKey,
      subject,
      reason: d.reason ?? null,
      summary: step?.summary ?? e.type,
      rule: step?.rule ?? null,
      causes: (step?.causes ?? []).map(causeLine),
    };
    if (this.cache.size >= 500) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(e.position, out);
    return out;
  }
}
