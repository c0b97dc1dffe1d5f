// The block side's output contexts (gpu-agent/block/containment/invoke-output.ts): a write belongs to the invoke whose
// code is running — across awaits, timers and interleaved invokes —, writes outside every invoke reach the
// real stream (or the handler set for them), and the stream's write contract holds (callback, encodings).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  InvokeOutput,
  currentInvokeOutput,
  routeWritesOutsideInvokes,
  runAsInvoke,
} from '../../gpu-agent/block/containment/invoke-output.js';

// The real stream, as the capture sees it: this test's lines are recorded, everything else (the test
// reporter's output) passes.
const reached: string[] = [];
const real = process.stdout.write;
process.stdout.write = function (this: unknown, chunk: unknown, ...rest: unknown[]): boolean {
  const text = String(chunk);
  if (!text.startsWith('iotest:')) return (real as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  reached.push(text);
  return true;
} as typeof process.stdout.write;

function collector(invoke: number) {
  const lines: string[] = [];
  return { lines, output: new InvokeOutput(invoke, (stream, line) => lines.push(`${stream}:${line}`)) };
}

test('interleaved invokes each get their own lines, across awaits and timers', async () => {
  reached.length = 0;
  const a = collector(0);
  const b = collector(1);
  const tick = () => new Promise((r) => setTimeout(r, 1));
  const body = (name: string) => async () => {
    process.stdout.write(`${name} one `);
    await tick();
    process.stdout.write(`${name} two\n`);
    await new Promise<void>((r) =>
      setImmediate(() => {
        process.stderr.write(`${name} immediate\n`);
        r();
      }),
    );
    assert.equal(currentInvokeOutput()?.invoke, name === 'a' ? 0 : 1);
    process.stdout.write(`${name} end`);
  };
  const pa = runAsInvoke(a.output, body('a'));
  const pb = runAsInvoke(b.output, body('b'));
  process.stdout.write('iotest: outside\n');
  await Promise.all([pa, pb]);
  a.output.flush();
  b.output.flush();
  assert.deepEqual(a.lines, ['stdout:a one a two', 'stderr:a immediate', 'stdout:a end']);
  assert.deepEqual(b.lines, ['stdout:b one b two', 'stderr:b immediate', 'stdout:b end']);
  assert.equal(currentInvokeOutput(), undefined);
  assert.deepEqual(reached, ['iotest: outside\n']);
});

test('the write contract: callbacks run, encodings and bytes decode, lone surrogates are replaced', async () => {
  const c = collector(0);
  let called = 0;
  await runAsInvoke(c.output, async () => {
    assert.equal(
      process.stdout.write('cb\n', () => called++),
      true,
    );
    process.stdout.write('68657820', 'hex', () => called++);
    process.stdout.write('YmFzZTY0IA==', 'base64');
    process.stdout.write('bytes: ');
    process.stdout.write(new Uint8Array([0xc3, 0xa9, 0x0a]));
    process.stdout.write('lone \ud800 surrogate\n');
    await new Promise((r) => setTimeout(r, 1));
  });
  assert.equal(called, 2);
  assert.deepEqual(c.lines, ['stdout:cb', 'stdout:hex base64 bytes: é', 'stdout:lone \ufffd surrogate']);
});

test('writes outside every invoke go to the handler while one is set, then to the real stream again', () => {
  reached.length = 0;
  const routed: string[] = [];
  routeWritesOutsideInvokes((stream, text) => routed.push(`${stream}:${text}`));
  try {
    process.stdout.write('iotest: routed\n');
    process.stderr.write('iotest: routed err\n');
  } finally {
    routeWritesOutsideInvokes(undefined);
  }
  process.stdout.write('iotest: real again\n');
  assert.deepEqual(routed, ['stdout:iotest: routed\n', 'stderr:iotest: routed err\n']);
  assert.deepEqual(reached, ['iotest: real again\n']);
});
