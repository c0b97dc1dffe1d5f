// The test files' durations, for scheduling the longest first (scripts/test.mjs). `test-durations.json` (beside this
// file) holds each file's wall time in seconds, measured on a full run; `node scripts/test.mjs --record-durations`
// puts this run's in it: the default export is a node:test reporter that takes each file's wall time from the
// runner's own events (a file is dequeued when its process starts and completes when it ends) and, when the run
// ends, updates the table with them (files whose source is gone leave it).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const TABLE = join(root, 'scripts', 'test-durations.json');

/** The table: a test file's path relative to the repository root, as its source (`tests/x/y.int.test.ts`) → seconds. */
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

/**
 * The files, longest first by the table; files the table lacks (new ones) after them, in their given order. Under
 * `--test-concurrency`, node's runner starts the files in this order, so the long ones do not end the run alone.
 */
export function longestFirst(files, distDir) {
  const table = readDurations();
  const seconds = (f) => table[sourceOf(f, distDir)] ?? -1;
  return files
    .map((f, i) => ({ f, i, s: seconds(f) }))
    .sort((a, b) => b.s - a.s || a.i - b.i)
    .map((x) => x.f);
}

export default async function* durationsReporter(source) {
  const distDir = process.env.NDIF_TEST_DIST_DIR;
  const started = new Map();
  const took = {};
  for await (const event of source) {
    const { type, data } = event;
    // A file's own events carry its path as their name (nesting 0); its tests carry their titles.
    if (data?.nesting !== 0 || typeof data.name !== 'string' || data.name !== data.file) continue;
    if (type === 'test:dequeue') started.set(data.name, performance.now());
    else if (type === 'test:complete' && started.has(data.name))
      took[sourceOf(data.name, distDir)] = Math.round((performance.now() - started.get(data.name)) / 100) / 10;
  }
  const merged = Object.entries({ ...readDurations(), ...took }).filter(([f]) => existsSync(join(root, f)));
  const table = Object.fromEntries(merged.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)));
  writeFileSync(TABLE, `${JSON.stringify(table, null, 1)}\n`);
  yield `test durations: ${Object.keys(took).length} files measured, ${relative(root, TABLE)} updated\n`;
}
