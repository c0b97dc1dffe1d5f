// A block that logs without end (400,000 lines) ends the same way trusted (in the agent) and untrusted (in a sandbox
// runner): the request completes, its log holds the attempt's first NDIF_LOG_MAX_LINES lines and one LOG_TRUNCATED
// note, and the process that ran the block stays within its memory (the runner once died OutOfMemory with a few
// hundred lines delivered: every line was queued on its socket before the agent could drop it).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHarness, spawnAgent, type AgentProcess, type Harness } from './harness.js';

const FLOOD = "async (m) => {\n  for (let i = 0; i < 400000; i++) console.log('flood line ' + i);\n  return 'done';\n}";

describe('log flood: the same rule trusted and untrusted', () => {
  let h: Harness;
  let agent: AgentProcess;

  before(async () => {
    h = await startHarness();
    agent = spawnAgent(h, 'agent-flood', { NDIF_SANDBOX_POOL_SIZE: '1' });
    await agent.ready;
    await h.deploy('gpt2-tiny');
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
  });
  after(async () => {
    await agent?.stop();
    await h?.close();
  });

  for (const trusted of [true, false]) {
    it(`${trusted ? 'trusted' : 'untrusted'}: completes with 10,000 lines kept and a LOG_TRUNCATED note`, async () => {
      const id = `flood-${trusted ? 't' : 'u'}`;
      await h.submit(id, [{ prompt: 'The Eiffel Tower is in', block: FLOOD }], { trusted });
      const end = await h
        .waitFor(`request-${id}`, 'RequestCompleted', undefined, 90_000)
        .catch(
          async (e: Error) =>
            (await h.events(`request-${id}`)).find((x) => x.type === 'RequestFailed') ?? Promise.reject(e),
        );
      assert.equal(end.type, 'RequestCompleted', `the request ended ${end.data.errorType}: ${end.data.message}`);
      const events = await h.events(`request-${id}`);
      const lines = events.filter((e) => e.type === 'RequestLogged').flatMap((e) => e.data.lines as { line: string }[]);
      assert.equal(lines.length, 10_000, 'the first 10,000 lines were delivered');
      assert.equal(lines[0]!.line, 'flood line 0');
      assert.equal(lines.at(-1)!.line, 'flood line 9999');
      const truncated = events.filter((e) => e.type === 'RequestLogTruncated');
      assert.equal(truncated.length, 1, 'one LOG_TRUNCATED note');
      assert.equal(truncated[0]!.data.keptLines, 10_000);
    });
  }
});
