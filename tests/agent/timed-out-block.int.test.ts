// A trusted block the control plane failed for its time limit may still run in its agent's process: that agent
// takes no new work until the block has really stopped — the agent reports it (RequestRunStopped), or it comes back
// as a new boot (issue 20, finding 5). On a real agent process against a real control plane, one replica of
// concurrency 1 and a 1.5 s time limit, a second request queued right behind the timed-out one:
// - a block parked on a promise that never settles, under the deployment's limit (which the control plane applies;
//   the agent only knows a request's own): the agent stops it when told and says so; the second request is
//   dispatched only after RequestRunStopped, to the same boot, and completes;
// - a synchronous spin with its own 1.5 s limit: the second request is not dispatched to the stuck agent (before: it was, waited for the
//   watchdog to end the process, and was requeued AGENT_RESTARTED); it runs on the agent's next boot and completes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, spawnAgent, type AgentProcess, type Harness, type TestEvent } from './harness.js';

const PROMPT = 'The Eiffel Tower is in';
const GOOD = 'async (m) => (await m.transformer.h[0].output).shape';
const PARKED = 'async (m) => {\n  await m.transformer.h[0].output;\n  await new Promise(() => {});\n}';
const SPIN = 'async (m) => {\n  await m.transformer.h[0].output;\n  for (;;) {}\n}';
const AGENT = 'agent-timed-out';

describe('an agent whose timed-out trusted block has not stopped takes no new work', () => {
  let h: Harness;
  let agent: AgentProcess;
  let n = 0;
  const env = () => ({ NDIF_AGENT_STATE_DIR: h.tmp });

  before(async () => {
    h = await startHarness();
    agent = spawnAgent(h, AGENT, env());
    await agent.ready;
    await h.run({
      type: 'RequestDeployment',
      modelKey: 'gpt2-tiny',
      settings: { weightsBytes: h.catalog.get('gpt2-tiny')!.weightsBytes, concurrency: 1, timeoutMs: 1500 },
      replicas: 1,
      onDemand: false,
    });
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
  });
  after(async () => {
    await agent?.stop();
    await h?.close();
  });

  async function submit(block: string, timeoutMs?: number): Promise<string> {
    const id = `req-${++n}`;
    await h.submit(id, [{ prompt: PROMPT, block }], { timeoutMs });
    return id;
  }

  /** The stuck one is running, the second queued behind it (the replica's one slot is taken). */
  async function timedOutThenQueued(
    block: string,
    timeoutMs: number | undefined,
    running: 'RequestStarted' | 'RequestDispatched',
  ): Promise<{ stuck: string; next: string; failed: TestEvent }> {
    const stuck = await submit(block, timeoutMs);
    await h.waitFor(`request-${stuck}`, running, undefined, 60_000);
    const next = await submit(GOOD);
    await h.waitFor(`request-${next}`, 'RequestQueued');
    const failed = await h.waitFor(`request-${stuck}`, 'RequestFailed', undefined, 60_000);
    assert.equal(failed.data.errorType, 'Timeout');
    assert.equal(failed.data.reportedBy, 'scheduler');
    return { stuck, next, failed };
  }

  it('a parked block: the second request waits for the agent to report the block stopped, then runs there', async () => {
    const boot = await agent.ready;
    // A parked block leaves the agent's event loop free: its start is reported once the start hold has passed.
    const { stuck, next } = await timedOutThenQueued(PARKED, undefined, 'RequestStarted');
    const stopped = await h.waitFor(`request-${stuck}`, 'RequestRunStopped', undefined, 30_000);
    assert.equal(stopped.data.agentId, AGENT);
    const done = await h.waitFor(`request-${next}`, 'RequestCompleted', undefined, 60_000);
    const dispatched = (await h.events(`request-${next}`)).filter((e) => e.type === 'RequestDispatched');
    assert.equal(dispatched.length, 1, 'dispatched once, never requeued');
    assert.ok(dispatched[0]!.position > stopped.position, 'dispatched only after the block had stopped');
    assert.ok(done.position > stopped.position);
    const regs = (await h.events(`agent-${AGENT}`)).filter((e) => e.type === 'AgentRegistered');
    assert.equal(regs.at(-1)!.data.bootId, boot, 'the same boot: nothing restarted');
  });

  it('a synchronous spin: the second request is not sent into the stuck agent; it runs on its next boot', async () => {
    const before = (await h.events(`agent-${AGENT}`)).filter((e) => e.type === 'AgentRegistered').length;
    // A block spinning from its first value usually takes the agent's event loop before the start hold has passed: its
    // start is then never reported (it shows DISPATCHED until its time limit; the watchdog's last words name it).
    const { next } = await timedOutThenQueued(SPIN, 1500, 'RequestDispatched');
    // The watchdog ends the spinning agent; its supervisor (here, the test) starts it again.
    await agent.exited;
    agent = spawnAgent(h, AGENT, env());
    await agent.ready;
    const regs = (await h.events(`agent-${AGENT}`)).filter((e) => e.type === 'AgentRegistered');
    assert.equal(regs.length, before + 1);
    await h.waitFor(`request-${next}`, 'RequestCompleted', undefined, 60_000);
    const events = await h.events(`request-${next}`);
    const dispatched = events.filter((e) => e.type === 'RequestDispatched');
    assert.deepEqual(
      events.filter((e) => e.type === 'RequestRequeued').map((e) => e.data.reason),
      [],
      'never sent into the stuck agent (which would requeue it when the agent restarted)',
    );
    assert.equal(dispatched.length, 1);
    assert.ok(dispatched[0]!.position > regs.at(-1)!.position, 'dispatched to the new boot');
  });
});
