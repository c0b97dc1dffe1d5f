// The worked examples of docs/sdk.md (a training loop, "Worked examples": activation patching, the logit lens), run as written: each
// `<!-- sdk-example: name, value: v -->` block is executed with `ndif` — a Fabric of a real fabric in this process,
// serving the bundled gpt2-tiny — in scope, and the variable it names must equal the `<!-- example-result -->` after
// it. The examples cannot drift from what the SDK and the fabric do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readDoc, sdkExamples } from '../runtime/doc-fences.js';
import { withFabricClient } from './fabric-harness.js';

const env = withFabricClient();
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
  ...args: string[]
) => (...a: unknown[]) => Promise<unknown>;

const examples = sdkExamples(readDoc('sdk.md'));

test('docs/sdk.md has the worked examples', () => {
  assert.deepEqual(
    examples.map((e) => e.name),
    ['training-loop', 'activation-patching', 'logit-lens', 'scan'],
  );
});

for (const ex of examples) {
  test(`docs/sdk.md example ${ex.name} gives the value the docs show`, async () => {
    const run = new AsyncFunction('ndif', `${ex.code}\nreturn ${ex.value};`);
    const got = JSON.parse(JSON.stringify(await run(env.ndif)));
    assert.deepEqual(got, ex.result);
  });
}
