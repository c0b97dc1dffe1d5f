// What a user and an operator do to a fabric in the fault tests, over plain HTTP (as curl would): submit, cancel,
// read a request, deploy, evict, scale, read the agents and the cluster, and wait for a state.
import type { FaultFabric, KilledAgent } from './fabric.js';
import { until as pollUntil } from '../support/until.js';

export interface Answer {
  status: number;
  body: Record<string, unknown>;
}

export async function call(
  base: string,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const r = await fetch(`${base}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { ...(init.body === undefined ? {} : { 'content-type': 'application/json' }), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await r.text();
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = { text };
  }
  return { status: r.status, body };
}

/** Logs a line at layer 0, holds the forward pass for `ms`, returns layer 0's output. */
export function slowBlock(ms: number): string {
  return `async (m) => {
  const h = await m.transformer.h[0].output;
  console.log('slow ${ms}');
  await new Promise((r) => setTimeout(r, ${ms}));
  return h;
}`;
}

export const QUICK_BLOCK = `async (m) => {
  const h = await m.transformer.h[1].output;
  console.log('layer 1', h.shape.join('x'));
  return h;
}`;

export function submit(
  f: FaultFabric,
  requestId: string,
  opts: { model?: string; block?: string; input?: string } = {},
): Promise<Answer> {
  return call(f.commandUrl, '/requests', {
    body: {
      requestId,
      model: opts.model ?? 'gpt2-tiny',
      invokes: [{ input: opts.input ?? 'The Eiffel Tower is in', block: opts.block ?? QUICK_BLOCK }],
    },
    headers: f.operatorHeaders,
  });
}

// As the operator (auth on: the harness's operator key).
export const cancel = (f: FaultFabric, requestId: string) =>
  call(f.commandUrl, `/requests/${encodeURIComponent(requestId)}/cancel`, { body: {}, headers: f.operatorHeaders });
export const getRequest = (f: FaultFabric, requestId: string) =>
  call(f.queryUrl, `/requests/${encodeURIComponent(requestId)}`, { headers: f.operatorHeaders });
/** Deploys with one request at a time per replica (the scenarios count the requests a replica runs) unless told. */
export const deploy = (f: FaultFabric, body: Record<string, unknown>) =>
  call(f.commandUrl, '/deployments', { body: { concurrency: 1, ...body }, headers: f.operatorHeaders });
export const evict = (f: FaultFabric, body: Record<string, unknown>) =>
  call(f.commandUrl, '/deployments/evict', { body, headers: f.operatorHeaders });
export const scale = (f: FaultFabric, model: string, replicas: number) =>
  call(f.commandUrl, '/deployments/scale', { body: { model, replicas }, headers: f.operatorHeaders });
export const pin = (f: FaultFabric, model: string, pinned: boolean) =>
  call(f.commandUrl, '/deployments/pin', { body: { model, pinned }, headers: f.operatorHeaders });

export async function expectOk(p: Promise<Answer>, what: string): Promise<Answer> {
  const a = await p;
  if (a.status < 200 || a.status > 299) throw new Error(`${what}: ${a.status} ${JSON.stringify(a.body)}`);
  return a;
}

/** `until` (tests/support) with this folder's defaults: 30 s, polled every 50 ms. */
export function until<T>(
  what: string | (() => string),
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<T> {
  return pollUntil(what, probe, timeoutMs, everyMs);
}

/** Waits until the request is in one of `statuses`; returns its view. */
export function requestIn(
  f: FaultFabric,
  requestId: string,
  statuses: string[],
  timeoutMs = 30_000,
): Promise<Record<string, unknown>> {
  let last = '';
  return until(
    () => `${requestId} in ${statuses.join('|')} (last ${last})`,
    async () => {
      const r = await getRequest(f, requestId);
      last = String(r.body.status);
      return statuses.includes(last) ? r.body : undefined;
    },
    timeoutMs,
  );
}

interface ClusterView {
  agents: Array<{ agentId: string; state: string; bootId: string }>;
  deployments: Array<{
    modelKey: string;
    replicas: Array<{ replicaId: string; state: string; level: string; agentId: string | null }>;
  }>;
}

export async function cluster(f: FaultFabric): Promise<ClusterView> {
  return (await call(f.queryUrl, '/cluster', { headers: f.operatorHeaders })).body as unknown as ClusterView;
}

/** Waits until `model` has at least `n` HOT replicas. */
export function hot(f: FaultFabric, model: string, n = 1, timeoutMs = 30_000): Promise<string[]> {
  return until(
    `${n} HOT replica(s) of ${model}`,
    async () => {
      const d = (await cluster(f)).deployments.find((x) => x.modelKey === model);
      const ids = (d?.replicas ?? []).filter((r) => r.level === 'HOT').map((r) => r.replicaId);
      return ids.length >= n ? ids : undefined;
    },
    timeoutMs,
  );
}

export async function bootOf(f: FaultFabric): Promise<string | null> {
  const a = (await call(f.queryUrl, '/agents', { headers: f.operatorHeaders })).body.agents as
    | Array<{ agentId: string; bootId: string }>
    | undefined;
  return a?.find((x) => x.agentId === f.agentId)?.bootId ?? null;
}

/** Another agent process runs and the control plane has its new boot ACTIVE. */
export function agentBack(f: FaultFabric, killed: KilledAgent, timeoutMs = 30_000): Promise<string> {
  return until(
    `agent ${f.agentId} back after kill of pid ${killed.pid}`,
    async () => {
      const pid = f.agentPid();
      if (pid === undefined || pid === killed.pid) return undefined;
      const a = (
        (await call(f.queryUrl, '/agents', { headers: f.operatorHeaders })).body.agents as Array<{
          agentId: string;
          bootId: string;
          state: string;
        }>
      ).find((x) => x.agentId === f.agentId);
      return a !== undefined && a.bootId !== killed.bootId && a.state === 'ACTIVE' ? a.bootId : undefined;
    },
    timeoutMs,
  );
}
