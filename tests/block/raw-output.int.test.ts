// Trusted blocks run in the agent's process, so their raw process.stdout/stderr writes would land in the
// agent's own output. Each invoke runs in its own async context: its raw writes (after awaits, from timers,
// through the global console) become LOG lines of that invoke, while every write the agent makes itself goes
// to the real stream untouched. Two requests run concurrently on two hosted models in this one process.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, RunResult } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';

// What reaches the process's real streams: recorded here (installed before any block runs, so the block
// side's capture wraps this recorder). Lines of this test are kept back from the test reporter.
const reached: Array<{ stream: string; text: string }> = [];
for (const stream of ['stdout', 'stderr'] as const) {
  const real = process[stream].write;
  process[stream].write = function (this: unknown, chunk: unknown, ...rest: unknown[]): boolean {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
    if (!text.includes('rawtest:')) return (real as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    reached.push({ stream, text });
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    cb?.();
    return true;
  } as typeof process.stdout.write;
}

const TOKENS = [464, 2068, 7586];
let models: HostedModel[] = [];

before(async () => {
  const dir = ensureModel('gpt2-tiny');
  models = await Promise.all([loadModel(dir, { key: 'gpt2-tiny' }), loadModel(dir, { key: 'gpt2-tiny' })]);
});

after(async () => {
  for (const hm of models) await hm.close();
});

function trusted(hm: HostedModel, blocks: string[]): Promise<RunResult> {
  return hm.run({ invokes: blocks.map((block) => ({ tokens: TOKENS, block })), timeoutMs: 20_000 }, () =>
    createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
  );
}

/** A block that writes raw lines at every turn: before and after waits, across a timer, without a newline. */
function chatty(tag: string): string {
  return `async (m, ctx) => {
    const me = 'rawtest:${tag}' + ctx.invoke;
    process.stdout.write(me + ' start\\n');
    await m.transformer.h[0].output;
    process.stdout.write(me + ' after');
    await new Promise((r) => setTimeout(r, 5));
    process.stdout.write(' h0\\n', () => {});
    await m.transformer.h[1].output;
    process.stderr.write(Buffer.from(me + ' to stderr\\n'));
    await new Promise((r) => setTimeout(() => { process.stdout.write(me + ' from a timer\\n'); r(); }, 3));
    globalThis.console.log(me + ' global console');
    process.stdout.write(me + ' unfinished');
    return ctx.invoke;
  }`;
}

function expected(tag: string, invoke: number): string[] {
  const me = `rawtest:${tag}${invoke}`;
  return [
    `stdout:${me} start`,
    `stdout:${me} after h0`,
    `stderr:${me} to stderr`,
    `stdout:${me} from a timer`,
    `stdout:${me} global console`,
    `stdout:${me} unfinished`,
  ];
}

function linesOf(r: RunResult, invoke: number): string[] {
  return r.logs.filter((l) => l.invoke === invoke).map((l) => `${l.stream}:${l.line}`);
}

test("raw writes of concurrent trusted requests are LOG lines of their own invoke; the agent's own writes are untouched", async () => {
  reached.length = 0;
  // The agent keeps writing while the blocks run.
  let ticks = 0;
  const ticker = setInterval(() => process.stdout.write(`rawtest:agent tick ${ticks++}\n`), 2);
  let a: RunResult;
  let b: RunResult;
  try {
    [a, b] = await Promise.all([trusted(models[0]!, [chatty('a'), chatty('a')]), trusted(models[1]!, [chatty('b')])]);
  } finally {
    clearInterval(ticker);
  }
  process.stderr.write('rawtest:agent after\n');

  assert.deepEqual(linesOf(a, 0), expected('a', 0));
  assert.deepEqual(linesOf(a, 1), expected('a', 1));
  assert.deepEqual(linesOf(b, 0), expected('b', 0));
  assert.equal(a.logs.length, 12, JSON.stringify(a.logs));
  assert.equal(b.logs.length, 6, JSON.stringify(b.logs));

  assert.ok(ticks > 0, 'the agent wrote while the blocks ran');
  const real = reached.map((r) => `${r.stream}:${r.text}`).join('');
  assert.doesNotMatch(real, /rawtest:[ab]\d/, 'no block line reached the real streams');
  assert.equal(
    reached.filter((r) => r.stream === 'stdout' && /^rawtest:agent tick \d+\n$/.test(r.text)).length,
    ticks,
    'every agent write reached stdout, unchanged',
  );
  assert.ok(reached.some((r) => r.stream === 'stderr' && r.text === 'rawtest:agent after\n'));
});

test("a timer a block leaves behind writes nowhere: not to the agent's streams, not to the next request", async () => {
  reached.length = 0;
  const hm = models[0]!;
  // The block's timer would write only once the test says its request has ended (a fixed 30 ms delay raced the
  // request's end on a loaded machine); the agent clears an ended request's timers, so it never does, and the next
  // request's block runs across a dozen of its periods.
  const flags = globalThis as { rawtestGo?: boolean };
  const first = await trusted(hm, [
    "async () => { const t = setInterval(() => { if (globalThis.rawtestGo) process.stdout.write('rawtest:left behind\\n'); }, 5); return 1; }",
  ]);
  assert.deepEqual(first.logs, []);
  flags.rawtestGo = true;
  const next = await trusted(hm, [
    "async (m) => { await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 60)); process.stdout.write('rawtest:next\\n'); }",
  ]);
  assert.deepEqual(
    next.logs.map((l) => l.line),
    ['rawtest:next'],
  );
  assert.deepEqual(reached, []);
});

test("code outside the block's function never runs (refused before compiling); a block that throws keeps its last line", async () => {
  const hm = models[1]!;
  const written: string[] = [];
  await assert.rejects(
    hm.run(
      {
        invokes: [{ tokens: TOKENS, block: "(process.stdout.write('rawtest:compiling\\n'), async () => 1)" }],
        timeoutMs: 20_000,
        onLog: (l) => written.push(l.line),
      },
      () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
    ),
    /BlockSyntaxError.*not a function expression but a sequence/,
  );
  assert.deepEqual(written, []);
  const lines: string[] = [];
  await assert.rejects(
    hm.run(
      {
        invokes: [
          {
            tokens: TOKENS,
            block: "async () => { process.stderr.write('rawtest:last words'); throw new Error('boom'); }",
          },
        ],
        timeoutMs: 20_000,
        onLog: (l) => lines.push(`${l.stream}:${l.line}`),
      },
      () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
    ),
    /boom/,
  );
  assert.deepEqual(lines, ['stderr:rawtest:last words']);
});
