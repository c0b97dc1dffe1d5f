// A sandboxed block's raw output: process.stdout/stderr writes are LOG lines of the invoke whose code wrote
// them, even while a lower invoke is still running; writes straight to fd 1/2 travel on the runner's pipes and
// all of them arrive before the last invoke's END (the runner's drain markers), markers never shown.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { HostedModel, RunResult } from '../../gpu-agent/runtime/index.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { tinyModel, tinySandbox, runUntrusted } from './helpers.js';

let hm: HostedModel;
let sb: Sandbox;

before(async () => {
  ({ sb, hm } = await tinySandbox({ poolSize: 1 }));
});

after(async () => {
  await sb.close();
  await (await tinyModel()).close();
});

function untrusted(blocks: string[]): Promise<RunResult> {
  return runUntrusted(hm, sb, blocks, 20_000);
}

const lines = (r: RunResult, invoke: number) =>
  r.logs.filter((l) => l.invoke === invoke).map((l) => `${l.stream}:${l.line}`);

test('the runner is the bundle, so what follows runs the code the agent ships', () => {
  assert.equal(sb.runnerEntry.mode, 'bundle', sb.runnerEntry.note);
});

test('raw writes are attributed to the invoke that made them, not to the lowest invoke still running', async () => {
  // Invoke 0 waits for a later module than invoke 1, so invoke 1 writes (and ends) while 0 is still open;
  // both leave a line unfinished across an await.
  const r = await untrusted([
    "async (m) => { process.stdout.write('zero: '); await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 5)); process.stdout.write('start\\n'); await m.transformer.h[1].output; process.stderr.write('zero: h1\\n'); return 0; }",
    "async (m) => { process.stdout.write('one: '); await m.transformer.h[0].output; process.stdout.write('start\\n'); await new Promise((r) => setTimeout(() => { process.stderr.write('one: timer\\n'); r(); }, 3)); globalThis.console.log('one: global console'); process.stdout.write('one: unfinished'); return 1; }",
  ]);
  assert.deepEqual(lines(r, 0), ['stdout:zero: start', 'stderr:zero: h1']);
  assert.deepEqual(lines(r, 1), [
    'stdout:one: start',
    'stderr:one: timer',
    'stdout:one: global console',
    'stdout:one: unfinished',
  ]);
});

test('every line written straight to fd 1 and 2 arrives before the last END, the unfinished one too', async () => {
  const r = await untrusted([
    `async (m) => {
      const fs = process.getBuiltinModule('fs');
      await m.transformer.h[0].output;
      for (let i = 0; i < 150; i++) fs.writeSync(1, 'fd one line ' + i + ' ' + 'x'.repeat(80) + '\\n');
      for (let i = 0; i < 50; i++) fs.writeSync(2, 'fd two line ' + i + '\\n');
      fs.writeSync(1, 'fd one without newline');
      return 1;
    }`,
  ]);
  const out = r.logs.filter((l) => l.stream === 'stdout').map((l) => l.line);
  const err = r.logs.filter((l) => l.stream === 'stderr').map((l) => l.line);
  assert.deepEqual(out, [
    ...Array.from({ length: 150 }, (_, i) => `fd one line ${i} ${'x'.repeat(80)}`),
    'fd one without newline',
  ]);
  assert.deepEqual(
    err,
    Array.from({ length: 50 }, (_, i) => `fd two line ${i}`),
  );
  assert.ok(
    r.logs.every((l) => l.invoke === 0 && !l.line.includes('\u0000')),
    'no drain marker shows',
  );
});

test('a block that closes its fd 1 costs only the bounded wait; the request still completes', async () => {
  const t0 = performance.now();
  const r = await untrusted([
    "async () => { const fs = process.getBuiltinModule('fs'); fs.writeSync(2, 'before close\\n'); fs.closeSync(1); return 7; }",
  ]);
  assert.deepEqual(r.invokes[0]!.result.tree, 7);
  assert.deepEqual(lines(r, 0), ['stderr:before close']);
  assert.ok(performance.now() - t0 < 5000);
});
