// Which events become which assignments for which agent (transport/relay/routing.ts), over a short history:
// placement, dispatch, cancel of a running attempt, requeue, a scheduler timeout, demotion, restore, reload after
// a restart, removal; and the events that route nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { StoredEvent } from '../../eventstore/port.js';
import { initialRelayState, route } from '../../transport/relay/routing.js';

let position = 0;
function ev(type: string, data: Record<string, unknown>): StoredEvent {
  position++;
  return {
    id: `e${position}`,
    type,
    version: 1,
    data: data as StoredEvent['data'],
    metadata: { correlationId: 'c', causationId: 'c', actor: 'a', at: '2025-01-01T00:00:00.000Z' },
    streamId: 's',
    revision: 0,
    position,
  };
}

test('placement, runs and aborts go to the agent that holds the replica, for its boot', () => {
  const s = initialRelayState();
  assert.deepEqual(route(s, ev('AgentRegistered', { agentId: 'a1', bootId: 'b1' })), []);
  assert.deepEqual(
    route(
      s,
      ev('ReplicaPlaced', {
        modelKey: 'm',
        replicaId: 'm#1',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [0],
        bytesPerGpu: 100,
      }),
    ),
    [
      {
        kind: 'load',
        agentId: 'a1',
        bootId: 'b1',
        replicaId: 'm#1',
        modelKey: 'm',
        gpus: [0],
        bytesPerGpu: 100,
        reason: 'PLACED',
      },
    ],
  );
  assert.deepEqual(route(s, ev('ReplicaLoading', { modelKey: 'm', replicaId: 'm#1', agentId: 'a1' })), []);
  assert.deepEqual(route(s, ev('RequestReceived', { requestId: 'r1' })), []);
  assert.deepEqual(
    route(s, ev('RequestDispatched', { requestId: 'r1', modelKey: 'm', attempt: 1, replicaId: 'm#1', agentId: 'a1' })),
    [{ kind: 'run', agentId: 'a1', bootId: 'b1', requestId: 'r1', attempt: 1, replicaId: 'm#1', modelKey: 'm' }],
  );
  assert.deepEqual(route(s, ev('RequestStarted', { requestId: 'r1', attempt: 1 })), []);
  assert.deepEqual(route(s, ev('RequestCancelled', { requestId: 'r1', attempt: 1 })), [
    { kind: 'abort', agentId: 'a1', bootId: 'b1', requestId: 'r1', attempt: 1, reason: 'CANCELLED' },
  ]);
  assert.deepEqual(route(s, ev('RequestCancelled', { requestId: 'r1', attempt: 1 })), [], 'nothing runs any more');

  route(s, ev('RequestDispatched', { requestId: 'r2', modelKey: 'm', attempt: 1, replicaId: 'm#1', agentId: 'a1' }));
  assert.deepEqual(route(s, ev('RequestRequeued', { requestId: 'r2', attempt: 1 })), [
    { kind: 'abort', agentId: 'a1', bootId: 'b1', requestId: 'r2', attempt: 1, reason: 'REQUEUED' },
  ]);
  route(s, ev('RequestDispatched', { requestId: 'r2', modelKey: 'm', attempt: 2, replicaId: 'm#1', agentId: 'a1' }));
  assert.deepEqual(
    route(s, ev('RequestFailed', { requestId: 'r2', attempt: 1, reportedBy: 'scheduler' })),
    [],
    'a stale attempt aborts nothing',
  );
  assert.deepEqual(route(s, ev('RequestFailed', { requestId: 'r2', attempt: 2, reportedBy: 'scheduler' })), [
    { kind: 'abort', agentId: 'a1', bootId: 'b1', requestId: 'r2', attempt: 2, reason: 'FAILED' },
  ]);
  route(s, ev('RequestDispatched', { requestId: 'r3', modelKey: 'm', attempt: 1, replicaId: 'm#1', agentId: 'a1' }));
  assert.deepEqual(
    route(s, ev('RequestFailed', { requestId: 'r3', attempt: 1, reportedBy: 'agent' })),
    [],
    'the agent reported it: nothing to abort',
  );
  route(s, ev('RequestDispatched', { requestId: 'r4', modelKey: 'm', attempt: 1, replicaId: 'm#1', agentId: 'a1' }));
  assert.deepEqual(route(s, ev('RequestCompleted', { requestId: 'r4', attempt: 1 })), []);
  assert.deepEqual(s.inFlight, {});
});

