// What crosses the sandbox boundary besides values: a block's stdout and stderr as LOG lines, its errors
// with phase, type, message and its own stack (OutOfOrder stays OutOfOrder, never a broken pipe), a runner
// that dies mid-request (exit code or signal), and a runner that writes garbage on its socket.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, RunResult } from '../../gpu-agent/runtime/index.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import { tinyModel, tinySandbox, runUntrusted, TOKENS } from './helpers.js';

let hm: HostedModel;
let sb: Sandbox;

before(async () => {
  ({ sb, hm } = await tinySandbox({ poolSize: 1 }));
});

after(async () => {
  await sb.close();
  await (await tinyModel()).close();
});

function untrusted(block: string | string[]): Promise<RunResult> {
  return runUntrusted(hm, sb, Array.isArray(block) ? block : [block], 10_000);
}

function blockFailure(check: (e: InterventionError) => void) {
  return (e: unknown) => {
    assert.ok(e instanceof InterventionError, `an InterventionError, got ${String(e)}`);
    check(e);
    return true;
  };
}

test("a block's console and raw stdout/stderr writes arrive as LOG lines, in order", async () => {
  const r = await untrusted(`async (m) => {
    console.log('console line', { n: 1 });
    console.error('console error');
    process.stdout.write('partial ');
    process.stdout.write('line\\nsecond line\\n');
    process.stderr.write('raw stderr\\n');
    process.stdout.write('no newline at the end');
    return 1;
  }`);
  const lines = r.logs.map((l) => `${l.stream}:${l.line}`);
  assert.deepEqual(lines, [
    'stdout:console line { n: 1 }',
    'stderr:console error',
    'stdout:partial line',
    'stdout:second line',
    'stderr:raw stderr',
    'stdout:no newline at the end',
  ]);
  assert.ok(r.logs.every((l) => l.invoke === 0));
});

test('writes that bypass process.stdout (straight to fd 1 and 2) still arrive as LOG lines', async () => {
  const r = await untrusted(`async (m) => {
    const fs = process.getBuiltinModule('fs');
    fs.writeSync(1, 'fd one\\n');
    fs.writeSync(2, 'fd two\\n');
    await m.transformer.h[1].output;
    return 1;
  }`);
  assert.ok(
    r.logs.some((l) => l.stream === 'stdout' && l.line === 'fd one'),
    JSON.stringify(r.logs),
  );
  assert.ok(
    r.logs.some((l) => l.stream === 'stderr' && l.line === 'fd two'),
    JSON.stringify(r.logs),
  );
});

test("an out-of-order access reports OutOfOrder with the user's stack, not a broken pipe", async () => {
  await assert.rejects(
    untrusted('async (m) => {\n  await m.transformer.h[1].output;\n  return await m.transformer.h[0].output;\n}'),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'OutOfOrder');
      assert.equal(e.blockError.phase, 'execute');
      assert.match(e.blockError.message, /transformer\.h\.0\.output/);
      assert.match(e.blockError.stack ?? '', /block-0\.js:3/);
      assert.doesNotMatch(e.blockError.stack ?? '', /runner-main|gpu-agent|node:internal/);
    }),
  );
});

test("a block's own error keeps its message and its own frames; a syntax error is a deserialize error", async () => {
  await assert.rejects(
    untrusted(
      "async (m) => {\n  const h = await m.transformer.h[0].output;\n  throw new RangeError('bad index ' + h.shape[1]);\n}",
    ),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'BlockError');
      assert.match(e.blockError.message, /RangeError: bad index 3/);
      assert.match(e.blockError.stack ?? '', /block-0\.js:3/);
    }),
  );
  await assert.rejects(
    untrusted('async (m) => { return ; ; ) }'),
    blockFailure((e) => {
      assert.equal(e.blockError.phase, 'deserialize');
      assert.equal(e.blockError.type, 'BlockSyntaxError');
    }),
  );
});

test('a runner that dies mid-request is reported as SandboxCrashed with its exit code or signal', async () => {
  await assert.rejects(
    untrusted('async (m) => { await m.transformer.h[0].output; process.reallyExit(7); }'),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'SandboxCrashed');
      assert.match(e.blockError.message, /exit code 7/);
    }),
  );
  await assert.rejects(
    untrusted('async (m) => { process.abort(); }'),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'SandboxCrashed');
      assert.match(e.blockError.message, /signal SIGABRT/);
    }),
  );
  const r = await untrusted('async (m) => (await m.transformer.h[0].output).shape');
  assert.deepEqual(r.invokes[0]!.result.tree, [1, 3, 64]);
});

