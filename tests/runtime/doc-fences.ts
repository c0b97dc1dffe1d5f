// The examples docs/ holds as fenced code blocks after a marker (`<!-- example: name -->`,
// `<!-- example-result: name -->`, `<!-- sdk-example: name, value: v -->`), read so tests execute them as written.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './tiny-model.js';

export function readDoc(name: string): string {
  return readFileSync(join(repoRoot, 'docs', name), 'utf8');
}

/** The first fenced block after `marker` in `doc`. */
export function fenced(doc: string, marker: string): string {
  const at = doc.indexOf(marker);
  assert.ok(at >= 0, `the document has ${marker}`);
  const m = /```\w*\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(m, `a fenced block after ${marker}`);
  return m[1]!;
}

/** Every `<!-- sdk-example: <name>, value: <variable> -->` marker of `doc`. */
export function sdkExamples(doc: string): Array<{ name: string; value: string; code: string; result: unknown }> {
  return [...doc.matchAll(/<!-- sdk-example: ([\w-]+), value: (\w+) -->/g)].map((m) => ({
    name: m[1]!,
    value: m[2]!,
    code: fenced(doc, m[0]),
    result: JSON.parse(fenced(doc, `<!-- example-result: ${m[1]} -->`)),
  }));
}
