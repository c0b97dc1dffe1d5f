// After a scripted day of traffic, every projection rebuilt from position 0 equals the live one, a restart from
// the runner's snapshot equals it too, and each request's projected status equals its aggregate's state.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { requestDecider } from '../../domain/request/decide.js';
import { upcast } from '../../domain/events/registry.js';
import type { RequestEvent } from '../../domain/events/types.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { controlPlaneToSnapshot, foldControlPlane } from '../../projections/control-plane/state.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { startHarness, type Harness } from '../scheduler/harness.js';
import { DAY_MODELS, runScriptedDay } from './scripted-day.js';

let dir: string;
let h: Harness;
let log: StoredEvent[];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ndif-rebuild-'));
  h = await startHarness({ onDemand: DAY_MODELS, path: join(dir, 'events.db') });
  const stats = await runScriptedDay(h, { minutes: 8 * 60 });
  console.log(`scripted day: ${stats.requests} requests, ${stats.events} events`);
  log = [];
  for (let after = 0; ; ) {
    const page = await h.store.readAll({ afterPosition: after, limit: 10_000 });
    if (page.length === 0) break;
    log.push(...page);
    after = page[page.length - 1].position;
  }
});

after(async () => {
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

const canonical = (s: Parameters<typeof controlPlaneToSnapshot>[0]) => JSON.stringify(controlPlaneToSnapshot(s));

it('the day covered what it should (requeues of every kind, refusals, restarts, drains, cancels, timeouts)', () => {
  const count = (t: string) => log.filter((e) => e.type === t).length;
  const reasons = new Set(
    log.filter((e) => e.type === 'RequestRequeued').map((e) => (e.data as { reason: string }).reason),
  );
  const errors = new Set(
    log.filter((e) => e.type === 'RequestFailed').map((e) => (e.data as { errorType: string }).errorType),
  );
  console.log({
    requeueReasons: [...reasons],
    errorTypes: [...errors],
    completed: count('RequestCompleted'),
    cancelled: count('RequestCancelled'),
    refused: count('DeploymentRefused'),
  });
  for (const t of [
    'RequestCompleted',
    'RequestCancelled',
    'DeploymentRefused',
    'AgentUnresponsive',
    'AgentReturned',
    'AgentLost',
    'AgentDrained',
    'ReplicaReloadRequired',
    'RequestRequeued',
  ]) {
    assert.ok(count(t) > 0, `the day has ${t}`);
  }
  assert.ok(
    errors.has('Timeout') && errors.has('ModelNotDeployable') && errors.has('DeploymentRefused'),
    [...errors].join(', '),
  );
  for (const r of ['PREEMPTED', 'AGENT_RESTARTED', 'AGENT_LOST']) assert.ok(reasons.has(r), `the day requeues ${r}`);
});

it('every request ended COMPLETED, ERROR with a reason, or CANCELLED; none is stuck, none completed twice', () => {
  const s = h.state();
  for (const v of s.requests.byId.values()) {
    assert.ok(['COMPLETED', 'ERROR', 'CANCELLED'].includes(v.status), `${v.requestId} is ${v.status}`);
    if (v.status === 'ERROR') assert.ok(v.error!.message.length > 0);
  }
  const completions = new Map<string, number>();
  for (const e of log)
    if (e.type === 'RequestCompleted') completions.set(e.streamId, (completions.get(e.streamId) ?? 0) + 1);
  assert.ok([...completions.values()].every((c) => c === 1));
});

it('a rebuild from position 0 equals the live projections', () => {
  const rebuilt = foldControlPlane(log);
  assert.equal(rebuilt.position, h.state().position);
  assert.equal(canonical(rebuilt), canonical(h.state()));
});

it('a view restarted from its snapshot and checkpoint equals the live projections', async () => {
  await h.view.stop();
  const again = new ControlPlaneView(h.store, new SqliteCheckpoints(h.store.db));
  await again.start();
  await again.catchUp();
  assert.ok(again.status().rebuiltBecause === undefined, 'it resumed from the snapshot');
  assert.equal(canonical(again.state), canonical(foldControlPlane(log)));
  await again.stop();
});

it('each request’s projected status equals the state its own stream folds to', () => {
  const s = foldControlPlane(log);
  const byStream = new Map<string, RequestEvent[]>();
  for (const e of log) {
    if (!e.streamId.startsWith('request-')) continue;
    const list = byStream.get(e.streamId) ?? [];
    list.push(upcast(e.type, e.version, e.data) as RequestEvent);
    byStream.set(e.streamId, list);
  }
  for (const [stream, events] of byStream) {
    const agg = events.reduce(requestDecider.evolve, requestDecider.initialState());
    const v = s.requests.byId.get(stream.slice('request-'.length))!;
    assert.equal(v.status, agg.status, stream);
    assert.equal(v.attempt, agg.attempt, stream);
  }
});
