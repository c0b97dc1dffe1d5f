// `ndif replay` for people: the agents and GPUs, deployments and replicas, queues and request counts as they were.
import { fmtBytes } from '../domain/shared/format.js';
import type { ReplayDiff } from './replay-diff.js';
import type { ReplayReport } from './replay.js';
import { table } from './table.js';

export function renderReplay(r: ReplayReport): string {
  const t = r.target;
  const lines = [
    `replay to ${t.kind} ${t.requested}: position ${t.position} of ${r.headPosition}${t.at === null ? '' : ` (${t.at})`}, ${r.events} event(s) folded in a throwaway store ` +
      `(copy ${r.timings.copyMs} ms, fold ${r.timings.foldMs} ms)${r.store.kept ? `, kept at ${r.store.path}` : ''}`,
    '',
    'agents',
  ];
  const health = new Map(r.agents.map((a) => [a.agentId, a]));
  lines.push(
    ...table(
      ['agent', 'state', 'boot', 'since', 'grace until', 'restarts', 'lapses'],
      r.cluster.agents.map((a) => {
        const h = health.get(a.agentId);
        return [
          a.agentId,
          a.state,
          a.bootId,
          h?.since ?? '',
          h?.graceUntil ?? '',
          String(a.restarts),
          String(h?.lapses ?? 0),
        ];
      }),
    ),
  );
  lines.push('', 'gpus');
  lines.push(
    ...table(
      ['agent', 'gpu', 'memory', 'used', 'replicas'],
      r.cluster.gpus.map((g) => [
        g.agentId,
        String(g.index),
        fmtBytes(g.memoryBytes),
        fmtBytes(g.usedBytes),
        g.replicas.join(' '),
      ]),
    ),
  );
  lines.push('', 'deployments');
  const rows: string[][] = [];
  for (const d of r.cluster.deployments) {
    if (d.replicas.length === 0)
      rows.push([d.modelKey, d.phase, d.pinned ? 'yes' : '', '-', '', '', '', '', d.lastFailure?.text ?? '']);
    for (const x of d.replicas)
      rows.push([
        d.modelKey,
        d.phase,
        d.pinned ? 'yes' : '',
        x.replicaId,
        x.state,
        x.level,
        x.agentId ?? '',
        x.gpus.join('+'),
        d.lastFailure?.text ?? '',
      ]);
  }
  lines.push(
    ...table(['model', 'phase', 'pinned', 'replica', 'state', 'level', 'agent', 'gpus', 'last failure'], rows),
  );
  lines.push('', 'queues');
  if (r.queues.length === 0) lines.push('  (empty)');
  for (const q of r.queues) {
    lines.push(`  ${q.modelKey}: ${q.length} queued`);
    lines.push(
      ...table(
        ['pos', 'request', 'rank', 'priority', 'requeued', 'enqueued'],
        q.head.map((e) => [
          String(e.position),
          e.requestId,
          String(e.rank),
          e.priority ? 'yes' : '',
          e.requeued ? 'yes' : '',
          e.enqueuedAt,
        ]),
        '    ',
      ),
    );
    if (q.length > q.head.length) lines.push(`    … ${q.length - q.head.length} more`);
  }
  const tot = r.requests.totals;
  lines.push(
    '',
    `requests: ${tot.received} received, ${tot.completed} completed, ${tot.failed} failed, ${tot.cancelled} cancelled, ${tot.requeued} requeue(s)`,
  );
  lines.push(
    `  by status: ${
      Object.entries(r.requests.byStatus)
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }`,
  );
  for (const f of r.requests.inFlight) lines.push(`  in flight on ${f.replicaId}: ${f.requestIds.join(' ')}`);
  return lines.join('\n');
}

export function renderReplayDiff(d: ReplayDiff): string {
  const lines = [
    `replay diff: position ${d.from.position} → ${d.to.position} (${d.to.position - d.from.position} event(s))`,
    '',
  ];
  const arrow = (a: string | number | null, b: string | number | null) => `${a ?? '—'} → ${b ?? '—'}`;
  lines.push('agents');
  lines.push(
    ...(d.agents.length === 0
      ? ['  (no change)']
      : table(
          ['agent', 'state'],
          d.agents.map((a) => [a.agentId, arrow(a.from, a.to)]),
        )),
  );
  lines.push('', 'replicas');
  lines.push(
    ...(d.replicas.length === 0
      ? ['  (no change)']
      : table(
          ['replica', 'state', 'agent'],
          d.replicas.map((r) => [r.replicaId, arrow(r.from, r.to), arrow(r.fromAgent, r.toAgent)]),
        )),
  );
  lines.push('', 'queues');
  lines.push(
    ...(d.queues.length === 0
      ? ['  (no change)']
      : table(
          ['model', 'queued'],
          d.queues.map((q) => [q.modelKey, arrow(q.from, q.to)]),
        )),
  );
  lines.push('', 'requests');
  lines.push(
    ...table(
      ['total', 'change'],
      Object.entries(d.requests).map(([k, v]) => [k, arrow(v.from, v.to)]),
    ),
  );
  return lines.join('\n');
}
