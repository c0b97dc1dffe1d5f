// The block side must load fast in a fresh sandbox process: it imports nothing heavy (no onnxruntime, no
// tokenizer library, nothing from the model host), and a cold node process has it ready quickly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const distRoot = resolve(here, '..', '..');
const entry = join(distRoot, 'gpu-agent', 'block', 'index.js');

/** Every module the entry imports, transitively, from the compiled JavaScript. */
function importGraph(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const src = readFileSync(file, 'utf8');
  for (const m of src.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
    const spec = m[1]!;
    if (spec.startsWith('.')) importGraph(resolve(dirname(file), spec), seen);
    else seen.add(spec);
  }
  return seen;
}

test('the block side imports only protocol code and node built-ins', () => {
  const graph = [...importGraph(entry)];
  const bare = graph.filter((s) => !s.startsWith('/'));
  assert.ok(
    bare.every((s) => s.startsWith('node:')),
    `bare imports: ${bare.join(', ')}`,
  );
  const local = graph.filter((s) => s.startsWith('/')).map((f) => f.slice(distRoot.length + 1));
  assert.ok(
    local.every((f) => f.startsWith('gpu-agent/block/') || f.startsWith('protocol/')),
    local.join(', '),
  );
});

test('a cold node process loads the block side', () => {
  // How fast is `npm run bench -- block-startup` (the budget for a whole sandbox runner is 150 ms).
  const script = `await import(${JSON.stringify(entry)}); console.log('loaded');`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'loaded');
});
