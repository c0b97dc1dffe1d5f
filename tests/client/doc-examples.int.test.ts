// The worked examples of docs/sdk.md ("Worked examples": activation patching, the logit lens), run as written: each
// `<!-- sdk-example: name, value: v -->` block is executed with `ndif` — a Fabric of a real fabric in this process,
// serving the bundled gpt2-tiny — in scope, and the variable it names must equal the `<!-- example-result -->` after
// it. The examples cannot drift from what the SDK and the fabric do.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Fabric } from '../../client/sdk/index.js';
import { readDoc, sdkExamples } from '../runtime/doc-fences.js';
import { startInProcessFabric } from './fabric-harness.js';
import type { InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;
let ndif: Fabric;
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...args: string[]) => (...a: unknown[]) => Promise<unknown>;

before(async () => {
  fab = await startInProcessFabric();
  ndif = new Fabric({ url: fab.url, progress: false, onLog: null });
});
after(async () => {
  ndif.close();
  await fab.close();
});

const examples = sdkExamples(readDoc('sdk.md'));

test('docs/sdk.md has the worked examples', () => {
  assert.deepEqual(examples.map((e) => e.name), ['activation-patching', 'logit-lens']);
});

for (const ex of examples) {
  test(`docs/sdk.md example ${ex.name} gives the value the docs show`, async () => {
    const run = new AsyncFunction('ndif', `${ex.code}\nreturn ${ex.value};`);
    const got = JSON.parse(JSON.stringify(await run(ndif)));
    assert.deepEqual(got, ex.result);
  });
}
