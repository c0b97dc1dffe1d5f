// Poison requests on the embedded fabric's real processes: a trusted block that really kills its agent
// (process.abort()) takes the agent down once; its retry runs isolated (alone, in a sandbox runner) where it kills
// only a runner, and it fails with AGENT_CRASHED_BY_REQUEST carrying the evidence (boots, the SIGABRT, the
// agent's last stderr lines), while the 10 requests queued behind it all complete after one restart. A trusted
// block stuck in a synchronous loop is ended by the agent's watchdog (its last words say why) and its isolated
// retry times out in the sandbox; `why` tells both stories.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FaultFabric } from './fabric.js';
import { startEmbedded } from './embedded.js';
import { call, expectOk, hot, requestIn, submit } from './http.js';

const GOOD = 'async (m) => (await m.transformer.h[1].output).shape';

async function agentRegistrations(f: FaultFabric): Promise<Array<Record<string, unknown>>> {
  const { store, close } = await f.openStore();
  try {
    return (await store.readStream(`agent-${f.agentId}`))
      .filter((e) => e.type === 'AgentRegistered')
      .map((e) => e.data as Record<string, unknown>);
  } finally {
    await close();
  }
}

async function failureOf(f: FaultFabric, requestId: string): Promise<Record<string, unknown>> {
  const { store, close } = await f.openStore();
  try {
    return (await store.readStream(`request-${requestId}`)).find((e) => e.type === 'RequestFailed')!.data as Record<
      string,
      unknown
    >;
  } finally {
    await close();
  }
}

describe('poison requests', () => {
  let f: FaultFabric;
  before(async () => {
    f = await startEmbedded({ env: { NDIF_AGENT_STALL_MS: '2000', NDIF_AGENT_RESTART_MS: '100' } });
    // Deployed on demand by the first request; wait for it so the poison is the first request to run.
    await expectOk(submit(f, 'warm-up', { block: GOOD }), 'submit the warm-up');
    await requestIn(f, 'warm-up', ['COMPLETED'], 60_000);
    await hot(f, 'gpt2-tiny');
  });
  after(() => f?.close());

  it('a block that aborts its agent fails after its second attempt with the evidence; 10 queued behind it complete', async () => {
    const before = (await agentRegistrations(f)).length;
    await expectOk(
      submit(f, 'poison-1', { block: 'async (m) => {\n  await m.transformer.h[0].output;\n  process.abort();\n}' }),
      'submit the poison',
    );
    for (let i = 0; i < 10; i++) await expectOk(submit(f, `good-${i}`, { block: GOOD }), `submit good-${i}`);
    const poison = await requestIn(f, 'poison-1', ['ERROR', 'COMPLETED'], 60_000);
    assert.equal(poison.status, 'ERROR');
    const error = poison.error as Record<string, string>;
    assert.equal(error.type, 'AGENT_CRASHED_BY_REQUEST');
    assert.match(error.message, /agent local-agent died during attempt 1 \(boot \w+ → \w+; signal SIGABRT/);
    assert.match(error.message, /attempt 2 ran isolated in a sandbox runner, which died too: .*signal SIGABRT/);
    for (let i = 0; i < 10; i++)
      assert.equal(
        (await requestIn(f, `good-${i}`, ['COMPLETED', 'ERROR'], 60_000)).status,
        'COMPLETED',
        `good-${i} completed`,
      );

    const regs = await agentRegistrations(f);
    assert.equal(regs.length - before, 1, 'the agent restarted once: the retry killed only a sandbox runner');
    const exit = regs.at(-1)!.previousExit as Record<string, unknown>;
    assert.equal(exit.signal, 'SIGABRT', 'the new boot reported how the old one ended');
    assert.ok(Array.isArray(exit.stderrTail));

    const failed = await failureOf(f, 'poison-1');
    const evidence = failed.evidence as { crashes: Array<Record<string, unknown>>; finalAttempt: string };
    assert.equal(evidence.crashes.length, 1);
    assert.equal(evidence.crashes[0]!.attempt, 1);
    assert.equal(evidence.crashes[0]!.nextBootId, regs.at(-1)!.bootId);
    assert.equal((evidence.crashes[0]!.exit as Record<string, unknown>).signal, 'SIGABRT');
    assert.match(evidence.finalAttempt, /sandbox runner/);

    const why = await fetch(`${f.queryUrl}/why/poison-1?format=text`, { headers: f.operatorHeaders });
    assert.equal(why.status, 200);
    const text = await why.text();
    assert.match(
      text,
      /\(AGENT_RESTARTED\).*agent local-agent died during attempt 1 \(boot \w+ → \w+; signal SIGABRT.*poison suspect/,
    );
    assert.match(text, /attempt 2 dispatched isolated/);
    assert.match(text, /AGENT_CRASHED_BY_REQUEST/);
  });

  it('a trusted block stuck in a synchronous loop: the watchdog ends the agent once, the isolated retry times out', async () => {
    const before = (await agentRegistrations(f)).length;
    await expectOk(
      call(f.commandUrl, '/requests', {
        body: {
          requestId: 'spin-1',
          model: 'gpt2-tiny',
          timeoutMs: 3000,
          invokes: [{ input: 'hi', block: 'async (m) => { for (;;) {} }' }],
        },
      }),
      'submit the spin',
    );
    await expectOk(submit(f, 'good-after-spin', { block: GOOD }), 'submit good');
    const spin = await requestIn(f, 'spin-1', ['ERROR', 'COMPLETED'], 60_000);
    assert.equal(spin.status, 'ERROR');
    assert.equal((spin.error as Record<string, string>).type, 'Timeout');
    assert.equal((await requestIn(f, 'good-after-spin', ['COMPLETED', 'ERROR'], 60_000)).status, 'COMPLETED');
    const regs = await agentRegistrations(f);
    assert.equal(regs.length - before, 1, 'one restart');
    const exit = regs.at(-1)!.previousExit as Record<string, unknown>;
    assert.match(
      String(exit.cause),
      /watchdog: the event loop was blocked for \d+ ms \(limit 2000 ms\) while running spin-1/,
    );
    assert.deepEqual(exit.running, ['spin-1']);
    assert.equal(exit.signal, 'SIGKILL');
  });
});
