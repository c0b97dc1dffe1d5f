// The soak (tests/soak/driver.ts) on the embedded fabric's real processes: 20 clients, an operator deploying,
// scaling, evicting and pinning at random, kill -9 of the agent every few seconds, in compressed time. Every
// request ends COMPLETED, ERROR with a reason, or CANCELLED by its owner; none lost, none stuck, none twice.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { runSoak } from './driver.js';

it('soak: 20 clients, operator chaos and agent kills — none lost, none stuck, none finished twice', async (t) => {
  const r = await runSoak({ log: (s) => t.diagnostic(s) });
  t.diagnostic(JSON.stringify(r));
  console.log(
    `soak: ${r.requests} requests: ${r.completed} completed, ${r.errored_with_reason} errored with a reason, ${r.cancelled} cancelled by their owner; lost ${r.lost}, stuck ${r.stuck}, duplicates ${r.duplicates}; ${r.agent_kills} agent kills, requeues ${JSON.stringify(r.requeues)}`,
  );
  assert.equal(r.lost, 0, 'none lost');
  assert.equal(r.stuck, 0, 'none stuck');
  assert.equal(r.duplicates, 0, 'none finished twice');
  assert.equal(r.errored_without_reason, 0);
  assert.equal(r.cancelled_not_by_owner, 0);
  assert.equal(r.completed + r.errored_with_reason + r.cancelled, r.requests);
  assert.equal(r.unexpected_errors, 0, `only the errors the clients asked for: ${JSON.stringify(r.errors_by_type)}`);
  assert.ok(r.projection_equals_rebuild, 'the live projection equals a fresh fold of the log');
  assert.ok(r.agent_kills >= 3, `the agent was killed ${r.agent_kills} times`);
  assert.ok(r.requests >= 100, `${r.requests} requests`);
  assert.deepEqual(r.refused_submits, {});
});
