// Every BlockError type the runtime, the block side and the sandbox produce is reported under a code of its
// own (only a block's own throw is BLOCK_ERROR), and docs/errors.md lists each code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BLOCK_CODES, InterventionError, blockErrorCode } from '../../gpu-agent/runtime/errors.js';
import { DEFAULT_LIMITS } from '../../sandbox/config.js';
import type { RunnerExit } from '../../sandbox/runner-process.js';
import { crashError } from '../../sandbox/session.js';
import { repoRoot } from './tiny-model.js';

const exit = (over: Partial<RunnerExit>): RunnerExit => ({
  code: null,
  signal: null,
  oomKilled: false,
  heapExhausted: false,
  killedBy: undefined,
  stderrTail: [],
  memoryPeakBytes: undefined,
  ...over,
});

test('a runner that died under the request fails it with the code of why it died', () => {
  const cases: Array<[RunnerExit, string, string, number]> = [
    [exit({ signal: 'SIGKILL', oomKilled: true }), 'OutOfMemory', 'BLOCK_OUT_OF_MEMORY', 400],
    [
      exit({ signal: 'SIGABRT', heapExhausted: true, stderrTail: ['FATAL ERROR: Reached heap limit'] }),
      'OutOfMemory',
      'BLOCK_OUT_OF_MEMORY',
      400,
    ],
    [exit({ signal: 'SIGXCPU' }), 'CpuLimit', 'BLOCK_CPU_LIMIT', 400],
    [exit({ code: 3, stderrTail: ['boom'] }), 'SandboxCrashed', 'BLOCK_SANDBOX_CRASHED', 500],
    [exit({ signal: 'SIGSEGV' }), 'SandboxCrashed', 'BLOCK_SANDBOX_CRASHED', 500],
  ];
  for (const [e, type, code, status] of cases) {
    const be = crashError(e, DEFAULT_LIMITS);
    assert.equal(be.type, type);
    const err = new InterventionError(be, 0);
    assert.equal(err.code, code, type);
    assert.equal(err.httpStatus, status, type);
    assert.equal((err.details as { type: string }).type, type);
  }
});

test("only a block's own throw, or a type nobody produces, is BLOCK_ERROR; inherited names are not types", () => {
  assert.equal(blockErrorCode('BlockError').code, 'BLOCK_ERROR');
  assert.equal(blockErrorCode('SomethingNew').code, 'BLOCK_ERROR');
  assert.equal(blockErrorCode('toString').code, 'BLOCK_ERROR');
  const codes = Object.entries(BLOCK_CODES)
    .filter(([type]) => type !== 'BlockError')
    .map(([, c]) => c.code);
  assert.ok(!codes.includes('BLOCK_ERROR'));
  assert.equal(new Set(codes).size, codes.length, 'one code per type');
});

test('docs/errors.md lists every code, in the runtime section', () => {
  const doc = readFileSync(join(repoRoot, 'docs', 'errors.md'), 'utf8');
  const runtime = doc.slice(doc.indexOf('## Runtime and blocks'), doc.indexOf('## Control plane'));
  for (const { code, status } of Object.values(BLOCK_CODES)) {
    assert.match(runtime, new RegExp(`\\| \`${code}\` \\| ${status} \\|`), `${code} (${status}) in docs/errors.md`);
  }
});
