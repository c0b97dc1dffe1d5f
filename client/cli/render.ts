// Text views of the cluster, the queues and the agents (what `ndif status`, `queue` and `agents` print).
import type { AgentsReply, ClusterReply, QueueReply, RequestsReply } from '../sdk/wire.js';
import { formatAge, formatBytes, table } from './output.js';

export function renderCluster(c: ClusterReply, url: string): string {
  const t = c.totals;
  const lines = [
    `fabric ${url} · log position ${c.asOf} · requests: ${t.received} received, ${t.completed} completed, ${t.failed} failed, ${t.cancelled} cancelled, ${t.requeued} requeued`,
    '',
  ];
  const cp = c.controlPlane;
  if (cp !== undefined && cp.restarts > 0 && cp.lastExit !== null) {
    const how = cp.lastExit.signal !== null ? `killed by ${cp.lastExit.signal}` : `exit code ${cp.lastExit.code}`;
    lines.push(
      `control plane restarted ${cp.restarts} time${cp.restarts === 1 ? '' : 's'}; the last one that died (pid ${cp.lastExit.pid}) ended ${how} at ${cp.lastExit.at}${cp.lastExit.stderrTail.length > 0 ? `: ${cp.lastExit.stderrTail.at(-1)}` : ''}`,
      '',
    );
  }
  if (c.agents.length === 0) lines.push('no agents registered (start one: `npm start` runs an embedded agent)');
  else if (c.agents.some((a) => a.fault !== undefined)) lines.push(...faultLines(c.agents), '');
  else {
    lines.push(
      table(
        ['AGENT', 'STATE', 'GPUS', 'RAM', 'RESTARTS'],
        c.agents.map((a) => [a.agentId, a.state, a.gpus.length, formatBytes(a.ramBytes), a.restarts]),
      ),
      '',
      table(
        ['GPU', 'NAME', 'MEMORY', 'USED', 'FREE', 'REPLICAS'],
        c.gpus.map((g) => [
          `${g.agentId}/${g.index}`,
          g.name,
          formatBytes(g.memoryBytes),
          formatBytes(g.usedBytes),
          formatBytes(g.memoryBytes - g.usedBytes),
          g.replicas.join(', ') || '-',
        ]),
      ),
    );
  }
  lines.push('');
  if (c.deployments.length === 0)
    lines.push('no deployments (`ndif deploy <model>`; a request for a model not deployed deploys it on demand)');
  else {
    lines.push(
      table(
        ['MODEL', 'PHASE', 'PINNED', 'QUEUE', 'REPLICAS'],
        c.deployments.map((d) => [
          d.modelKey,
          d.phase,
          d.pinned ? 'yes' : 'no',
          d.queueLength ?? '-',
          d.replicas.length
            ? d.replicas
                .map(
                  (r) =>
                    `${r.replicaId} ${r.level}${r.state !== r.level ? `/${r.state}` : ''}${r.agentId ? ` (${r.agentId} GPU ${r.gpus.join(',')})` : ''}`,
                )
                .join('; ')
            : 'none',
        ]),
      ),
    );
    for (const d of c.deployments)
      if (d.lastFailure)
        lines.push(
          `  ${d.modelKey}: last ${d.lastFailure.kind === 'REFUSED' ? 'refusal' : 'failure'} (${d.lastFailure.replicaId}): ${d.lastFailure.text}`,
        );
  }
  return `${lines.join('\n')}\n`;
}

/** What RANK means, printed under the queue table. */
export const RANK_LEGEND =
  'RANK: 0 priority requeued, 1 priority, 2 normal requeued, 3 normal; served by rank, then time enqueued (a key at its running limit is passed over)';

export function renderQueue(q: QueueReply, now: number): string {
  if (q.queues.every((x) => x.length === 0)) return 'every queue is empty\n';
  const out: string[] = [];
  for (const x of q.queues) {
    if (x.length === 0) continue;
    out.push(
      `${x.model}: ${x.length} waiting${x.entries.length < x.length ? ` (first ${x.entries.length} shown)` : ''}`,
    );
    out.push(
      table(
        ['POS', 'REQUEST', 'SUBMITTER', 'RANK', 'PRIORITY', 'REQUEUED', 'WAITING'],
        x.entries.map((e) => [
          e.position,
          e.requestId,
          e.submitter ?? '-',
          e.rank,
          e.priority ? 'yes' : 'no',
          e.requeued ? 'yes' : 'no',
          formatAge(e.enqueuedAt, now).replace(/ ago$/, ''),
        ]),
      ),
      '',
    );
  }
  out.push(RANK_LEGEND);
  return `${out.join('\n').trimEnd()}\n`;
}

/** `ndif requests`: who runs what, since when, in which phase. */
export function renderRequests(r: RequestsReply, now: number): string {
  if (r.requests.length === 0) return 'no requests waiting or running\n';
  return `${table(
    ['REQUEST', 'SUBMITTER', 'MODEL', 'PHASE', 'SINCE', 'RECEIVED', 'ATTEMPT', 'AGENT'],
    r.requests.map((x) => [
      x.requestId,
      x.submitter,
      x.model,
      x.status === 'QUEUED' && x.position !== null ? `QUEUED #${x.position + 1}` : x.status,
      formatAge(x.since ?? x.receivedAt, now).replace(/ ago$/, ''),
      formatAge(x.receivedAt, now),
      x.attempt ?? '-',
      x.agentId ?? '-',
    ]),
  )}\n`;
}

/** One line per agent that refused its configuration: the code and what to fix. */
function faultLines(agents: Array<{ agentId: string; fault?: { code: string; message: string } }>): string[] {
  return agents.flatMap((a) =>
    a.fault === undefined
      ? []
      : [
          `agent ${a.agentId} FAULTED ${a.fault.code}: ${a.fault.message} (not restarted: fix the setting and restart the fabric)`,
        ],
  );
}

export function renderAgents(a: AgentsReply, now: number): string {
  if (a.agents.length === 0) return 'no agents registered\n';
  const faults = faultLines(a.agents);
  return `${table(
    ['AGENT', 'STATE', 'HEALTH', 'SINCE', 'GPUS', 'RAM', 'BOOT', 'LAPSES', 'RESTARTS'],
    a.agents.map((x) => [
      x.agentId,
      x.state,
      x.health?.state ?? '-',
      formatAge(x.health?.since, now),
      x.gpus.map((g) => `${g.index}:${g.name} ${formatBytes(g.memoryBytes)}`).join(', '),
      formatBytes(x.ramBytes),
      x.bootId.slice(0, 8),
      x.health?.lapses ?? '-',
      x.health?.restarts ?? '-',
    ]),
  )}\n${faults.length === 0 ? '' : `\n${faults.join('\n')}\n`}`;
}
