// The agent's tokenizer (gpu-agent/runtime/load/tokenizer.ts, the library's ES module) and a runner's
// (sandbox/runner-tokenizer.ts, its CommonJS entry loaded by path) are both protocol/text-codec.ts: the same
// ids and the same text back for the same input, special tokens and odd Unicode included.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadTokenizer } from '../../gpu-agent/runtime/load/tokenizer.js';
import { RUNNER_SCRIPT, TOKENIZER_MODULE } from '../../sandbox/launcher.js';
import { bundleRunnerSource } from '../../sandbox/runner-bundle.js';
import { lazyTokenizer } from '../../sandbox/runner-tokenizer.js';

const TEXTS = [
  'Hello sandbox',
  ' leading space and  two spaces',
  'The quick brown fox<|endoftext|>jumps',
  'naïve café — “quotes” 日本語 🧪🤖',
  'tabs\tand\nnewlines\r\n',
  '',
  "it's 2025, isn't it?",
];

test('agent and runner tokenizers give the same ids and text for the same input', () => {
  const dir = ensureModel('gpt2-tiny');
  const agent = loadTokenizer(dir)!;
  assert.ok(agent, 'the bundled model has a tokenizer');
  const cfg = join(dir, 'tokenizer_config.json');
  const runner = lazyTokenizer(
    null,
    join(dir, 'tokenizer.json'),
    existsSync(cfg) ? readFileSync(cfg, 'utf8') : null,
    TOKENIZER_MODULE,
  )!;
  for (const text of TEXTS) {
    const ids = agent.encode(text);
    assert.deepEqual(runner.encode(text), ids, JSON.stringify(text));
    assert.equal(runner.decode(ids), agent.decode(ids), JSON.stringify(text));
  }
  assert.deepEqual(agent.encode('<|endoftext|>'), [50256], 'special tokens in the text are matched, none added');
  assert.equal(agent.decode([50256]), '<|endoftext|>', 'special tokens decode as their text');
  assert.equal(runner.decode([]), '');
});

test('the runner bundle carries the shared codec module', () => {
  const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  assert.ok(bundleRunnerSource(RUNNER_SCRIPT, distRoot).modules.includes('protocol/text-codec.js'));
});
