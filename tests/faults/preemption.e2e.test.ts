// Fault: demotion HOT → WARM and eviction by an operator while requests run and wait, with user cancels in the
// same windows — on the embedded fabric's real processes (scenarios/preemption.ts).
import { after, before, it } from 'node:test';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import type { FaultFabric } from './fabric.js';
import { startEmbedded } from './embedded.js';
import { preemptionWindow } from './scenarios/preemption.js';

let f: FaultFabric;
before(async () => {
  f = await startEmbedded({ gpus: '1x1GiB', models: `tiny-b=${ensureModel('gpt2-tiny')}` });
});
after(() => f?.close());

it('demote and evict with requests running and queued: all requeue and complete; cancels stay cancelled, never re-run', async (t) => {
  await preemptionWindow(f, (s) => t.diagnostic(s));
});
