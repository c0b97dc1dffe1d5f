// The test files' costs, for scheduling (scripts/test.mjs). `test-durations.json` (beside this file) holds, for each
// file (its source path, `tests/x/y.int.test.ts`), `wall`: the seconds its process ran, and `cpu`: the CPU seconds
// its process and the processes it waited for (fabrics, agents, runners) used, measured on a full run.
// `node scripts/test.mjs --record-durations` puts the run's own in it.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const TABLE = join(root, 'scripts', 'test-durations.json');

/** The table: source path → { wall, cpu } in seconds. */
export function readDurations() {
  try {
    return JSON.parse(readFileSync(TABLE, 'utf8'));
  } catch {
    return {};
  }
}

/** A compiled test file (`dist/tests/x/y.int.test.js`) as its source's path in the table. */
export function sourceOf(file, distDir) {
  return relative(root, join(root, relative(distDir, file))).replace(/\.js$/, '.ts');
}

/** Merges `measured` (source path → { wall, cpu }) into the table; files whose source is gone leave it. */
export function writeDurations(measured) {
  const merged = Object.entries({ ...readDurations(), ...measured }).filter(([f]) => existsSync(join(root, f)));
  const table = Object.fromEntries(merged.sort((a, b) => b[1].wall - a[1].wall || (a[0] < b[0] ? -1 : 1)));
  writeFileSync(TABLE, `${JSON.stringify(table, null, 1)}\n`);
  return relative(root, TABLE);
}