test("a block's fault in a runner fails its request with the fault, not a dead runner", async () => {
  await assert.rejects(
    untrusted(
      "async (m) => {\n  Promise.reject(new Error('unhandled in the runner'));\n  await m.transformer.h[1].output;\n}",
    ),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'UnhandledRejection');
      assert.match(e.blockError.message, /\(line 2, column \d+\): Error: unhandled in the runner/);
    }),
  );
});

test("a runner that dies shows the block's own output and SandboxCrashed, never the runner's fatal report", async () => {
  const logs: string[] = [];
  await assert.rejects(
    hm.run(
      {
        invokes: [
          {
            tokens: TOKENS,
            block:
              "async (m) => {\n  console.log('mine before the crash');\n  process.getBuiltinModule('fs').writeSync(2, 'my raw line\\n');\n  await new Promise((r) => setTimeout(r, 400));\n  process.removeAllListeners('unhandledRejection');\n  process.removeAllListeners('uncaughtException');\n  Promise.reject(new Error('raw crash'));\n  await new Promise((r) => setTimeout(r, 200));\n}",
          },
        ],
        timeoutMs: 10_000,
        onLog: (l) => logs.push(`${l.stream}:${l.line}`),
      },
      sb.opener('gpt2-tiny'),
    ),
    blockFailure((e) => {
      assert.equal(e.blockError.type, 'SandboxCrashed');
      assert.match(e.blockError.message, /the sandbox runner died during the request \(exit code \d+\)/);
      assert.doesNotMatch(e.blockError.message, /runner\.cjs|runner-main|node:internal|Node\.js v/);
    }),
  );
  assert.deepEqual(
    logs,
    ['stdout:mine before the crash', 'stderr:my raw line'],
    "the block's own lines, and nothing the runner printed as it died",
  );
});

test('garbage written on the runner socket is a ProtocolError (phase protocol); the runner is dropped', async () => {
  await assert.rejects(
    untrusted(
      "async (m) => { process.getBuiltinModule('fs').writeSync(3, Buffer.from([1, 0, 0, 0, 0x7f])); await m.transformer.h[0].output; }",
    ),
    blockFailure((e) => {
      assert.equal(e.blockError.phase, 'protocol');
      assert.equal(e.blockError.type, 'ProtocolError');
      assert.match(e.blockError.message, /FRAME_UNKNOWN_TAG/);
    }),
  );
  const r = await untrusted('async (m) => (await m.transformer.h[0].output).shape');
  assert.deepEqual(r.invokes[0]!.result.tree, [1, 3, 64]);
});

test('several invokes in one runner: each gets its own LOG lines and its own error', async () => {
  await assert.rejects(
    untrusted([
      "async (m) => { console.log('from 0'); return (await m.transformer.h[0].output).shape; }",
      "async (m) => { console.log('from 1'); throw new Error('only invoke 1 fails'); }",
    ]),
    blockFailure((e) => {
      assert.match(e.message, /only invoke 1 fails/);
    }),
  );
});

test("runUntrusted's own timeout and signal: the runner is killed, open invokes get Timeout / Cancelled", async () => {
  const start = (source: string) => ({
    kind: 'START' as const,
    requestId: 'direct',
    steps: 1,
    cache: false,
    invokes: [{ invoke: 0, source, tokens: TOKENS, batchStart: 0, batchSize: 1 }],
  });
  const s = await sb.runUntrusted({ model: 'gpt2-tiny', timeoutMs: 300 });
  s.send(start('async () => { for (;;) {} }'));
  const m = await s.receive();
  assert.equal(m.kind, 'EXCEPTION');
  assert.equal(m.kind === 'EXCEPTION' && m.error.type, 'Timeout');
  const report = await s.report;
  assert.equal(report.outcome, 'timeout');
  assert.equal(report.exit.killedBy, 'timeout');
  assert.equal(report.exit.signal, 'SIGKILL');

  const ac = new AbortController();
  const c = await sb.runUntrusted({ model: 'gpt2-tiny', signal: ac.signal });
  ac.abort();
  await assert.rejects(c.receive(), (e: unknown) => (e as { code?: string }).code === 'SANDBOX_CANCELLED');
  assert.equal((await c.report).outcome, 'cancelled');
});
