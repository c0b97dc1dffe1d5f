// The derived indexes the scheduler's rules read (capacity index, replicas per state / model / agent, agents that
// need the agent rules, in-flight counts, time-limit deadlines) against the same facts worked out by scanning the
// state, after every event of the golden logs, and again after a snapshot round trip (they are rebuilt, not stored).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { capacities } from '../../projections/cluster/queries.js';
import { expired } from '../../projections/control-plane/deadlines.js';
import {
  applyControlPlane,
  controlPlaneFromSnapshot,
  controlPlaneToSnapshot,
  initialControlPlaneState,
  type ControlPlaneState,
} from '../../projections/control-plane/state.js';
import { executionLimitMs } from '../../projections/control-plane/deadlines.js';
import { readFixture } from '../golden/record.js';

const ON_AGENT = new Set(['PLACED', 'LOADING', 'HOT', 'DEMOTING', 'UNLOADING', 'WARM']);
const sorted = <T>(xs: Iterable<T>) => [...xs].map((x) => JSON.stringify(x)).sort();

function checkIndexes(s: ControlPlaneState, where: string): void {
  const c = s.cluster;
  for (const a of capacities(c)) {
    const got = c.index.capacity.capacity(a.agentId)!;
    assert.deepEqual(
      { ...got, replicas: sorted(got.replicas) },
      { ...a, replicas: sorted(a.replicas) },
      `${where}: capacity of ${a.agentId}`,
    );
  }
  const byState = new Map<string, string[]>();
  const onAgent = new Map<string, string[]>();
  const live = new Map<string, string[]>();
  for (const r of c.replicas.values()) {
    if (r.state === 'REMOVED' || r.state === 'FAILED') continue;
    byState.set(r.state, [...(byState.get(r.state) ?? []), r.replicaId]);
    live.set(r.modelKey, [...(live.get(r.modelKey) ?? []), r.replicaId]);
    if (r.agentId !== null && ON_AGENT.has(r.state))
      onAgent.set(r.agentId, [...(onAgent.get(r.agentId) ?? []), r.replicaId]);
  }
  const asLists = (m: Map<string, Set<string>>) => new Map([...m].map(([k, v]) => [k, [...v].sort()]));
  const sortedLists = (m: Map<string, string[]>) => new Map([...m].map(([k, v]) => [k, [...v].sort()]));
  assert.deepEqual(asLists(c.index.byState), sortedLists(byState), `${where}: replicas per state`);
  assert.deepEqual(asLists(c.index.onAgent), sortedLists(onAgent), `${where}: replicas per agent`);
  // Live replicas per model keep the order they were requested in (dispatch and autoscale read them in order).
  assert.deepEqual(new Map([...c.index.liveByModel].map(([k, v]) => [k, [...v]])), live, `${where}: live replicas`);
  const attention = new Set<string>();
  for (const [agentId, ids] of onAgent) {
    const a = c.agents.get(agentId)!;
    if (
      a.state === 'LOST' ||
      ids.some((id) => c.replicas.get(id)!.bootId !== null && c.replicas.get(id)!.bootId !== a.bootId)
    )
      attention.add(agentId);
  }
  assert.deepEqual([...c.index.attention].sort(), [...attention].sort(), `${where}: agents needing the agent rules`);

  const byAgent = new Map<string, { count: number; isolated: number }>();
  const bySubmitter = new Map<string, number>();
  for (const ids of s.requests.inFlightByReplica.values())
    for (const id of ids) {
      const v = s.requests.byId.get(id)!;
      const a = byAgent.get(v.agentId!) ?? { count: 0, isolated: 0 };
      a.count++;
      if (v.isolated) a.isolated++;
      byAgent.set(v.agentId!, a);
      bySubmitter.set(v.submitter, (bySubmitter.get(v.submitter) ?? 0) + 1);
    }
  assert.deepEqual(s.requests.inFlightByAgent, byAgent, `${where}: in flight per agent`);
  assert.deepEqual(s.requests.runningBySubmitter, bySubmitter, `${where}: in flight per submitter`);

  // Deadlines: at a time far ahead every limit has passed; the heap must name exactly the requests a scan finds.
  const far = s.position === 0 ? 0 : Date.parse('2100-01-01T00:00:00Z');
  const scan: string[] = [];
  for (const id of s.requests.active) {
    const v = s.requests.byId.get(id)!;
    if ((v.status === 'DISPATCHED' || v.status === 'RUNNING') && v.dispatchedAtMs !== null) {
      if (executionLimitMs(c, v) !== null) scan.push(`execution ${id}`);
    } else if (v.status === 'QUEUED' && v.queuedAtMs !== null && v.options.queueTimeoutMs !== null)
      scan.push(`queue ${id}`);
  }
  const fromHeap = expired(s.deadlines, s.requests, far).map(({ d }) => `${d.kind} ${d.requestId}`);
  assert.deepEqual(fromHeap.sort(), far === 0 ? [] : scan.sort(), `${where}: deadlines`);
}

describe('derived indexes of the control plane view', () => {
  for (const name of ['normal-day', 'eviction-storm', 'agent-loss']) {
    it(`${name}: match a scan of the state after every event, and after a snapshot round trip`, () => {
      const { events } = readFixture(name);
      assert.ok(events.length > 100, `${name} has ${events.length} events`);
      const s = initialControlPlaneState();
      for (const e of events) {
        applyControlPlane(s, e);
        checkIndexes(s, `${name} at ${e.position} (${e.type})`);
      }
      const restored = controlPlaneFromSnapshot(JSON.parse(JSON.stringify(controlPlaneToSnapshot(s))));
      checkIndexes(restored, `${name} restored`);
      assert.equal(restored.cluster.index.capacity.free.size, s.cluster.index.capacity.free.size);
    });
  }
});