test('demote, restore, reload after a restart and removal follow the replica', () => {
  const s = initialRelayState();
  route(s, ev('AgentRegistered', { agentId: 'a1', bootId: 'b1' }));
  route(
    s,
    ev('ReplicaPlaced', { modelKey: 'm', replicaId: 'm#1', agentId: 'a1', bootId: 'b1', gpus: [1], bytesPerGpu: 7 }),
  );
  assert.deepEqual(
    route(s, ev('ReplicaDemotionRequested', { modelKey: 'm', replicaId: 'm#1' })),
    [],
    'the agent unloads only once the demotion completes',
  );
  assert.deepEqual(route(s, ev('ReplicaDemoted', { modelKey: 'm', replicaId: 'm#1', agentId: 'a1' })), [
    { kind: 'demote', agentId: 'a1', bootId: 'b1', replicaId: 'm#1', modelKey: 'm' },
  ]);
  assert.deepEqual(
    route(
      s,
      ev('ReplicaRestored', {
        modelKey: 'm',
        replicaId: 'm#1',
        forReplicaId: 'm#2',
        agentId: 'a1',
        bootId: 'b1',
        gpus: [0],
        bytesPerGpu: 7,
      }),
    ),
    [
      {
        kind: 'load',
        agentId: 'a1',
        bootId: 'b1',
        replicaId: 'm#1',
        modelKey: 'm',
        gpus: [0],
        bytesPerGpu: 7,
        reason: 'RESTORE',
      },
    ],
  );
  assert.deepEqual(
    route(s, ev('ReplicaRemoved', { modelKey: 'm', replicaId: 'm#2', reason: 'RESTORED_INTO' })),
    [],
    'the requested replica never reached an agent',
  );
  route(s, ev('AgentRegistered', { agentId: 'a1', bootId: 'b2' }));
  assert.deepEqual(
    route(
      s,
      ev('ReplicaReloadRequired', {
        modelKey: 'm',
        replicaId: 'm#1',
        agentId: 'a1',
        previousBootId: 'b1',
        bootId: 'b2',
      }),
    ),
    [
      {
        kind: 'load',
        agentId: 'a1',
        bootId: 'b2',
        replicaId: 'm#1',
        modelKey: 'm',
        gpus: [0],
        bytesPerGpu: 7,
        reason: 'RELOAD',
      },
    ],
  );
  assert.deepEqual(route(s, ev('ReplicaRemoved', { modelKey: 'm', replicaId: 'm#1', reason: 'EVICTED' })), [
    { kind: 'unload', agentId: 'a1', bootId: 'b2', replicaId: 'm#1', modelKey: 'm', reason: 'EVICTED' },
  ]);
  assert.deepEqual(route(s, ev('ReplicaRemoved', { modelKey: 'm', replicaId: 'm#1', reason: 'EVICTED' })), []);
  route(
    s,
    ev('ReplicaPlaced', { modelKey: 'm', replicaId: 'm#3', agentId: 'a1', bootId: 'b2', gpus: [0], bytesPerGpu: 7 }),
  );
  assert.deepEqual(
    route(s, ev('ReplicaFailed', { modelKey: 'm', replicaId: 'm#3', agentId: 'a1', phase: 'load', message: 'x' })),
    [{ kind: 'unload', agentId: 'a1', bootId: 'b2', replicaId: 'm#3', modelKey: 'm', reason: 'FAILED' }],
  );
  for (const type of [
    'DeploymentRequested',
    'ReplicaRequested',
    'DeploymentRefused',
    'AgentUnresponsive',
    'AgentLost',
    'AgentReportIgnored',
    'RequestLogged',
    'RequestQueued',
  ]) {
    assert.deepEqual(route(s, ev(type, { modelKey: 'm', replicaId: 'm#9', agentId: 'a1', requestId: 'r9' })), [], type);
  }
  assert.deepEqual(s.replicas, {});
});

test('a replica requested with dtype int8 or int4 is loaded quantized, on placement, restore and reload alike', () => {
  const s = initialRelayState();
  route(s, ev('AgentRegistered', { agentId: 'a1', bootId: 'b1' }));
  const requested = (replicaId: string, dtype: string) =>
    route(s, ev('ReplicaRequested', { modelKey: 'm', replicaId, settings: { dtype } }));
  assert.deepEqual(requested('m#1', 'int8'), []);
  assert.deepEqual(requested('m#2', 'float32'), []);
  const placed = (replicaId: string) =>
    route(
      s,
      ev('ReplicaPlaced', { modelKey: 'm', replicaId, agentId: 'a1', bootId: 'b1', gpus: [0], bytesPerGpu: 100 }),
    )[0] as { quantize?: string };
  assert.equal(placed('m#1').quantize, 'int8');
  assert.equal(placed('m#2').quantize, undefined, 'a float replica is loaded as stored');
  const restored = route(
    s,
    ev('ReplicaRestored', {
      modelKey: 'm',
      replicaId: 'm#1',
      agentId: 'a1',
      bootId: 'b1',
      gpus: [0],
      bytesPerGpu: 100,
    }),
  )[0] as { quantize?: string };
  assert.equal(restored.quantize, 'int8');
  route(s, ev('ReplicaRemoved', { modelKey: 'm', replicaId: 'm#1', reason: 'EVICTED' }));
  assert.equal(s.quantized?.['m#1'], undefined, 'forgotten with the replica');
});
