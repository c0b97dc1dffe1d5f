import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AGENT_COMMANDS, everyOf } from '../../domain/commands.js';
import { routeOf } from '../../command-api/handlers/commands.js';

test('a command list that leaves out a command of its union does not compile', () => {
  const list = everyOf<'A' | 'B'>();
  assert.deepEqual(list(['A', 'B']), ['A', 'B']);
  // @ts-expect-error 'B' is missing
  list(['A']);
  // @ts-expect-error 'C' is not a member
  list(['A', 'B', 'C']);
});

test('each command goes to its aggregate stream', () => {
  assert.equal(routeOf({ type: 'DrainAgent', agentId: 'a1', actor: 'op' }).streamId, 'agent-a1');
  assert.ok(AGENT_COMMANDS.includes('DrainAgent'));
  assert.equal(routeOf({ type: 'RegisterModel', modelKey: 'gpt2' } as never).streamId.startsWith('model-'), true);
  assert.equal(
    routeOf({ type: 'EvictReplica', replicaId: 'gpt2#1' } as never).streamId,
    routeOf({ type: 'ScaleDeployment', modelKey: 'gpt2' } as never).streamId,
  );
  assert.throws(
    () => routeOf({ type: 'EvictReplica', replicaId: 'nohash' } as never),
    /CP_REPLICA_NOT_FOUND|not a replica id/,
  );
});
