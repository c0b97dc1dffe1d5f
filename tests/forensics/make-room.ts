// A scripted make-room on the real control plane: one agent with one 24 GiB GPU, replicas a#1 and b#1 of 8 GiB
// placed and two hours old, request ra running on a#1; request rc for c (12 GiB) deploys c on demand, which makes
// room by demoting a#1 (or, with `ramGib` too small for a's weights in the CPU cache, removing it) — ra is requeued
// first — and everything then completes.
import { GIB } from '../../domain/placement/size.js';
import { GoldenHarness } from '../golden/harness.js';
import { runFor, ScriptedAgent, settle } from '../golden/scripted-agent.js';

export const HOUR = 3_600_000;
const size = (gib: number) => ({ weightsBytes: 4 * GIB, sizeBytes: gib * GIB });

export async function makeRoomScenario(options: { ramGib?: number; path?: string } = {}): Promise<GoldenHarness> {
  const h = await GoldenHarness.start('make-room', {
    onDemand: { a: { settings: size(8) }, b: { settings: size(8) }, c: { settings: size(12) } },
    path: options.path,
  });
  const agent = new ScriptedAgent(h, 'a1', [24], options.ramGib ?? 64, 1000);
  await agent.register();
  for (const m of ['a', 'b']) {
    await h.run({ type: 'RequestDeployment', modelKey: m, settings: size(8), replicas: 1, onDemand: false }, 'key:ops');
    await settle(h, [agent]);
  }
  h.advance(2 * HOUR);
  await agent.heartbeat();
  const submit = (requestId: string, modelKey: string) =>
    h.run(
      {
        type: 'SubmitRequest',
        requestId,
        modelKey,
        submitter: 'key:alice',
        priority: false,
        trusted: true,
        payload: { prompt: 'hello' },
      },
      'key:alice',
    );
  await submit('ra', 'a');
  await settle(h, [agent]);
  await submit('rc', 'c');
  await settle(h, [agent]);
  await runFor(h, [agent], 6000, 1000);
  return h;
}
